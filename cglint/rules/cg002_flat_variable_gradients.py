"""CG002 flat-variable-gradients."""

from typing import Iterator

from cglint.diagnostics import Finding
from cglint.model import LIST, NONE, TENSOR, TUPLE, GradientSite, kind_of
from cglint.rules.base import Rule


class FlatVariableGradients(Rule):
    """
    ## What it does
    Flags a grad fn that returns variable gradients flat, `return dx, dw, db`, or with the
    variable gradients not as a list, when the forward reads trainable variables.

    ## Why is this bad?
    When the forward reads `tf.Variable`s that are not inputs, TensorFlow unpacks the grad
    fn's result as exactly two parts, `input_grads, variable_grads = result`, and requires
    `variable_grads` to be a list with one gradient per entry of `variables`. A flat
    `(dx, dw, db)` raises `ValueError: too many values to unpack (expected 2)`; a tensor or
    tuple in place of the list fails or, worse, is split along its first axis.
    """

    code = "CG002"
    name = "flat-variable-gradients"
    summary = "Variable gradients returned flat, or not as a list, where `(input_grads, [var_grads])` is required"

    INVALID = [
        '''
import tensorflow as tf

w = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
b = tf.Variable([0.5, -0.5])

@tf.custom_gradient
def dense_tan(x):
    z = x @ w + b
    y = tf.tan(z)

    def grad(dy, variables=None):
        g = dy / tf.square(tf.cos(z))
        return g @ tf.transpose(w), tf.transpose(x) @ g, tf.reduce_sum(g, 0)

    return y, grad
''',
        '''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scale(x):
    def grad(dy, variables=None):
        return dy * w, dy * x

    return x * w, grad
''',
        '''
import tensorflow as tf

class Scale(tf.keras.layers.Layer):
    def build(self, shape):
        self.k = self.add_weight(shape=())

    @tf.custom_gradient
    def call(self, x):
        def grad(dy, variables=None):
            dk = tf.reduce_sum(dy * x)
            return dy * self.k, (dk,)

        return x * self.k, grad
''',
    ]
    VALID = [
        '''
import tensorflow as tf

w = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
b = tf.Variable([0.5, -0.5])

@tf.custom_gradient
def dense_tan(x):
    z = x @ w + b
    y = tf.tan(z)

    def grad(dy, variables=None):
        g = dy / tf.square(tf.cos(z))
        by_var = {w.ref(): tf.transpose(x) @ g, b.ref(): tf.reduce_sum(g, 0)}
        return g @ tf.transpose(w), [by_var[v.ref()] for v in variables]

    return y, grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def mul(x, y):
    def grad(dz):
        return dz * y, dz * x

    return x * y, grad
''',
        '''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scale(x):
    def grad(dy, variables=None):
        return dy * w, [dy * x for _ in variables]

    return x * w, grad
''',
    ]

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        if not site.trainable_variables:
            return
        names = ", ".join(v.name for v in site.trainable_variables)
        for grad in site.grad_fns:
            for ret in grad.returns:
                if ret.elements is None:
                    continue
                if len(ret.elements) != 2:
                    yield Finding(
                        ret.node,
                        f"`{grad.name}` returns {len(ret.elements)} gradients flat, but the forward reads "
                        f"variables ({names}): TensorFlow unpacks `input_grads, variable_grads` and raises "
                        "'too many values to unpack'; return `(input_grads, [one per entry of variables])`",
                    )
                    continue
                kind = kind_of(site.model, ret.elements[1], grad.scope)
                if kind in (TENSOR, TUPLE, NONE) and kind != LIST:
                    yield Finding(
                        ret.node,
                        f"`{grad.name}` returns the variable gradients as a {kind}, not a list: TensorFlow "
                        "needs a list with one gradient per entry of `variables`, in that order",
                    )
