"""check_gradient against real TensorFlow: correct ops, real bugs, intentional estimators,
structural errors. Every case here was a distinct failure mode in TensorFlow 2.21."""

import os
import json

import pytest
import tensorflow as tf

from cglint.runtime import GradientReport, assert_gradient_matches, check_gradient


def dense_tan(kind, dtype=tf.float32, n_vars=2):
    """tan(x @ W + b) with a custom gradient in style `kind`, over fresh variables."""
    W = tf.Variable(tf.constant([[1., 2.], [2., 3.], [3., 4.]], dtype) * 0.1, name="w")
    B = tf.Variable(tf.constant([0.1, 0.2], dtype), name="b")

    @tf.custom_gradient
    def op(x):
        z = x @ W + B
        y = tf.tan(z)

        def grad(upstream, variables=None):
            g = upstream / tf.square(tf.cos(y if kind == "cos(y)" else z))
            if kind == "ignored-upstream":
                g = 1.0 / tf.square(tf.cos(z))
            scale = -1.0 if kind == "reversal" else 1.0
            db = tf.reduce_sum(g, 0) * (1.001 if kind == "bias*1.001" else 1.0)
            if kind == "hard-coded-order":
                return g @ tf.transpose(W), [tf.transpose(x) @ g, db]
            if kind == "flat":
                return g @ tf.transpose(W), tf.transpose(x) @ g, db
            by_var = {W.ref(): scale * tf.transpose(x) @ g, B.ref(): scale * db}
            return scale * g @ tf.transpose(W), [by_var[v.ref()] for v in variables]

        if kind == "seed-fix":
            def grad(upstream):  # noqa: F811 - the seed's "corrected" code
                g = upstream / tf.square(tf.cos(z))
                return g @ tf.transpose(W), lambda variables: [tf.transpose(x) @ g,
                                                               tf.reduce_sum(g, 0)]
        return y, grad

    return op


def x_for(dtype=tf.float32):
    return tf.constant([[0.1, 0.2, 0.3], [0.1, -0.1, 0.2]], dtype)


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_dense_tan_keyed_on_variables_matches(dtype):
    r = check_gradient(dense_tan("correct", dtype), x_for(dtype))
    assert r.verdict == "match", r.detail
    assert r.reference == "autodiff"
    assert [(a.name, a.kind) for a in r.args] == [("x", "input"), ("w", "variable"),
                                                  ("b", "variable")]
    assert r.max_rel_error < (1e-6 if dtype == tf.float32 else 1e-14)
    assert r.detail.startswith("matches autodiff to")


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_sigmoid_and_log1pexp_match(dtype):
    @tf.custom_gradient
    def sigmoid(x):
        s = tf.sigmoid(x)
        return s, lambda dy: dy * s * (1 - s)

    @tf.custom_gradient
    def log1pexp(x):
        e = tf.exp(x)
        return tf.math.log(1 + e), lambda dy: dy * (1 - 1 / (1 + e))

    x = tf.constant([-2.0, -0.5, 0.3, 1.7, 4.0], dtype)
    for f in (sigmoid, log1pexp):
        r = check_gradient(f, x)
        assert (r.verdict, r.reference) == ("match", "autodiff"), (f, r.detail)


def test_output_derivative_is_mismatch():
    r = check_gradient(dense_tan("cos(y)"), x_for())
    assert r.verdict == "mismatch"
    assert r.max_rel_error > 0.01
    assert "off by" in r.detail and "vs autodiff" in r.detail


def test_one_in_a_thousand_bias_error_is_caught_in_float32():
    r = check_gradient(dense_tan("bias*1.001"), x_for())
    assert r.verdict == "mismatch", r.detail
    by_name = {a.name: a for a in r.args}
    assert by_name["b"].verdict == "mismatch"
    assert 5e-4 < by_name["b"].max_rel_error < 2e-3
    assert by_name["x"].verdict == by_name["w"].verdict == "match"
    assert r.detail.startswith("d/b off by 0.1")


def test_ignored_upstream_is_mismatch():
    r = check_gradient(dense_tan("ignored-upstream"), x_for())
    assert r.verdict == "mismatch"
    assert r.detail.startswith("upstream gradient ignored: nonzero gradient for zero upstream")


def test_hard_coded_variable_order_is_mismatch_whatever_the_set_order():
    # The permuted calls decide it, so the verdict does not depend on TensorFlow's set order.
    for _ in range(3):
        r = check_gradient(dense_tan("hard-coded-order"), x_for())
        assert r.verdict == "mismatch"
        assert r.detail.startswith("gradients do not follow the order of variables: hard-coded")


def test_hard_coded_order_with_three_same_shape_variables():
    vs = [tf.Variable(float(i + 1), name=f"v{i}") for i in range(3)]

    @tf.custom_gradient
    def f(x):
        y = x * (vs[0] + 2 * vs[1] + 3 * vs[2])

        def grad(u, variables=None):
            return u * (vs[0] + 2 * vs[1] + 3 * vs[2]), [u * x, 2 * u * x, 3 * u * x]
        return y, grad

    r = check_gradient(f, tf.constant(1.5))
    assert r.verdict == "mismatch" and "hard-coded order" in r.detail


def test_seed_fix_is_error_with_tensorflows_message():
    r = check_gradient(dense_tan("seed-fix"), x_for())
    assert r.verdict == "error"
    assert "grad_fn must accept keyword argument 'variables'" in r.detail
    assert "\n" not in r.detail and "numpy=" not in r.detail


def test_flat_tuple_is_error_too_many_values():
    r = check_gradient(dense_tan("flat"), x_for())
    assert r.verdict == "error"
    assert "too many values to unpack" in r.detail


def test_callable_instead_of_list_and_counts_are_errors():
    v = tf.Variable(2.0, name="v")

    @tf.custom_gradient
    def callable_grads(x):
        return x * v, lambda u, variables=None: (u * v, lambda vs: [u * x])

    @tf.custom_gradient
    def two_grads_for_three(p, q, r):
        return p * q + r, lambda dy: (dy * q, dy * p)

    @tf.custom_gradient
    def two_outputs_one_upstream(x):
        return (2 * x, 3 * x), (lambda d1: d1)

    @tf.custom_gradient
    def one_output_two_upstreams(x):
        return 2 * x, (lambda d1, d2: d1 + d2)

    a = tf.constant(2.0)
    r = check_gradient(one_output_two_upstreams, a)
    assert r.verdict == "error" and "missing 1 required positional argument" in r.detail
    r = check_gradient(callable_grads, a)
    assert r.verdict == "error" and "has no len()" in r.detail
    r = check_gradient(two_grads_for_three, a, a + 1, a + 2)
    assert r.verdict == "error"
    assert "expected to return 3 gradients, but returned 2" in r.detail
    r = check_gradient(two_outputs_one_upstream, a)
    assert r.verdict == "error" and "takes 1 positional argument but 2 were given" in r.detail


def test_collapsed_gradient_is_mismatch_with_both_shapes_and_unbroadcastable_is_error():
    # TensorFlow silently broadcasts a scalar gradient for a (3,) input: a wrong gradient.
    @tf.custom_gradient
    def f(x):
        return tf.sin(x), lambda u: tf.reduce_sum(u * tf.cos(x))

    r = check_gradient(f, tf.constant([1.0, 2.0, 3.0]))
    assert r.verdict == "mismatch", r.detail
    assert r.detail.startswith("d/x has shape () but x has shape (3,): a broadcast-collapsed")

    @tf.custom_gradient
    def g(x):
        return tf.sin(x), lambda u: tf.transpose(u * tf.cos(x))

    r = check_gradient(g, tf.ones([2, 3]))
    assert r.verdict == "error"
    assert r.detail == "the gradient for x has shape (3, 2) but x has shape (2, 3)"


def test_constant_gradient_of_a_fixed_shape_names_the_shape_too():
    # tensorflow#26270: a grad fn returning tf.fill of the shape seen while building, (1, 5, 8),
    # for a (2, 5, 8) input: the upstream is ignored and the shape is wrong; both are said.
    @tf.custom_gradient
    def f(x):
        return tf.sin(x), lambda u: tf.fill((1, 5, 8), 1.0)

    r = check_gradient(f, tf.ones([2, 5, 8]))
    assert r.verdict == "mismatch"
    assert r.detail.startswith("upstream gradient ignored")
    assert "d/x has shape (1, 5, 8) but x has shape (2, 5, 8): a broadcast-collapsed gradient" in r.detail


def test_complex_gradient_without_the_conjugate_is_named():
    # tensorflow#3348: TensorFlow's gradient for complex z is upstream * conj(f'(z)).
    z = tf.constant([1.0 + 2.0j, -0.5 + 0.25j], dtype=tf.complex64)

    @tf.custom_gradient
    def unconjugated(z):
        return z * z, lambda u: u * 2.0 * z

    @tf.custom_gradient
    def conjugated(z):
        return z * z, lambda u: u * tf.math.conj(2.0 * z)

    r = check_gradient(unconjugated, z)
    assert r.verdict == "mismatch" and "the complex conjugate of autodiff's gradient" in r.detail, r.detail
    assert check_gradient(conjugated, z).verdict == "match"

    @tf.custom_gradient
    def doubled(z):  # wrong, but not by a conjugate: not called one
        return z * z, lambda u: u * tf.math.conj(4.0 * z)

    r = check_gradient(doubled, z)
    assert r.verdict == "mismatch" and "conjugate" not in r.detail, r.detail


def test_log1pexp_at_100_matches_finite_differences():
    @tf.custom_gradient
    def log1pexp(x):
        e = tf.exp(x)
        return tf.math.log(1 + e), lambda dy: dy * (1 - 1 / (1 + e))

    r = check_gradient(log1pexp, tf.constant([0.0, 2.0, 100.0]))
    assert (r.verdict, r.reference) == ("match", "finite-differences"), r.detail
    assert r.detail.startswith("matches finite-differences to")


def test_wrong_gradient_where_autodiff_is_not_finite_is_mismatch():
    @tf.custom_gradient
    def log1pexp_wrong(x):
        e = tf.exp(x)
        return tf.math.log(1 + e), lambda dy: dy * 0.5 * (1 - 1 / (1 + e))

    r = check_gradient(log1pexp_wrong, tf.constant([0.0, 2.0, 100.0]))
    assert (r.verdict, r.reference) == ("mismatch", "finite-differences"), r.detail


def test_straight_through_clipping_reversal_are_intentional():
    @tf.custom_gradient
    def straight_through(x):
        return tf.round(x), lambda dy: dy

    @tf.custom_gradient
    def clipped(x):
        return tf.sin(x), lambda dy: tf.clip_by_norm(dy, 1.0) * tf.cos(x)

    @tf.custom_gradient
    def reversed_(x):
        return tf.identity(x), lambda dy: -dy

    x = tf.constant([[0.3, -1.2, 0.7], [1.4, 0.1, -0.6]])
    r = check_gradient(straight_through, x)
    assert r.verdict == "intentional" and "straight-through" in r.detail, r.detail
    r = check_gradient(clipped, x)
    assert r.verdict == "intentional" and "clipping" in r.detail, r.detail
    r = check_gradient(reversed_, x)
    assert r.verdict == "intentional" and "reversal" in r.detail, r.detail
    # Every gradient of a tan layer negated is not a reversal layer (those wrap an identity
    # forward) but a sign error: a mismatch that says so.
    r = check_gradient(dense_tan("reversal"), x_for())
    assert r.verdict == "mismatch" and "a sign error?" in r.detail, r.detail


def test_reversal_scaled_by_an_input_is_intentional_only_on_an_identity_forward():
    """A reversal whose strength is an input (a schedule): the factor varies per element but not
    with the upstream. On a forward that computes something, the same factor is a bug."""

    @tf.custom_gradient
    def flip_gradient(x, strength):
        return tf.identity(x), lambda dy: (-strength * dy, None)

    @tf.custom_gradient
    def sine(x, strength):
        return tf.sin(x), lambda dy: (-strength * dy * tf.cos(x), None)

    x = tf.constant([[0.3, -1.2, 0.7], [1.4, 0.1, -0.6]])
    s = tf.constant([[1.3, 0.2, 0.7], [2.0, 0.5, 1.1]])
    r = check_gradient(flip_gradient, x, s)
    assert r.verdict == "intentional" and "reversed and scaled per element" in r.detail, r.detail
    assert check_gradient(sine, x, s).verdict == "mismatch"


def test_a_gradient_not_finite_at_large_inputs_where_the_forward_is_is_a_mismatch():
    """A softplus written to be stable, whose grad fn computes e^z / (1 + e^z): right at small
    inputs, NaN once z > 88. The stable sigmoid form stays a match; so does a gradient that merely
    underflows (y * (1 - y) is 0 where the true value is 1e-44)."""

    @tf.custom_gradient
    def softplus_naive_grad(z):
        y = tf.maximum(z, 0.0) + tf.math.log1p(tf.exp(-tf.abs(z)))
        return y, lambda dy: dy * tf.exp(z) / (1.0 + tf.exp(z))

    @tf.custom_gradient
    def softplus_stable_grad(z):
        y = tf.maximum(z, 0.0) + tf.math.log1p(tf.exp(-tf.abs(z)))
        return y, lambda dy: dy * tf.sigmoid(z)

    @tf.custom_gradient
    def sigmoid(x):
        y = tf.sigmoid(x)
        return y, lambda dy: dy * y * (1.0 - y)

    x = tf.constant([[1.0, -0.5, 0.3], [-0.5, 1.2, -1.3]])
    r = check_gradient(softplus_naive_grad, x)
    assert r.verdict == "mismatch" and "large magnitude" in r.detail and "not finite" in r.detail, r.detail
    assert r.modes["wide"] == "mismatch"
    for f in (softplus_stable_grad, sigmoid):
        r = check_gradient(f, x)
        assert (r.verdict, r.modes["wide"]) == ("match", "match"), r.detail
    # At the values the user's own code passes (a call site's module data) it matches: what the
    # rescaled sample shows is a note, not the verdict.
    r = check_gradient(softplus_naive_grad, x, own_inputs=True)
    assert (r.verdict, r.modes["wide"]) == ("match", "mismatch"), r.detail
    assert "; note: at inputs of large magnitude (|x| up to 100)" in r.detail and "not finite" in r.detail


def test_half_probe_finds_a_gradient_fixed_to_float32_under_mixed_precision():
    """Statistics in float32 (as mixed-precision norms do) and a grad fn that forgets to cast back:
    at float32 inputs nothing shows; at the float16 a mixed_float16 layer passes, TensorFlow takes
    the float32 gradient silently. The grad fn that casts back stays a match."""

    def make(cast_back):
        @tf.custom_gradient
        def rms_normalize(x):
            x32 = tf.cast(x, tf.float32)
            inv = tf.math.rsqrt(tf.reduce_mean(tf.square(x32), axis=-1, keepdims=True) + 1e-6)
            y32 = x32 * inv

            def grad(dy):
                dy32 = tf.cast(dy, tf.float32)
                dx = inv * (dy32 - y32 * tf.reduce_mean(dy32 * y32, axis=-1, keepdims=True))
                return tf.cast(dx, x.dtype) if cast_back else dx

            return tf.cast(y32, x.dtype), grad
        return rms_normalize

    x = tf.constant([[0.3, -1.2, 0.7], [1.4, 0.1, -0.6]])
    r = check_gradient(make(False), x, half_probe="float16")
    assert r.verdict == "mismatch" and "d/x is float32 but x is float16" in r.detail, r.detail
    assert check_gradient(make(False), x).verdict == "match"  # float32 alone shows nothing
    r = check_gradient(make(True), x, half_probe="float16")
    assert (r.verdict, r.modes["float16"]) == ("match", "match"), r.detail


def test_declared_intentional_turns_mismatch_into_intentional():
    r = check_gradient(dense_tan("cos(y)"), x_for(), intentional=True)
    assert r.verdict == "intentional"
    assert r.detail.startswith("declared intentional")


def test_nondeterministic_gradient_is_mismatch():
    @tf.custom_gradient
    def noisy(x):
        return tf.sin(x), lambda dy: dy * tf.cos(x) * (1 + 1e-2 * tf.random.normal(tf.shape(x)))

    r = check_gradient(noisy, tf.constant([0.5, 1.0]))
    assert r.verdict == "mismatch" and "nondeterministic" in r.detail


def test_forward_that_fails_on_inputs_is_skipped_and_nothing_raises():
    W = tf.Variable(tf.ones([3, 2]))

    @tf.custom_gradient
    def op(x):
        return x @ W, lambda u, variables=None: (u @ tf.transpose(W), [tf.transpose(x) @ u])

    r = check_gradient(op, tf.ones([2, 5]))
    assert r.verdict == "skipped" and r.detail.startswith("forward raised on these inputs")


def test_raw_forward_and_tf_function_wrapped_are_accepted():
    def raw(x):
        return tf.sin(x), lambda dy: dy * tf.cos(x)

    x = tf.constant([0.2, 0.4])
    assert check_gradient(raw, x).verdict == "match"
    assert check_gradient(tf.function(tf.custom_gradient(raw)), x).verdict == "match"


def test_report_json_and_assert_helper():
    r = check_gradient(dense_tan("cos(y)"), x_for(), seed=7)
    d = json.loads(json.dumps(r.to_dict()))
    assert set(d) >= {"verdict", "reference", "max_rel_error", "detail", "seed", "args"}
    assert d["seed"] == 7 and d["verdict"] == "mismatch"
    assert {a["name"] for a in d["args"]} == {"x", "w", "b"}
    assert isinstance(r, GradientReport)
    with pytest.raises(AssertionError, match="off by"):
        assert_gradient_matches(dense_tan("cos(y)"), x_for())
    assert_gradient_matches(dense_tan("correct"), x_for())
    @tf.custom_gradient
    def reverse(x):
        return tf.identity(x), lambda dy: -dy

    with pytest.raises(AssertionError):
        assert_gradient_matches(reverse, x_for())
    assert_gradient_matches(reverse, x_for(), allow_intentional=True)
    with pytest.raises(AssertionError, match="sign error"):
        assert_gradient_matches(dense_tan("reversal"), x_for(), allow_intentional=True)


def test_non_trainable_variables_need_no_variables_parameter():
    scale = tf.Variable(3.0, trainable=False)

    @tf.custom_gradient
    def f(x):
        return scale * tf.sin(x), lambda dy: dy * scale * tf.cos(x)

    r = check_gradient(f, tf.constant([0.1, 0.9]))
    assert r.verdict == "match" and [a.kind for a in r.args] == ["input"]


def test_same_seed_same_report():
    a = check_gradient(dense_tan("bias*1.001"), x_for(), seed=3).to_dict()
    b = check_gradient(dense_tan("bias*1.001"), x_for(), seed=3).to_dict()
    assert a == b


def test_one_in_a_thousand_bias_error_is_caught_at_larger_n():
    x = tf.random.stateless_normal([5000, 3], seed=[1, 1]) * 0.3
    r = check_gradient(dense_tan("bias*1.001"), x)
    assert r.verdict == "mismatch" and r.detail.startswith("d/b off by"), r.detail
    assert check_gradient(dense_tan("correct"), x).verdict == "match"


def test_several_outputs_and_an_integer_input():
    @tf.custom_gradient
    def two_outputs(x):
        def grad(d_sin, d_cos):
            return d_sin * tf.cos(x) - d_cos * tf.sin(x)
        return (tf.sin(x), tf.cos(x)), grad

    @tf.custom_gradient
    def power(x, k):
        kf = tf.cast(k, x.dtype)
        return x ** kf, lambda dy: (dy * kf * x ** (kf - 1), None)

    x = tf.constant([0.3, 1.1, -0.7])
    assert check_gradient(two_outputs, x).verdict == "match"
    r = check_gradient(power, x, tf.constant(3))
    assert r.verdict == "match" and [a.name for a in r.args] == ["x"], r.detail


def test_stop_gradient_in_body_uses_finite_differences():
    # Autodiff of the body misses the stopped path; the custom gradient is the true one.
    @tf.custom_gradient
    def square(x):
        return x * tf.stop_gradient(x), lambda dy: 2 * dy * x

    r = check_gradient(square, tf.constant([0.5, -1.5, 2.0]))
    assert (r.verdict, r.reference) == ("match", "finite-differences"), r.detail


def test_kink_is_inconclusive_not_a_bug():
    @tf.custom_gradient
    def relu(x):
        return tf.nn.relu(x), lambda dy: dy * tf.cast(x >= 0, x.dtype)

    r = check_gradient(relu, tf.constant([0.0, 0.0], tf.float64))
    assert r.verdict == "skipped" and "inconclusive" in r.detail, r.detail
    assert check_gradient(relu, tf.constant([-0.5, 0.7], tf.float64)).verdict == "match"


def test_per_argument_results_name_the_culprit():
    r = check_gradient(dense_tan("hard-coded-order"), x_for())
    kinds = {a.name: a.verdict for a in r.args}
    assert kinds == {"x": "match", "w": "mismatch", "b": "mismatch"}
    r = check_gradient(dense_tan("ignored-upstream"), x_for())
    assert all(a.verdict == "mismatch" for a in r.args)
    assert all(a.max_rel_error is not None and a.max_rel_error > 0.1 for a in r.args)


def test_runtime_all_mismatches_in_unflagged_functions_are_not_all_checks_passed(tmp_path):
    """`--runtime=all` checks functions no rule flags: a missing factor and a sign error are
    mismatches that name the factor, the run exits 1, and its summary does not say that all
    checks passed."""
    import subprocess
    import sys

    from support import ENV

    (tmp_path / "ops.py").write_text(
        "import tensorflow as tf\n\n\n"
        "@tf.custom_gradient\ndef squared_norm(x):\n    def grad(dy):\n        return dy * x  # the 2 is missing\n\n"
        "    return tf.reduce_sum(x * x), grad\n\n\n"
        "@tf.custom_gradient\ndef softplus(x):\n    def grad(dy):\n        return -dy * tf.sigmoid(x)\n\n"
        "    return tf.math.softplus(x), grad\n")
    # (CG019 finds both from the evaluated maths too; ignored here, where the runtime's words are the point)
    run = subprocess.run([sys.executable, "-m", "cglint", "--isolated", "--ignore", "CG019", "--runtime=all", "ops.py"],
                         cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "squared_norm: mismatch vs autodiff: d/x off by 50% vs autodiff: custom = 0.5 x autodiff, a constant factor" in run.stdout, run.stdout
    assert "softplus: mismatch vs autodiff: d/x off by 200% vs autodiff: custom = -1 x autodiff, a sign error?" in run.stdout, run.stdout
    assert run.stdout.rstrip().endswith("No static findings; 2 runtime checks failed (1 file checked)."), run.stdout


def test_a_quantiser_through_an_integer_cast_is_a_straight_through_estimator():
    """int8 fake quantisation (Keras- and larq-style): autodiff has no gradient through the cast,
    finite differences wide enough to measure cross the steps; the forward is a staircase and the
    grad passes the upstream: intentional, never "off by an unbounded amount"."""
    @tf.custom_gradient
    def fake_int8(x):
        q = tf.cast(tf.clip_by_value(tf.round(x * 127.0), -127.0, 127.0), tf.int8)
        return tf.cast(q, tf.float32) / 127.0, lambda dy: dy

    r = check_gradient(fake_int8, tf.random.stateless_normal([4, 6], seed=[1, 2]))
    assert r.verdict == "intentional", r.detail
    assert r.detail.startswith("straight-through estimator: the forward is piecewise constant in x")


def test_quantisers_with_a_computed_scale_are_straight_through_estimators():
    """Ternary (TWN) and scaled binary (XNOR) weights: autodiff's gradient is the scale's alone
    (TensorFlow 2.21: nonzero through mean(|w|)), the grad fn passes the upstream through, whole or
    clipped. Intentional. A pass-through on a smooth forward stays a mismatch."""
    def ternary(w):
        t = 0.7 * tf.reduce_mean(tf.abs(w))
        kept = tf.cast(tf.abs(w) > t, w.dtype)
        alpha = tf.reduce_sum(tf.abs(w) * kept) / tf.maximum(tf.reduce_sum(kept), 1.0)
        return alpha * tf.sign(w) * kept, lambda dq: dq

    def xnor(w):
        return tf.reduce_mean(tf.abs(w)) * tf.sign(w), lambda dq: dq * tf.cast(tf.abs(w) <= 1.0, dq.dtype)

    def softsign(x):
        return x / (1.0 + tf.abs(x)), lambda dy: dy

    def absmax_int8(w):  # the scale recomputed from the input in float32 on every call
        s = tf.reduce_max(tf.abs(w)) / 127.0
        return tf.round(w / s) * s, lambda dy: dy

    w = tf.random.stateless_normal([4, 6], seed=[3, 4])
    for forward in (ternary, xnor, absmax_int8):
        r = check_gradient(tf.custom_gradient(forward), w)
        assert r.verdict == "intentional", (forward.__name__, r.detail)
        assert r.detail.startswith("straight-through estimator: the forward quantises w"), r.detail
    smooth = check_gradient(tf.custom_gradient(softsign), w)
    assert smooth.verdict == "mismatch", smooth.detail
    assert "the grad fn returns the upstream unchanged" in smooth.detail


def test_without_autodiff_finite_differences_are_the_reference_in_any_precision():
    import numpy as np

    def through_numpy(derivative):
        @tf.custom_gradient
        def np_sin(x):
            y = tf.numpy_function(lambda a: np.sin(a).astype(np.float32), [x], tf.float32)
            y.set_shape(x.shape)
            return y, lambda dy: dy * derivative(x)
        return np_sin

    x = tf.random.stateless_normal([4, 6], seed=[1, 2])
    right = check_gradient(through_numpy(tf.cos), x)
    assert (right.verdict, right.reference) == ("match", "finite-differences"), right.detail
    wrong = check_gradient(through_numpy(lambda x: tf.cos(2.0 * x)), x)
    assert (wrong.verdict, wrong.reference) == ("mismatch", "finite-differences"), wrong.detail
    assert wrong.detail.endswith("vs finite differences (autodiff has no gradient here)")


def test_an_unstable_gradient_is_caught_by_the_float64_reference_only():
    """softplus's grad written exp(x) / (1 + exp(x)): NaN at x = 100 in float32, and float32
    autodiff of the same formula is NaN too (inconclusive against it); float64 autodiff of the
    same forward is finite there, so the custom gradient is shown unstable."""
    def naive(x):
        e = tf.exp(x)
        return tf.math.log(1.0 + e), lambda dy: dy * e / (1.0 + e)

    x = tf.constant([100.0, 1.0, -3.0])
    r = check_gradient(naive, x)
    assert (r.verdict, r.reference) == ("mismatch", "float64-autodiff"), r.detail
    assert r.detail.startswith("d/x is not finite (nan at 1 of 3 elements) in float32 where float64 autodiff")
    assert check_gradient(naive, x, float64_rerun=False).verdict == "skipped"  # same precision: inconclusive
    stable = check_gradient(lambda x: (tf.math.softplus(x), lambda dy: dy * tf.sigmoid(x)), x)
    assert stable.verdict == "match", stable.detail


def test_a_forward_that_fails_the_same_way_on_every_input_is_an_error_not_skipped():
    from cglint.gradcheck.check import forward_failure, no_inputs_report

    @tf.custom_gradient
    def wrong_constant(x):
        return x * tf.constant(2, dtype=tf.int32), lambda dy: dy * 2.0

    failures = [forward_failure(wrong_constant, tf.ones(shape)) for shape in ([2, 3], [3], [])]
    r = no_inputs_report(failures)
    assert r.verdict == "error" and r.detail.startswith(
        "the forward fails on every input tried, whatever its shape: InvalidArgumentError: cannot compute Mul"), r.detail
    # Shape errors, or errors that ask for other kinds of inputs, leave it to the search: skipped.
    assert no_inputs_report(["InvalidArgumentError: Input to reshape is a tensor with 6 values",
                             "InvalidArgumentError: Input to reshape is a tensor with 3 values"]).verdict == "skipped"
    assert no_inputs_report(["TypeError: indices must be integers"] * 3).verdict == "skipped"


def test_a_quantiser_with_every_input_on_a_rounding_edge_is_still_a_straight_through_estimator():
    """larq's DoReFa in its own tests: zeros map to 0.5, and 0.5 * 3 sits on a rounding edge, so
    every tiny step makes the output jump; the jump does not shrink with the step, as a smooth
    forward's change would."""
    @tf.custom_gradient
    def k_bit(x):
        return tf.round(x * 3.0) / 3.0, lambda dy: dy

    r = check_gradient(k_bit, tf.fill([4, 6], 0.5))
    assert r.verdict == "intentional" and "piecewise constant" in r.detail, r.detail
    smooth = check_gradient(lambda x: (tf.sin(x), lambda dy: dy), tf.random.stateless_normal([4, 6], seed=[1, 2]))
    assert smooth.verdict == "mismatch", smooth.detail


def _reversible_block(wrong: bool):
    """RevNet's reversible block as tf-models writes it (`ReversibleLayer.call`): the grad fn
    takes its gradients from a non-persistent tape the forward made, so it can be called once
    per forward call, which is how TensorFlow calls it."""
    w = tf.Variable([[0.5, -0.2], [0.1, 0.3]], name="w")
    v = tf.Variable([[0.2, 0.4], [-0.3, 0.1]], name="v")

    @tf.custom_gradient
    def reversible(x):
        with tf.GradientTape() as fwdtape:
            fwdtape.watch(x)
            y = tf.tanh(x @ w) @ v

        def grad_fn(dy, variables=None):
            grads = fwdtape.gradient(y, [y if wrong else x] + variables, output_gradients=dy)
            return grads[0], grads[1:]

        return y, grad_fn

    return reversible


def test_a_grad_fn_callable_once_per_forward_call_is_checked_on_a_forward_run_per_call():
    x = tf.random.stateless_normal([3, 2], seed=[4, 2])
    r = check_gradient(_reversible_block(wrong=False), x)
    assert r.verdict == "match", r.detail  # was `error`: "A non-persistent GradientTape can only be used ..."
    # The grad fn is still judged: the derivative taken at the output is found.
    wrong = check_gradient(_reversible_block(wrong=True), x)
    assert wrong.verdict == "mismatch", wrong.detail


def _through_py_function(derivative):
    """A forward computed in NumPy behind `tf.py_function` (as elasticdeform wraps its C
    extension), with its gradient computed in NumPy too."""
    import numpy as np

    @tf.custom_gradient
    def op(x):
        y = tf.py_function(lambda a: np.sin(a.numpy()), [x], [x.dtype])

        def grad(*dys):
            return tf.py_function(lambda d, a: d.numpy() * derivative(a.numpy()), [dys[0], x], [x.dtype])

        return y, grad

    return op


def test_a_forward_autodiff_cannot_go_through_is_checked_against_finite_differences():
    import numpy as np

    x = tf.constant([0.1, 0.5, 1.0, -0.7])
    right = check_gradient(_through_py_function(np.cos), x)
    # was `skipped`: "the check itself failed: ... KeyError: b'pyfunc_0'"
    assert (right.verdict, right.reference) == ("match", "finite-differences"), right.detail
    wrong = check_gradient(_through_py_function(np.sin), x)
    assert wrong.verdict == "mismatch" and "vs finite differences (autodiff has no gradient here)" in wrong.detail, \
        wrong.detail


def test_a_grad_fn_holding_a_tensor_of_a_finished_graph_is_skipped_not_an_error():
    """Built inside a tf.function, the grad fn closes over a tensor of that function's graph: called
    on other inputs outside it, TensorFlow refuses the tensor. That is where it was called, not
    its gradient: `skipped` with TensorFlow's message (it was `error`)."""
    made = {}

    @tf.function
    def build(x):
        w = tf.exp(x)

        @tf.custom_gradient
        def scale(t):
            return t * 2.0, lambda dy: dy * w

        made["scale"] = scale
        return scale(x)

    build(tf.ones(3))
    report = check_gradient(made["scale"], tf.ones(3))
    assert report.verdict == "skipped", report
    assert report.detail.startswith("the forward or its grad fn uses a tensor of the graph it was built in"), report
    assert "is out of scope and cannot be used here" in report.detail


@tf.custom_gradient
def _rejection_sampler(c, seed):
    """A rejection sampler's shape (TFP's von Mises): stateless random proposals, accepted by a
    test on `c`, with an implicit gradient; autodiff is NaN at the proposals where sqrt's slope
    is infinite."""
    u = tf.random.stateless_uniform([4096], seed, minval=-1.0, maxval=1.0)
    v = tf.random.stateless_uniform([4096], seed + 1)
    k = tf.round(3.0 * u)
    y = tf.where(v < tf.exp(-c * tf.abs(u)), tf.sqrt(c * k * k), 0.0)

    def grad(dy):
        return tf.reduce_sum(dy * y / (2.0 * c)), None

    return y, grad


def test_a_forward_that_draws_random_numbers_is_not_judged_by_finite_differences():
    """Finite differences of a sampler at a fixed seed jump wherever a step flips an acceptance:
    they are no reference for its gradient. Where autodiff is not finite either, nothing is
    (it was `mismatch: d/c off by 1791% vs finite differences`)."""
    report = check_gradient(_rejection_sampler, tf.constant(1.3), tf.constant([1, 2]))
    assert report.verdict == "skipped", report
    assert report.detail == ("inconclusive for c: the forward draws random numbers (StatelessRandomGetKeyCounter, "
                             "StatelessRandomUniformV2), so finite differences measure the jumps of its samples, "
                             "not a derivative, and autodiff is not finite here")


@tf.custom_gradient
def _int8_matmul(x, kernel):
    """The forward rounds its input at an abs-max scale (as Keras's int8 layers do); the grad fn
    is the float product's gradient: a straight-through estimator."""
    scale = 127.0 / (tf.reduce_max(tf.abs(x), axis=-1, keepdims=True) + 1e-7)
    q = tf.clip_by_value(tf.round(x * scale), -127.0, 127.0)
    y = tf.matmul(q, kernel) / scale

    def grad(dy):
        return tf.matmul(dy, kernel, transpose_b=True), tf.matmul(x, dy, transpose_a=True)

    return y, grad


@tf.custom_gradient
def _int8_matmul_untransposed(x, kernel):
    scale = 127.0 / (tf.reduce_max(tf.abs(x), axis=-1, keepdims=True) + 1e-7)
    y = tf.matmul(tf.clip_by_value(tf.round(x * scale), -127.0, 127.0), kernel) / scale
    return y, lambda dy: (tf.matmul(dy, kernel), tf.matmul(x, dy, transpose_a=True))


@tf.custom_gradient
def _relu6_no_mask(x):
    return tf.clip_by_value(x, 0.0, 6.0), lambda dy: dy


def test_a_straight_through_estimator_is_recognised_by_relaxing_the_quantiser():
    """Autodiff of the quantised forward differs (round has no gradient; the scale's does), so it
    was a false `mismatch`; autodiff of the forward with round and clip relaxed to the identity is
    the grad fn's. A wrong grad fn around the same quantiser is still a mismatch, and a clip alone
    is not relaxed (a pass-through gradient for relu6 forgets its mask)."""
    x = tf.constant([[0.3, -1.2, 0.7], [1.4, 0.1, -0.6], [0.2, 0.9, -2.0], [-0.4, 0.5, 1.1]])
    k = tf.constant([[0.5, -0.3, 0.8], [0.1, 0.7, -0.2], [-0.6, 0.4, 0.9]])
    r = check_gradient(_int8_matmul, x, k)
    assert (r.verdict, r.detail) == ("intentional", "straight-through estimator: matches autodiff of the forward "
                                     "with `round`, `clip_by_value` relaxed to the identity"), r.detail
    assert r.modes["tf.function"] == "intentional"
    assert check_gradient(_int8_matmul_untransposed, x, k).verdict == "mismatch"
    r = check_gradient(_relu6_no_mask, tf.constant([[-1.0, 2.0, 7.0], [3.0, 8.0, -0.5]]))
    assert r.verdict == "mismatch", r.detail


def test_keras_int8_layer_pattern_is_a_straight_through_estimator():
    """Keras 3's int8 Dense, as user code writes it with `keras.ops`: the input quantised by
    `abs_max_quantize` (round, clip, cast to int8), an int8 product, and a grad fn that is the
    float kernel's product. Relaxing the quantiser's ops gives the grad fn exactly."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras
    from keras import ops

    q_kernel, k_scale = keras.quantizers.abs_max_quantize(tf.constant([[0.5, -0.3], [0.1, 0.7], [-0.6, 0.4]]),
                                                          axis=0, to_numpy=False)
    q_kernel = tf.convert_to_tensor(q_kernel)

    @ops.custom_gradient
    def int8_dense(inputs):
        def grad_fn(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream
            return ops.matmul(upstream, ops.transpose(ops.divide(ops.cast(q_kernel, "float32"), k_scale)))

        q_in, in_scale = keras.quantizers.abs_max_quantize(inputs, axis=-1)
        x = ops.cast(ops.matmul(q_in, q_kernel), "float32")
        return ops.divide(x, ops.multiply(in_scale, k_scale)), grad_fn

    r = check_gradient(int8_dense, tf.constant([[0.3, -1.2, 0.7], [1.4, 0.1, -0.6]]))
    assert r.verdict == "intentional" and r.detail.startswith(
        "straight-through estimator: matches autodiff of the forward with `round`"), r.detail
    assert "`cast`" in r.detail


def test_keras_int8_layer_with_its_kernel_as_inputs_is_a_straight_through_estimator():
    """Keras 3.15's `Dense._int8_call`: the int8 kernel and its scale are inputs of the custom
    gradient, whose grad fn returns None for both. The stopped scale stays a stop, the input's
    gradient is the straight-through one."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras
    from keras import ops

    q_kernel, k_scale = keras.quantizers.abs_max_quantize(tf.constant([[0.5, -0.3], [0.1, 0.7], [-0.6, 0.4]]),
                                                          axis=0, to_numpy=False)

    @ops.custom_gradient
    def matmul_with_inputs_gradient(inputs, kernel, kernel_scale):
        def grad_fn(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream
            float_kernel = ops.divide(ops.cast(kernel, "float32"), kernel_scale)
            return ops.matmul(upstream, ops.transpose(float_kernel)), None, None

        q_in, in_scale = keras.quantizers.abs_max_quantize(inputs, axis=-1)
        x = ops.cast(ops.matmul(q_in, kernel), "float32")
        return ops.divide(x, ops.multiply(kernel_scale, in_scale)), grad_fn

    x = tf.constant([[0.3, -1.2, 0.7], [1.4, 0.1, -0.6]])
    r = check_gradient(matmul_with_inputs_gradient, x, tf.convert_to_tensor(q_kernel), k_scale)
    assert r.verdict == "intentional" and r.detail.startswith("straight-through estimator"), r.detail
    verdicts = {a.name: (a.verdict, a.detail) for a in r.args}
    assert verdicts["inputs"][0] == "intentional" and verdicts["inputs"][1].startswith("straight-through"), verdicts
    assert verdicts["kernel_scale"] == ("intentional", "gradient stopped: the grad fn returns None for kernel_scale")

    # The same layer with a grad fn that forgets the scale: still a mismatch.
    @ops.custom_gradient
    def unscaled(inputs, kernel, kernel_scale):
        def grad_fn(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream
            return ops.matmul(upstream, ops.transpose(ops.cast(kernel, "float32"))), None, None

        q_in, in_scale = keras.quantizers.abs_max_quantize(inputs, axis=-1)
        x = ops.cast(ops.matmul(q_in, kernel), "float32")
        return ops.divide(x, ops.multiply(kernel_scale, in_scale)), grad_fn

    assert check_gradient(unscaled, x, tf.convert_to_tensor(q_kernel), k_scale).verdict == "mismatch"


def test_a_first_order_custom_gradient_that_drops_the_second_derivative_is_said_by_default():
    """An elementwise forward costs two more passes to differentiate twice: by default the second
    derivative is compared too, and one the grad fn drops (a stop_gradient around sigmoid) is a
    note on the `match`, which the first derivative is."""

    @tf.custom_gradient
    def softplus_stopped(x):
        return tf.nn.softplus(x), lambda dy: dy * tf.stop_gradient(tf.sigmoid(x))

    @tf.custom_gradient
    def softplus(x):
        return tf.nn.softplus(x), lambda dy: dy * tf.sigmoid(x)

    x = tf.constant([[0.3, -1.2, 0.7], [1.4, 0.1, -0.6]])
    r = check_gradient(softplus_stopped, x)
    assert (r.verdict, r.modes["second-order"]) == ("match", "mismatch"), r.detail
    assert r.detail.endswith("; note: second derivative: no second derivative for x (None) where autodiff's is "
                             "nonzero (the first derivative is right; what differentiates twice, a gradient penalty, "
                             "gets the wrong one)"), r.detail
    r = check_gradient(softplus, x)
    assert (r.verdict, r.modes["second-order"], r.detail) == ("match", "match", "matches autodiff to 0")


def _phase_shift(dphi_of):
    @tf.custom_gradient
    def phase_shift(phi, amp):
        rot = tf.exp(tf.complex(tf.zeros_like(phi), phi))
        out = rot * amp
        return out, lambda dy: (dphi_of(dy, out), dy * tf.math.conj(rot))

    return phase_shift


def test_a_real_input_of_a_complex_output_missing_the_conjugate_is_named():
    """piquasso#216: a real phase's gradient Re(u * i out) where TensorFlow's is
    Re(u * conj(i out)); with a real upstream the two agree, so it hides."""
    phi = tf.constant([0.3, 1.1, -0.4])
    amp = tf.constant([1.0 + 0.5j, 0.2 - 0.7j, -0.3 + 0.1j], dtype=tf.complex64)
    r = check_gradient(_phase_shift(lambda dy, out: tf.math.real(dy * 1j * out)), phi, amp)
    d = {a.name: (a.verdict, a.detail) for a in r.args}
    assert d["phi"][0] == "mismatch" and "Re(upstream * conj(d out/d phi))" in d["phi"][1], d
    assert d["amp"][0] == "match", d
    right = check_gradient(_phase_shift(lambda dy, out: tf.math.real(dy * tf.math.conj(1j * out))), phi, amp)
    assert right.verdict == "match", right.detail
    # Another mistake (twice the gradient) is a mismatch, not named a conjugate.
    twice = check_gradient(_phase_shift(lambda dy, out: tf.math.real(dy * tf.math.conj(2j * out))), phi, amp)
    assert twice.verdict == "mismatch" and "conj" not in twice.detail, twice.detail


def _gamma_params(grad_order):
    @tf.custom_gradient
    def gamma_params(raw):
        a, b = tf.unstack(raw, axis=-1)
        rate, concentration = tf.nn.softplus(a), tf.nn.softplus(b) + 1.0

        def grad(*ups):
            d = dict(zip(grad_order, ups))
            return tf.stack([d["rate"] * tf.sigmoid(a), d["concentration"] * tf.sigmoid(b)], axis=-1)

        return {"rate": rate, "concentration": concentration}, grad

    return gamma_params


def test_a_dict_outputs_upstreams_read_in_the_written_order_are_named():
    """TensorFlow passes a dict output's upstreams in sorted-key order (concentration, rate); a
    grad fn that names them in the order the dict was written gets them swapped."""
    raw = tf.constant([[0.3, -1.2], [1.4, 0.1], [-0.6, 0.8]])
    r = check_gradient(_gamma_params(("rate", "concentration")), raw)
    assert r.verdict == "mismatch", r.detail
    assert r.detail.endswith("the grad fn takes its upstreams in the dict's written order (rate, concentration), but "
                             "TensorFlow passes them in sorted-key order (concentration, rate): given them in the "
                             "written order it matches autodiff"), r.detail
    assert check_gradient(_gamma_params(("concentration", "rate")), raw).verdict == "match"


def test_a_wrong_dict_output_gradient_is_not_blamed_on_the_key_order():
    @tf.custom_gradient
    def heads(raw):
        a, b = tf.unstack(raw, axis=-1)

        def grad(d_rate, d_concentration):  # wrong in either order: the sigmoid is missing
            return tf.stack([d_rate, d_concentration], axis=-1)

        return {"rate": tf.nn.softplus(a), "concentration": tf.nn.softplus(b)}, grad

    r = check_gradient(heads, tf.constant([[0.3, -1.2], [1.4, 0.1], [-0.6, 0.8]]))
    assert r.verdict == "mismatch" and "sorted-key order" not in r.detail, r.detail


def _float8_outputs(cast_to, clip=True):
    """Keras 3.15's `_float8_call.quantized_dequantize_outputs`: an identity forward whose grad fn
    quantises the upstream (clip to the format's largest value, cast, cast back) and returns the
    scale's and amax history's next values, which Keras assigns (`overwrite_with_gradient`)."""
    import ml_dtypes

    @tf.custom_gradient
    def quantized_dequantize_outputs(outputs, scale, amax_history):
        def grad(upstream):
            top = float(ml_dtypes.finfo("float8_e5m2").max)
            x = upstream / scale
            x = tf.clip_by_value(x, -top, top) if clip else x
            qdq = tf.cast(tf.cast(x, cast_to), tf.float32) * scale
            return qdq, scale * 2.0, tf.concat([amax_history[1:], [tf.reduce_max(tf.abs(upstream))]], 0)

        return tf.identity(outputs), grad

    return quantized_dequantize_outputs


def test_a_float8_quantised_gradient_with_overwritten_scales_is_intentional():
    x, history = tf.random.stateless_normal([4, 5], seed=[1, 2]), tf.zeros([16])
    # a scale the check's upstreams overflow: the quantiser's clip saturates them
    r = check_gradient(_float8_outputs(tf.as_dtype("float8_e5m2")), x, tf.constant(1e-6), history, overwritten=(1, 2))
    assert r.verdict == "intentional", r.detail
    assert r.detail.startswith("quantised gradient: matches autodiff with the grad fn's 8-bit float quantiser"), r.detail
    d = {a.name: (a.verdict, a.detail) for a in r.args}
    assert d["scale"] == d["amax_history"] == ("intentional", "not a gradient: Keras assigns what the grad fn returns "
                                                              "for it to the variable (`overwrite_with_gradient`)")
    # Not overwritten: a scale's "gradient" that ignores the upstream is what it looks like.
    assert check_gradient(_float8_outputs(tf.as_dtype("float8_e5m2")), x, tf.constant(1.0), history).verdict == "mismatch"
    # A gradient rounded to integers is no float8 quantiser: still a mismatch.
    r = check_gradient(_float8_outputs(tf.int8, clip=False), x * 0.3, tf.constant(1.0), history, overwritten=(1, 2))
    assert r.verdict == "mismatch", r.detail
