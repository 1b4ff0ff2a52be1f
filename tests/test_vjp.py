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


@pytest.mark.parametrize("forward,grad", [
    # An op cglint has no NumPy version of: nothing is evaluated, so nothing is claimed, though
    # this grad fn reads the output where it needs the input.
    ("tf.math.bessel_i0e(x * w)", "return dy * y * w, dy * y * x"),
    # Right: the output-based derivative of exp.
    ("tf.exp(x * w)", "return dy * y * w, dy * y * x"),
])
def test_unknown_or_right_claims_nothing(forward, grad):
    code = f"""
    import tensorflow as tf

    @tf.custom_gradient
    def op(x, w):
        y = {forward}

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


# A helper of the module computing the derivative: its maths is read as the forward's is. In
# TensorFlow 2.21 `_dswish(y)` was off by 0.19 (autodiff's largest entry 3.9); `_dswish(x)` matched.
SWISH = """
import tensorflow as tf

def _dswish(a):
    return tf.sigmoid(a) * (1 + a * (1 - tf.sigmoid(a)))

@tf.custom_gradient
def swish(x):
    y = x * tf.sigmoid(x)
    return y, lambda dy: dy * _dswish({read})
"""


def test_a_helper_is_evaluated():
    assert cg005(SWISH.format(read="y")) == [(10, 26)]  # f'(f(x)), at the returned expression
    assert cg005(SWISH.format(read="x")) == []


# ---- sizes the linted module chooses ---------------------------------------------------------

HUGE = {
    "zeros": "tf.reduce_sum(tf.zeros([100000, 100000]))",
    "list_repeat": "len([0.0] * int(1e9))",
    "int_power": "float(int(10) ** int(1e8) > 0)",
    "broadcast": "tf.reduce_sum(tf.ones([10**6]) + tf.ones([10**6, 1]))",
    "range": "len(tuple(range(int(1e10))))",
    "string_repeat": 'len("ab" * int(1e10))',
    "matmul": "tf.reduce_sum(tf.ones([40000, 1]) @ tf.ones([1, 40000]))",
}


@pytest.mark.parametrize("name", sorted(HUGE))
def test_sizes_written_in_the_module_are_never_built(tmp_path, name):
    """The evaluator builds arrays, lists and numbers the module's constants size: a 75 GiB
    `tf.zeros`, a list of 10**9, an integer of 10**8 digits. None is built (the maths is not
    evaluable there): the lint ends at once, under an address-space limit, with no internal error."""
    import resource
    import subprocess
    import sys

    (tmp_path / "op.py").write_text(textwrap.dedent(f"""\
        import tensorflow as tf


        @tf.custom_gradient
        def op(x):
            k = {HUGE[name]}
            y = tf.sigmoid(x) * k

            def grad(dy):
                return dy * y * (1 - y) * k

            return y, grad
        """))

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    run = subprocess.run([sys.executable, "-m", "cglint", "--isolated", "--no-cache", "op.py"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60, preexec_fn=limit)
    assert (run.returncode, run.stderr) == (0, ""), run.stderr[-500:]
