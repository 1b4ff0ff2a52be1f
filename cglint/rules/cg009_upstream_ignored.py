"""CG009 upstream-ignored."""

from typing import Iterator

import libcst as cst

from cglint.diagnostics import Finding
from cglint.model import GradientSite, is_no_gradient
from cglint.samples import not_linear_in_upstream
from cglint.rules.base import Invalid, Rule


class UpstreamIgnored(Rule):
    """
    ## What it does
    Flags a grad fn that never reads its upstream gradient(s), or reads them only for their
    shape or dtype (`tf.ones_like(dy)`, `tf.shape(dy)`, `dy.shape`). A grad fn that returns only
    `None` or zeros (`tf.zeros_like(x)`) is an intentional gradient stop and is not flagged;
    neither is a grad fn that raises instead of returning. Gradients that differ from the
    true derivative on purpose still use the upstream and are fine: straight-through
    (`return dy`), clipping (`tf.clip_by_norm(dy, 1.0)`), reversal (`-dy`), scaling. A grad
    fn made with `functools.partial(_grad, x=x)` receives the upstream in the parameters the
    partial leaves open (`dy`), and `*args` counts as upstream.

    A grad fn that reads the upstream but does not multiply by it (`dy + local`) is flagged
    where its maths can be evaluated (the project's NumPy versions of the ops, at sample points):
    a gradient that is not zero for a zero upstream is not linear in it; nor is one that does not
    scale with it (`dy**2`, `tf.sign(dy)`, `tf.abs(dy)`, `dy + c * dy**2`), checked with small
    upstreams times -2. Clipping (`tf.clip_by_value(dy, -1.0, 1.0)`, `tf.clip_by_norm`) is
    nonlinear on purpose, but zero at zero and the identity for small upstreams: not flagged.
    A transform meant as such (signSGD's `tf.sign(dy)`) is declared with `# cglint: intentional`
    at the end of the flagged line (the grad fn's `return`) or on or above the forward's def, as
    for the runtime check, and is not flagged for scaling.

    ## Why is this bad?
    The grad fn computes a vector-Jacobian product: the upstream gradient `dy` is
    d(loss)/d(output), and the chain rule multiplies it into every input gradient. A grad
    fn that returns the local derivative alone (`lambda dy: 2 * x` for `x * x`) drops
    everything downstream of the op: TensorFlow raises nothing and trains on the wrong
    gradient. In TensorFlow 2.21, `5 * f(x)` with such a grad fn gave d/dx = 4.0 where the
    true value is 20.0. Multiply the local derivative by the upstream: `dy * 2 * x`. Adding
    the upstream instead is as wrong: in TensorFlow 2.21 a Huber loss whose grad fn returned
    `dloss + dpred` gave d/dpred = [0.5, -1, 1] for `0 * huber(pred, target)`, where the
    gradient is 0, and [5.5, 4, 6] for `5 * huber(...)` where it is [2.5, -5, 5].
    """

    code = "CG009"
    name = "upstream-ignored"
    summary = "The grad fn never uses its upstream gradient, breaking the chain rule"

    INVALID = [
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def square(x):
    return x * x, lambda dy: 2 * x
''',
            at="6:19"),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def safe_log(x):
    def grad(upstream):
        return 1.0 / tf.maximum(x, 1e-6)

    return tf.math.log(x), grad
''',
            at="6:9"),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def sign_ste(x):
    def grad(unused_dy):
        return tf.ones_like(x)

    return tf.sign(x), grad
''',
            at="6:9"),
        Invalid(
            '''
import functools

import tensorflow as tf

def _square_grad(dy, x):
    return 2.0 * x

@tf.custom_gradient
def square(x):
    return x * x, functools.partial(_square_grad, x=x)
''',
            at="6:5"),
        # Reading the upstream for its shape is not using it: in TensorFlow 2.21, `5 * sign_ste(x)`
        # gave d/dx = 1.0 where the straight-through gradient is 5.0.
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def sign_ste(x):
    def grad(dy):
        return tf.ones_like(dy)

    return tf.sign(x), grad
''',
            at="6:9"),
        # The upstream added, not multiplied: not zero for a zero upstream.
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def huber(pred, target):
    err = pred - target
    small = tf.abs(err) <= 1.0
    loss = tf.where(small, 0.5 * tf.square(err), tf.abs(err) - 0.5)

    def grad(dloss):
        dpred = tf.where(small, err, tf.sign(err))
        return dloss + dpred, -(dloss + dpred)

    return loss, grad
''',
            at="12:16"),
        # Nonlinear in the upstream: a VJP scales with it (TensorFlow 2.21: off by 0.70 from
        # autodiff with `sign(dy)`, by 0.42 with `dy + 0.1 * dy * dy`, for an upstream of -0.7).
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def log_cosh(x):
    y = tf.math.log(tf.cosh(x))

    def grad(dy):
        return tf.sign(dy) * tf.tanh(x)

    return y, grad
''',
            at="9:16"),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def cube(x):
    y = x * x * x

    def grad(dy):
        return 3.0 * x * x * (dy + 0.1 * dy * dy)

    return y, grad
''',
            at="9:16"),
    ]
    VALID = [
        '''
import tensorflow as tf

@tf.custom_gradient
def huber(pred, target):
    err = pred - target
    small = tf.abs(err) <= 1.0
    loss = tf.where(small, 0.5 * tf.square(err), tf.abs(err) - 0.5)

    def grad(dloss):
        dpred = tf.where(small, err, tf.sign(err))
        return dloss * dpred, -dloss * dpred

    return loss, grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def clip_gradient(x):
    return tf.identity(x), lambda dy: tf.clip_by_value(dy, -1.0, 1.0)
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def square(x):
    return x * x, lambda dy: dy * 2 * x
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def sign_ste(x):
    def grad(dy):
        return dy

    return tf.sign(x), grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def sign_ste(x):
    def grad(dy):
        return dy * tf.ones_like(x)

    return tf.sign(x), grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def reverse_gradient(x):
    return tf.identity(x), lambda dy: -dy
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def clip_gradient(x):
    return tf.identity(x), lambda dy: tf.clip_by_norm(dy, 1.0)
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def stop(x, y):
    def grad(dz):
        return tf.zeros_like(x), None

    return x + y, grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def not_differentiable(x):
    def grad(dy):
        raise NotImplementedError("no gradient for this op")

    return tf.round(x), grad
''',
            '''
import functools

import tensorflow as tf

def _scaled_square_grad(dy, x, scale):
    return dy * scale * 2.0 * x

@tf.custom_gradient
def scaled_square(x):
    return 3.0 * x * x, functools.partial(_scaled_square_grad, x=x, scale=3.0)
''',
        # signSGD: the upstream's sign on purpose, declared so.
        '''
import tensorflow as tf

# cglint: intentional
@tf.custom_gradient
def sign_backward(x):
    y = tf.tanh(x)

    def grad(dy):
        return tf.sign(dy) * (1.0 - y * y)

    return y, grad
''',
        # Clipped on purpose: the identity for small upstreams, so it scales there.
        '''
import tensorflow as tf

@tf.custom_gradient
def clipped_log_cosh(x):
    y = tf.math.log(tf.cosh(x))

    def grad(dy):
        return tf.clip_by_value(dy, -1.0, 1.0) * tf.tanh(x)

    return y, grad
''',
    ]

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        for grad in site.grad_fns:
            upstream = grad.upstream_names
            if not upstream:
                continue
            read = [name for name in upstream if grad.reads(name)]
            if read and not _shape_only(site.model, grad, set(upstream)):
                yield from _not_a_factor(site, grad)
                continue
            values = [r.value for r in grad.returns if r.value is not None]
            if not values or all(is_no_gradient(site.model, v, grad.scope) for v in values):
                continue  # raises, or an intentional stop
            names = ", ".join(f"`{n}`" for n in upstream)
            how = (f"reads its upstream gradient {names} only for its shape or dtype (`ones_like`, `.shape`, ...)"
                   if read else f"never uses its upstream gradient {names}")
            yield Finding(
                grad.anchor,
                f"`{grad.name}` {how}: the chain rule needs "
                "`upstream * local_derivative`, and TensorFlow silently trains on the local derivative "
                "alone; multiply by the upstream (or return `None`/zeros to stop the gradient on purpose)",
            )


def _not_a_factor(site: GradientSite, grad) -> Iterator[Finding]:
    """The upstream is read but the gradients are not linear in it: evaluated with a zero
    upstream, some are not zero (`dy + local` where the chain rule multiplies); or, with a
    small one scaled by -2, some are not scaled by -2 (`dy**2`, `tf.sign(dy)`)."""
    if len(site.grad_fns) != 1:
        return
    returns = [r.value for r in grad.returns if r.value is not None]
    anchor = returns[0] if len(returns) == 1 else grad.anchor
    dy = grad.upstream_names[0]
    at_zero, scaling = not_linear_in_upstream(site.model, site)
    if at_zero:
        yield Finding(
            anchor,
            f"`{grad.name}` returns a gradient for {_names(at_zero)} that is not zero when the upstream `{dy}` is "
            "zero (evaluated at sample points): the upstream is combined with the local derivative, not "
            f"multiplied by it, so TensorFlow trains on a gradient even where the loss does not depend on "
            f"`{site.name}`; multiply: `{dy} * local_derivative`",
        )
        return
    # A gradient transformed on purpose (signSGD's `sign(dy)`), declared so for cglint's runtime.
    if scaling and not site.declared_intentional:
        yield Finding(
            anchor,
            f"`{grad.name}` returns a gradient for {_names(scaling)} that does not scale with the upstream `{dy}` "
            f"(evaluated at sample points, `{dy}` times -2 does not give the gradient times -2): the chain rule "
            f"multiplies the local derivative by `{dy}`, and TensorFlow trains on a gradient transformed by "
            f"something else (`{dy}**2`, `sign({dy})`, `abs({dy})`); multiply: `{dy} * local_derivative`",
        )


def _names(slots: list[str]) -> str:
    return ", ".join(f"`{n}`" for n in slots)


# Functions whose result depends on their argument's shape or dtype alone, not its values.
_SHAPE_ONLY = frozenset({"ones_like", "zeros_like", "shape", "size", "rank", "shape_n", "ones", "zeros", "fill"})


def _shape_only(model, grad, names: set[str]) -> bool:
    """Whether every read of the upstream in the grad fn is for its shape or dtype alone:
    `tf.ones_like(dy)`, `tf.shape(dy)`, `dy.shape`, `dy.dtype` (its values never flow back)."""
    body = grad.node.body
    values = [n for n in model.reads_in(body, frozenset({"shape", "dtype", "get_shape"})) if n.value in names]
    if not values:
        return True  # read under `.shape` / `.dtype` only
    shaped = {id(a.value) for scope in grad.scope.walk() for call in scope.calls
              if _last_name(call.func) in _SHAPE_ONLY for a in call.args}
    return all(id(n) in shaped for n in values)


def _last_name(func) -> str | None:
    return func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
