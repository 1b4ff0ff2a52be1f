"""CG005's judgement by the forward's vector-Jacobian product (`cglint.samples.vjp`): what it
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


# ---- functions with several statements, loops ------------------------------------------------
# Each was checked in TensorFlow 2.21 (the custom gradient against autodiff of the same forward):
# reading `x` matched, reading `y` did not.

HELPER = """
import tensorflow as tf


def _mix(t, k=2.0):
    if k == 0.0:
        return tf.zeros_like(t)
    a, b = tf.sin(t), tf.cos(t)
    scaled = a * k
    return scaled + b


@tf.custom_gradient
def wave(x):
    y = _mix(x)

    def grad(dy):
        return dy * (2.0 * tf.cos({read}) - tf.sin({read}))

    return y, grad
"""

SERIES = """
import tensorflow as tf


def _series(t, n=6):
    total = tf.zeros_like(t)
    term = tf.ones_like(t)
    for k in range(1, n):
        term = term * t / k
        total += term
    return total


@tf.custom_gradient
def expm1_series(x):
    y = _series(x)

    def grad(dy):
        return dy * (1.0 + _series({read}, n=5))

    return y, grad
"""

WHILE = """
import tensorflow as tf


@tf.custom_gradient
def power4(x):
    _, y = tf.while_loop(lambda i, acc: i < 4, lambda i, acc: (i + 1, acc * x), (0, tf.ones_like(x)))

    def grad(dy):
        return dy * 4.0 * {read} ** 3

    return y, grad
"""

# `tf.where` picks `tf.sinh` at every sample: the branch cglint has no NumPy version of
# (`bessel_i1e`) reaches neither the output nor its derivative there.
WHERE = """
import tensorflow as tf


@tf.custom_gradient
def sinh_guarded(x):
    y = tf.where(tf.abs(x) < 100.0, tf.sinh(x), tf.math.bessel_i1e(x))

    def grad(dy):
        return dy * tf.cosh({read})

    return y, grad
"""


# The derivative as written holds for x > 0 only (`tf.sqrt(x)` for |x| ** 0.5): samples of both
# signs say nothing, positive ones find the read of `y` (TensorFlow 2.21, x > 0: reading `x`
# matched autodiff, reading `y` was off by up to 0.22).
POSITIVE = """
import tensorflow as tf


@tf.custom_gradient
def scaled_pow(x, scale):
    y = scale * tf.abs(x) ** 1.5

    def grad(dy):
        return dy * scale * 1.5 * tf.sqrt({read}), dy * tf.abs(x) ** 1.5

    return y, grad
"""


# A comprehension over `range` with a filter picks the axes (TensorFlow 2.21: reading `y` was
# off by 0.29, autodiff's largest entry 1.17; reading `x` matched).
FILTERED = """
import tensorflow as tf


@tf.custom_gradient
def column_scaled_sin(x, s):
    axes = [i for i in range(len(x.shape)) if i != 1]
    w = tf.reduce_sum(s, axis=axes, keepdims=True)
    y = tf.sin(x) * w

    def grad(dy):
        return dy * tf.cos({read}) * w, tf.ones_like(s) * tf.reduce_sum(dy * tf.sin(x), axis=axes, keepdims=True)

    return y, grad
"""


# A class's helpers: a static method and a method calling it through `self` (TensorFlow 2.21:
# reading `y` was off by 0.36, autodiff's largest entry 0.96; reading `x` matched).
METHOD = """
import tensorflow as tf


class Swish:
    def __init__(self, beta=1.0):
        self.beta = beta

    @staticmethod
    def _gate(t):
        return 1.0 / (1.0 + tf.exp(-t))

    def _derivative(self, t):
        s = self._gate(t)
        return s + t * s * (1.0 - s)

    def __call__(self, x):
        @tf.custom_gradient
        def swish(x):
            y = x * self._gate(x)

            def grad(dy):
                return dy * self._derivative({read})

            return y, grad

        return swish(x)
"""


# A grad fn with an `if` on the enclosing function's flag and two returns is run, each value of
# the flag in turn (TensorFlow 2.21, either flag: reading `y` was off by 0.20, autodiff's
# largest entry 0.30; reading `x` matched).
RETURNS = """
import tensorflow as tf


def scaled_softsign(clip_gradient):
    @tf.custom_gradient
    def op(x, s):
        y = s * x / (1.0 + tf.abs(x))

        def grad(dy):
            dx = dy * s / (1.0 + tf.abs({read})) ** 2
            ds = dy * x / (1.0 + tf.abs(x))
            if clip_gradient:
                return tf.clip_by_value(dx, -100.0, 100.0), ds
            return dx, ds

        return y, grad

    return op
"""


# A series in `tf.while_loop` inside a helper: keyword arguments, a nested def as the body (its
# closure reads the helper's `x`), a lambda with `*_` as the condition (TensorFlow 2.21: reading
# `y` was off by 0.19, autodiff's largest entry 0.62; reading `x` matched to 2e-12).
NESTED = """
import tensorflow as tf


def _sin_series(x, num_terms=8):
    def body(n, term, total):
        term = -term * x * x / ((2.0 * n) * (2.0 * n + 1.0))
        return n + 1.0, term, total + term

    _, _, total = tf.while_loop(
        cond=lambda n, *_: n < num_terms,
        body=body,
        loop_vars=(1.0, x, x),
    )
    return total


@tf.custom_gradient
def series_sin(x, scale):
    y = scale * _sin_series(x)

    def grad(dy):
        return dy * scale * tf.cos({read}), dy * _sin_series(x)

    return y, grad
"""


# `with tf.name_scope(...)` and `tf.debugging` checks name and check the maths; they compute
# none of it (TensorFlow 2.21: reading `y` was off by 1.75, autodiff's largest entry 1.02;
# reading `x` matched).
SCOPED = """
import tensorflow as tf


def _log_cosh(t, name=None):
    with tf.name_scope(name or "log_cosh"):
        tf.debugging.assert_all_finite(t, "log_cosh")
        a = tf.abs(t)
        return a + tf.math.log1p(tf.exp(-2.0 * a)) - 0.6931471805599453


@tf.custom_gradient
def log_cosh(x, scale):
    y = scale * _log_cosh(x)

    def grad(dy):
        return dy * scale * tf.tanh({read}), dy * _log_cosh(x)

    return y, grad
"""


# Keras's grad fn signature, `grad(*args, upstream=None)`, is run with the upstream as its one
# positional argument (TensorFlow 2.21, Keras 3: reading `y` was off by 0.20, autodiff's largest
# entry 0.30; reading `x` matched).
KERAS = """
from keras import ops


@ops.custom_gradient
def scaled_softsign(x, s):
    y = s * x / (1.0 + ops.abs(x))

    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        return upstream * s / (1.0 + ops.abs({read})) ** 2, upstream * x / (1.0 + ops.abs(x))

    return y, grad
"""


@pytest.mark.parametrize("code,at", [
    (KERAS, (12, 46)),
    (SCOPED, (17, 37)),
    (NESTED, (23, 36)),
    (RETURNS, (11, 41)),
    (METHOD, (23, 24)),
    (FILTERED, (12, 28)),
    (POSITIVE, (10, 43)),
    # A helper with an early return, tuple unpacking and locals, a default argument.
    (HELPER, (18, 16)),
    # A Python loop over `range` accumulating a series (`+=`), called with a keyword.
    (SERIES, (19, 16)),
    # `tf.while_loop` with lambdas as cond and body.
    (WHILE, (10, 16)),
    (WHERE, (10, 16)),
])
def test_functions_loops_and_where_are_evaluated(code, at):
    assert cg005(code.replace("{read}", "y")) == [at]
    assert cg005(code.replace("{read}", "x")) == []


# Loops the module sizes: each would be found if evaluated (the grad fn reads `y` for `x`), so
# nothing found means it was not; the lint ends at once.
ENDLESS = {
    "evaluable": "_sum_over(range(3), t, inner=2)",  # the same maths, bounded: found
    "while_loop": "tf.while_loop(lambda i, a: i > -1.0, lambda i, a: (i + 1.0, a), (0.0, t))[1]",
    "while_loop_bare_cond": "tf.while_loop(lambda i: True, lambda i: i + 1.0, [t])[0] * 0.0 + t",
    "huge_range": "_sum_over(range(10 ** 9), t)",
    "nested_loops": "_sum_over(range(4000), t, inner=4000)",
    "recursion": "_again(t)",
    "squaring_an_int": "_square_up(len(t.shape) + len([0, 0]), t)",
}


@pytest.mark.parametrize("name", sorted(ENDLESS))
def test_loops_the_module_sizes_are_bounded(tmp_path, name):
    import subprocess
    import sys

    (tmp_path / "op.py").write_text(textwrap.dedent(f"""\
        import tensorflow as tf


        def _sum_over(items, t, inner=1):
            out = t
            for i in items:
                for j in range(inner):
                    out = out + 0.0 * t
            return out


        def _again(t):
            return _again(t)


        def _square_up(n, t):
            for i in range(60):
                n = n * n
            return t + 0.0 * n


        def _through(t):
            return {ENDLESS[name]}


        @tf.custom_gradient
        def op(x):
            y = _through(x) ** 3

            def grad(dy):
                return dy * 3.0 * y ** 2

            return y, grad
        """))
    run = subprocess.run([sys.executable, "-m", "cglint", "--isolated", "--no-cache", "--select", "CG005", "op.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert (run.returncode, run.stderr) == (1 if name == "evaluable" else 0, ""), run.stdout + run.stderr[-500:]


# ---- straight-through estimators ---------------------------------------------------------------
# A forward that rounds, quantises or takes a sign has a zero derivative almost everywhere; the
# grad fn is judged against the straight-through estimator. TensorFlow 2.21 gave the grad fn
# reading `y` other gradients than the one reading `x` (1.0 where |x| > 1, or beyond the
# fake-quant range, where reading `x` gives 0), and reading `x` gave TensorFlow's own
# fake-quant gradient.

BINARIZE = """
import tensorflow as tf


@tf.custom_gradient
def binarize(x):
    y = tf.sign(x)

    def grad(dy):
        return dy * tf.cast(tf.abs({read}) <= 1.0, dy.dtype)

    return y, grad
"""

FAKE_QUANT = """
import tensorflow as tf


@tf.custom_gradient
def fake_quant(x):
    y = tf.quantization.fake_quant_with_min_max_args(x, min=-0.8, max=0.7, num_bits=4)

    def grad(dy):
        inside = tf.logical_and(x >= -0.8, {read} <= 0.7)
        return tf.where(inside, dy, tf.zeros_like(dy))

    return y, grad
"""

# `sign` in ordinary maths (x |x|): autodiff judges it, and the estimator is not used.
SIGNED_SQUARE = """
import tensorflow as tf


@tf.custom_gradient
def signed_square(x, scale):
    y = tf.sign(x) * x * x * scale

    def grad(dy):
        return dy * 2.0 * tf.abs({read}) * scale, dy * tf.sign(x) * x * x

    return y, grad
"""


@pytest.mark.parametrize("code,at,against", [
    (BINARIZE, (10, 36), "the straight-through derivative"),
    (FAKE_QUANT, (10, 44), "the straight-through derivative"),
    (SIGNED_SQUARE, (10, 34), "vector-Jacobian product"),
])
def test_rounding_is_judged_by_its_straight_through_estimator(code, at, against):
    found = [d for d in lint_source(code.replace("{read}", "y"), "m.py").diagnostics if d.code == "CG005"]
    assert [(d.line, d.column) for d in found] == [at]
    assert against in found[0].message
    assert cg005(code.replace("{read}", "x")) == []


def test_numpy_fake_quant_is_tensorflows():
    """The NumPy fake quantisation against TensorFlow 2.21's outputs (float32) on a grid crossing
    the nudged range [-0.8, 0.7] with 4 bits, and a zero point at .5 (range [-1, 1], 8 bits:
    TensorFlow nudges it to 127 in float32)."""
    import numpy as np

    from cglint.samples import arrays

    x = np.array([-1.25, -0.81, -0.75, -0.05, 0.3, 0.69, 0.71, 1.1])
    quant = arrays.OPS["fake_quant_with_min_max_args"]
    np.testing.assert_allclose(quant(x, min=-0.8, max=0.7, num_bits=4),
                               [-0.8, -0.8, -0.7, 0.0, 0.3, 0.7, 0.7, 0.7], atol=1e-6)
    np.testing.assert_allclose(quant(x, min=-1.0, max=1.0, num_bits=8),
                               [-0.996078, -0.807843, -0.752941, -0.047059, 0.298039, 0.690196, 0.713725, 1.003922],
                               atol=1e-5)


def test_one_judgement_shares_a_budget_of_statements():
    """Every point, direction and world re-runs the module's loops: a loop within one
    evaluation's bound is Unknown once the judgement's shared budget is spent."""
    import libcst as cst

    from cglint.model import ModuleModel
    from cglint.samples.evaluate import Evaluator, Unknown
    from cglint.samples.interpret import MAX_SITE_STEPS

    model = ModuleModel(cst.parse_module(textwrap.dedent("""\
        def _sum(n):
            total = 0.0
            for i in range(n):
                total += i
            return total

        s = _sum(100)
        """)))
    expr = model.root.bindings["s"][0]
    budget = [0]
    assert Evaluator(model, {}, budget=budget).value(expr, model.root) == 4950
    assert 100 < budget[0] < 300
    budget[0] = MAX_SITE_STEPS - 50
    with pytest.raises(Unknown):
        Evaluator(model, {}, budget=budget).value(expr, model.root)


@pytest.mark.parametrize("expr,value", [
    ("tf.while_loop(lambda i: i < 10, lambda i: i + 1, 0)", 10),  # one loop variable, not a tuple
    ("tf.while_loop(lambda i, a: i < 10, lambda i, a: (i + 1, a * 2), [0, 1], maximum_iterations=3)[1]", 8),
    ("tf.while_loop(lambda i: i < 300, lambda i: i + 1, (0,))", None),  # more trips than evaluated
    ("tf.while_loop(lambda i: i < 3, lambda i: (i, i), (0,))", None),  # a body of another structure
])
def test_while_loop(expr, value):
    import libcst as cst

    from cglint.model import ModuleModel
    from cglint.samples.evaluate import Evaluator, Unknown

    model = ModuleModel(cst.parse_module(f"import tensorflow as tf\n\ns = {expr}\n"))
    ev = Evaluator(model, {})
    if value is None:
        with pytest.raises(Unknown):
            ev.value(model.root.bindings["s"][0], model.root)
    else:
        result = ev.value(model.root.bindings["s"][0], model.root)
        assert float(result[0] if isinstance(result, tuple) else result) == value


def test_an_index_out_of_range_in_the_maths_is_not_evaluable():
    """`parts[5]` of a two-element list: the maths has no value there, and the lint goes on
    (it was an internal error)."""
    code = """
    import tensorflow as tf


    def _pick(t, parts):
        return parts[5] * t


    @tf.custom_gradient
    def op(x):
        y = _pick(x, [2.0, 2.0]) ** 3

        def grad(dy):
            return dy * 24.0 * y ** 2

        return y, grad
    """
    assert cg005(code) == []
    assert cg005(code.replace("parts[5]", "parts[1]")) == [(14, 16)]  # evaluable: found


@pytest.mark.parametrize("expr,value", [
    ("(1.0 if not False else 2.0) + (0.0 or 3.0) + (True and 4.0)", 8.0),
    ("float(None is None) + float([] is not None)", 2.0),
    ("len([i for i in range(6) if i != 2 and i < 5])", 4),
    # Quantisers' level counts and sign parities; the dtypes Keras computes in.
    ("(1 << 3) - 1", 7.0),
    ("(3 > 2) ^ (1 > 2) ^ True", False),
    ("{k: v for k, v in zip(['a', 'b'], [1.0, 2.0])}['b'] + dict(enumerate([5.0]))[0]", 7.0),
])
def test_python_conditions(expr, value):
    import libcst as cst

    from cglint.model import ModuleModel
    from cglint.samples.evaluate import Evaluator

    model = ModuleModel(cst.parse_module(f"s = {expr}\n"))
    assert Evaluator(model, {}).value(model.root.bindings["s"][0], model.root) == value


def cg009(code: str) -> list[tuple[int, int]]:
    result = lint_source(textwrap.dedent(code), "m.py")
    return [(d.line, d.column) for d in result.diagnostics if d.code == "CG009"]


UPSTREAM = """
import tensorflow as tf

@tf.custom_gradient
def op(x, w):
    y = tf.tanh(x) * w

    def grad(dy):
        d = 1.0 - tf.tanh(x) ** 2
        return {grads}

    return y, grad
"""


@pytest.mark.parametrize("grads,at", [
    # Added, not multiplied (in TensorFlow 2.21, `0 * op(x, w)` still had a gradient).
    ("dy + d * w, dy * tf.tanh(x)", [(10, 16)]),
    ("dy * d * w, tf.reduce_sum(dy) + tf.tanh(x)", [(10, 16)]),
    # Linear in the upstream; clipping is not, but is zero at zero upstream.
    ("dy * d * w, dy * tf.tanh(x)", []),
    ("tf.clip_by_value(dy, -1.0, 1.0) * d * w, dy * tf.tanh(x)", []),
    ("-dy * d * w, None", []),
    # An op with no NumPy version here: not evaluated, nothing claimed.
    ("dy + tf.math.bessel_i1e(x), dy", []),
])
def test_a_gradient_not_zero_at_zero_upstream(grads, at):
    assert cg009(UPSTREAM.format(grads=grads)) == at


def test_a_gradient_for_one_input_not_zero_at_zero_upstream_names_it():
    result = lint_source(textwrap.dedent(UPSTREAM.format(grads="dy * d * w, dy + tf.tanh(x)")), "m.py")
    [finding] = [d for d in result.diagnostics if d.code == "CG009"]
    assert "for `w` that is not zero" in finding.message


def cg018(code: str) -> list[tuple[int, int]]:
    result = lint_source(textwrap.dedent(code), "m.py")
    return [(d.line, d.column) for d in result.diagnostics if d.code == "CG018"]


SCALE = """
import tensorflow as tf

@tf.custom_gradient
def scale(x, w):
    y = x * w

    def grad(dy):
        return dy * w, {dw}

    return y, grad
"""


@pytest.mark.parametrize("dw,at", [
    # `w` broadcasts against `x`: summed over every axis, or over the wrong one.
    ("tf.reduce_sum(dy * x)", [(9, 24)]),
    ("tf.reduce_sum(dy * x, axis=1)", [(9, 24)]),
    ("tf.reduce_mean(dy * x, axis=[0, 1])", [(9, 24)]),
    # Over the broadcast axis: `w`'s shape. Left at the output's shape (code for inputs of one
    # shape), or a zero (a stop): not judged.
    ("tf.reduce_sum(dy * x, axis=0)", []),
    ("dy * x", []),
    ("0.0", []),
    ("None", []),
])
def test_a_gradient_reduced_to_another_shape(dw, at):
    assert cg018(SCALE.format(dw=dw)) == at


@pytest.mark.parametrize("grads,at", [
    # Not scaling with the upstream (in TensorFlow 2.21, off from autodiff for an upstream of -0.7).
    ("dy ** 2 * d * w, dy * tf.tanh(x)", [(10, 16)]),
    ("tf.sign(dy) * d * w, dy * tf.tanh(x)", [(10, 16)]),
    ("tf.abs(dy) * d * w, dy * tf.tanh(x)", [(10, 16)]),
    ("(dy + 0.5 * dy * dy) * d * w, dy * tf.tanh(x)", [(10, 16)]),
    # Off from autodiff on purpose, but not CG009's class: clipped (the identity for small
    # upstreams), scaled by constants (linear).
    ("tf.clip_by_norm(dy, 1.0) * d * w, dy * tf.tanh(x)", []),
    ("0.5 * dy * d * w, 2.0 * dy * tf.tanh(x)", []),
    # Not evaluated (no NumPy version of the op): nothing claimed.
    ("tf.sign(dy) * tf.math.bessel_i1e(x), dy", []),
])
def test_a_gradient_not_scaling_with_the_upstream(grads, at):
    assert cg009(UPSTREAM.format(grads=grads)) == at


def cg006(code: str) -> list[tuple[int, int]]:
    result = lint_source(textwrap.dedent(code), "m.py")
    return [(d.line, d.column) for d in result.diagnostics if d.code == "CG006"]


KEYED = """
import tensorflow as tf

w = tf.Variable([1.0, 2.0, 3.0], name="w")
b = tf.Variable([0.5, -0.5, 0.25], name="b")

@tf.custom_gradient
def affine(x):
    y = x * w + b

    def grad(dy, variables=None):
        dw, db = tf.reduce_sum(dy * x, 0), tf.reduce_sum(dy, 0)
        {keyed}
        return dy * w, {listed}

    return y, grad
"""


@pytest.mark.parametrize("keyed,listed,at", [
    # Keyed by position (under tf.function, where `variables` is sorted by name, [b, w],
    # TensorFlow 2.21 swapped d/w and d/b).
    ("g = dict(zip([v.ref() for v in variables], [dw, db]))", "[g[v.ref()] for v in variables]", [(14, 9)]),
    ("g = {v.ref(): d for v, d in zip(variables, [dw, db])}", "[g[v.ref()] for v in variables]", [(14, 9)]),
    ("g = [dw, db]", "[g[i] for i, v in enumerate(variables)]", [(14, 9)]),
    # Keyed on the variable itself: follows any order.
    ("g = dict(zip([w.ref(), b.ref()], [dw, db]))", "[g[v.ref()] for v in variables]", []),
    ("g = {v.ref(): d for v, d in zip([w, b], [dw, db])}", "[g[v.ref()] for v in variables]", []),
    ("g = {id(w): dw, id(b): db}", "[g[id(v)] for v in variables]", []),
    # Equal gradients: no order to tell apart.
    ("g = [dw, dw]", "[g[i] for i, v in enumerate(variables)]", []),
])
def test_variable_gradients_keyed_by_position_whatever_the_spelling(keyed, listed, at):
    assert cg006(KEYED.format(keyed=keyed, listed=listed)) == at


PRELU_CALLED = """
import tensorflow as tf

@tf.custom_gradient
def prelu(x, alpha):
    y = tf.where(x > 0.0, x, alpha * x)

    def grad(dy):
        return tf.where(x > 0.0, dy, alpha * dy), tf.reduce_sum(tf.where(x > 0.0, 0.0, x * dy))

    return y, grad

def layer(x, slope={default}):
    slope = tf.convert_to_tensor(slope)
    return prelu(x, {arg})
{more}"""


@pytest.mark.parametrize("default,arg,more,at", [
    # A scalar slope reaches the call: summed over every axis is its gradient (TensorFlow 2.21:
    # equal to autodiff for a scalar alpha).
    ("0.25", "slope", "", []),
    ("0.25", "-0.1", "", []),
    # Per-channel, or unknown: the scalar gradient of a (3,) alpha (TensorFlow 2.21 handed back
    # shape ()).
    ("None", "tf.fill([3], 0.25)", "", [(9, 51)]),
    ("None", "slope", "", [(9, 51)]),
    # A scalar here, a (3,) array at another call: wrong there.
    ("0.25", "slope", "\ndef channels(x):\n    return prelu(x, tf.ones([3]) * 0.25)\n", [(9, 51)]),
])
def test_a_scalar_gradient_is_right_for_an_input_called_with_a_scalar(default, arg, more, at):
    assert cg018(PRELU_CALLED.format(default=default, arg=arg, more=more)) == at


def test_keras_dtype_helpers_evaluate():
    """`backend.result_type` / `standardize_dtype` of float dtypes are a float dtype (Keras's
    quantisers compute in it): the cube's derivative read at its output is found."""
    code = """
    import tensorflow as tf
    from keras.src import backend, ops

    @tf.custom_gradient
    def cube(x):
        dtype = backend.result_type(backend.standardize_dtype(x.dtype), "float32")
        y = ops.cast(x, dtype) ** 3

        def grad(dy):
            return dy * 3.0 * {read} ** 2

        return y, grad
    """
    assert cg005(code.format(read="y")) == [(11, 16)]
    assert cg005(code.format(read="x")) == []
