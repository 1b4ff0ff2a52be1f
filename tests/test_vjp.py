"""CG005's judgement by the forward's vector-Jacobian product (`cglint.model.vjp`): what it
evaluates, and that it claims nothing where the maths is unknown or the gradient is right.
Each buggy case here gave gradients off from autodiff (or of another shape than the input) in
TensorFlow 2.21, and each right one matched it."""

import textwrap

import pytest

from cglint.engine import lint_source


def cg005(code: str) -> list[tuple[int, int]]:
    result = lint_source(textwrap.dedent(code), "m.py")
    return [(d.line, d.column) for d in result.diagnostics if d.code == "CG005"]


# An axis from the enclosing function, stop_gradient, divide_no_nan, expand_dims: reading the
# product `p` for `t` makes the gradient wrong at every axis tried.
REDUCE_PROD = """
import tensorflow as tf

def reduce_prod(t, axis):
    @tf.custom_gradient
    def fn(t):
        p = tf.reduce_prod(t, axis=axis)

        def grad(dy):
            return tf.expand_dims(dy, axis) * tf.math.divide_no_nan(tf.expand_dims(p, axis), {read})

        return p, grad

    return fn(t)
"""


def test_a_free_axis_is_tried_at_every_value():
    assert cg005(REDUCE_PROD.format(read="p")) == [(10, 94)]
    assert cg005(REDUCE_PROD.format(read="t")) == []


@pytest.mark.parametrize("grad", [
    # A helper of the user's: never evaluated, so nothing is claimed.
    "return dy * helper(y) * w, dy * helper(y) * x",
    # Right: the output-based derivative of exp.
    "return dy * y * w, dy * y",
])
def test_unknown_or_right_claims_nothing(grad):
    code = f"""
    import tensorflow as tf

    def helper(a):
        return tf.square(a)

    @tf.custom_gradient
    def op(x, w):
        y = tf.exp(x * w)

        def grad(dy):
            {grad}

        return y, grad
    """
    assert cg005(code) == []


def test_stop_gradient_has_no_derivative():
    # `scale` is held constant for autodiff: a zero gradient for it is right, and a grad fn
    # reading the output for `x` is still wrong.
    code = """
    import tensorflow as tf

    @tf.custom_gradient
    def op(x, scale):
        y = tf.exp(x) * tf.stop_gradient(scale)

        def grad(dy):
            return dy * tf.exp({read}) * scale, tf.zeros_like(scale)

        return y, grad
    """
    assert cg005(code.format(read="x")) == []
    assert cg005(code.format(read="y")) == [(9, 28)]
