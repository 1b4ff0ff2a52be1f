"""CG018 gradient-shape."""

from typing import Iterator

import libcst as cst

from cglint.diagnostics import Finding
from cglint.model import GradientSite
from cglint.samples import gradient_shape_mismatch
from cglint.rules.base import Invalid, Rule


class GradientShape(Rule):
    """
    ## What it does
    Flags a grad fn that returns a gradient reduced to another shape than its input's (or
    variable's), where the maths can be evaluated (the project's NumPy versions of the ops, on
    sample arrays): each input at a sample shape and, with several inputs, each at the shape
    that broadcasts against the others (a per-channel `alpha` of shape (C,) against `x` of shape
    (N, C)). The cause is a reduction over every axis (`tf.reduce_sum(t)`, a scalar) or over the
    wrong ones, where the gradient of a broadcast input is summed over the broadcast axes only.
    A gradient left at the output's shape (code written for inputs of one shape) and a zero
    gradient (a stop) are not flagged, nor a gradient summed over every axis for an input that a
    call in the module passes a Python number (followed through names, defaults and
    `tf.convert_to_tensor` / `tf.cast`: `def swish(features, beta=1.0)`), where a scalar is
    the shape it has, unless another call passes it an array cglint computes (`tf.ones([3])`).
    Without such a call an input that broadcasts is taken to be per-channel.

    ## Why is this bad?
    TensorFlow 2.21 does not check the shapes a grad fn returns: for `alpha` of shape (3,),
    `tape.gradient` handed back the scalar gradient (shape ()) as it was, and an optimizer
    applying it to a variable of shape (3,) raised "Cannot update variable with shape [3] using
    a Tensor with shape [], shapes must be equal"; reduced over the wrong axis it gave shape
    (2,) for the same variable. Where the input came out of another op, that op's gradient
    broadcasts the wrong gradient silently. Sum over the broadcast axes and keep the input's
    shape: `tf.reduce_sum(g, axis=0)` for (C,) against (N, C), or
    `tf.reshape(tf.reduce_sum(g, axis=axes), tf.shape(alpha))`.
    """

    code = "CG018"
    name = "gradient-shape"
    summary = "A returned gradient's shape differs from its input's"

    INVALID = [
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def prelu(x, alpha):
    positive = x > 0.0
    y = tf.where(positive, x, alpha * x)

    def grad(dy):
        dx = tf.where(positive, dy, alpha * dy)
        dalpha = tf.reduce_sum(tf.where(positive, tf.zeros_like(x), x * dy))
        return dx, dalpha

    return y, grad
''',
            at="12:20"),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def prelu(x, alpha):
    positive = x > 0.0
    y = tf.where(positive, x, alpha * x)

    def grad(dy):
        dx = tf.where(positive, dy, alpha * dy)
        dalpha = tf.reduce_sum(tf.where(positive, tf.zeros_like(x), x * dy), axis=1)
        return dx, dalpha

    return y, grad
''',
            at="12:20"),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def bias_relu(x, b):
    y = tf.nn.relu(x + b)

    def grad(dy):
        g = tf.where(y > 0.0, dy, 0.0)
        return g, tf.reduce_sum(g)

    return y, grad
''',
            at="10:19"),
        # No call passes `beta` a scalar: it is taken to broadcast, one slope per channel
        # (TensorFlow 2.21: for `beta` of shape (3,) the gradient came back of shape ()).
        Invalid(
            '''
import tensorflow as tf


def swish(features, beta):
    # beta: one slope per channel
    features = tf.convert_to_tensor(features)
    beta = tf.cast(tf.convert_to_tensor(beta), features.dtype)

    @tf.custom_gradient
    def swish_impl(features, beta):
        def grad(dy):
            s = tf.sigmoid(beta * features)
            activation_grad = s * (1.0 + beta * features * (1.0 - s))
            beta_grad = tf.reduce_sum(dy * tf.square(features) * s * (1.0 - s))
            return dy * activation_grad, beta_grad

        y = features * tf.sigmoid(beta * features)
        return y, grad

    return swish_impl(features, beta)
''',
            at="16:42"),
    ]
    VALID = [
        '''
import tensorflow as tf

@tf.custom_gradient
def bias_relu(x, b):
    y = tf.nn.relu(x + b)

    def grad(dy):
        g = tf.where(y > 0.0, dy, 0.0)
        return g, tf.reduce_sum(g, axis=0)

    return y, grad
''',
        # Written for inputs of one shape: the gradient is left at the output's shape.
        '''
import tensorflow as tf

@tf.custom_gradient
def scaled_tanh(x, scale):
    t = tf.tanh(x)

    def grad(dy):
        return dy * scale * (1.0 - t * t), dy * t

    return scale * t, grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def prelu(x, alpha):
    positive = x > 0.0
    y = tf.where(positive, x, alpha * x)

    def grad(dy):
        dx = tf.where(positive, dy, alpha * dy)
        dalpha = tf.reduce_sum(tf.where(positive, tf.zeros_like(x), x * dy), axis=0)
        return dx, dalpha

    return y, grad
''',
        # `beta` is a scalar (its default, 1.0, reaches the call): summed over every axis is
        # right (TensorFlow 2.21: equal to autodiff for a scalar `beta`).
        '''
import tensorflow as tf


def swish(features, beta=1.0):
    features = tf.convert_to_tensor(features)
    beta = tf.cast(tf.convert_to_tensor(beta), features.dtype)

    @tf.custom_gradient
    def swish_impl(features, beta):
        def grad(dy):
            s = tf.sigmoid(beta * features)
            activation_grad = s * (1.0 + beta * features * (1.0 - s))
            beta_grad = tf.reduce_sum(dy * tf.square(features) * s * (1.0 - s))
            return dy * activation_grad, beta_grad

        y = features * tf.sigmoid(beta * features)
        return y, grad

    return swish_impl(features, beta)
''',
    ]

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        if len(site.grad_fns) != 1:
            return
        hit = gradient_shape_mismatch(site.model, site)
        if hit is None:
            return
        grad = site.grad_fns[0]
        returns = [r.value for r in grad.returns if r.value is not None]
        anchor = returns[0] if len(returns) == 1 else grad.anchor
        if (isinstance(anchor, cst.Tuple) and not site.variables and len(anchor.elements) == len(site.inputs)
                and hit.slot < len(anchor.elements)):
            anchor = anchor.elements[hit.slot].value
        shapes = ", ".join(f"`{n}` of shape {s}" for n, s in hit.shapes.items())
        yield Finding(
            anchor,
            f"`{grad.name}` returns a gradient of shape {hit.got} for `{hit.name}`, of shape {hit.want} "
            f"(evaluated with {shapes}): TensorFlow does not check it, hands the wrong shape back or "
            "broadcasts it into the op before, and an optimizer's update fails; reduce over the axes the "
            "input was broadcast along only, keeping its shape",
        )
