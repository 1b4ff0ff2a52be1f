"""The runtime verdict from measured numbers alone: NumPy arrays in, GradientReport out.

Nothing here imports TensorFlow (one test proves it in a child process where importing it
fails), so the verdict logic is tested wherever cglint's static side is."""

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from cglint.gradcheck.verdict import Arg, Measurements, Options, combine, decide, near_noise_floor

ROOT = Path(__file__).resolve().parents[1]
rng = np.random.default_rng(0)

X = Arg("x", "input", (2, 3), "float32")
W = Arg("w", "variable", (3, 2), "float32")
B = Arg("b", "variable", (2,), "float32")


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def measured(args, autos, customs=None, **kw):
    """Measurements for probes of autodiff VJPs `autos`; the custom side equals them unless
    given. The zero upstream gives zeros and the repeat call the same values by default."""
    customs = customs if customs is not None else [list(a) for a in autos]
    kw.setdefault("zero", [None if c is None else np.zeros_like(c) for c in customs[0]])
    kw.setdefault("again", list(customs[0]))
    ups = [[f32(2, 2)] for _ in autos]
    return Measurements(args, ups, customs, autos, **kw)


def probes(n=3, shapes=((2, 3), (3, 2), (2,))):
    return [[f32(*s) for s in shapes] for _ in range(n)]


class FD:
    """Finite differences from a known true gradient per argument (as float64 would give)."""

    def __init__(self, true, small=None):
        self.true, self._small = true, small

    def fd(self, k, direction):
        return float(np.sum(self.true[k].astype(np.float64) * direction)), True

    def small(self, factor):
        return self._small(factor)


def test_equal_gradients_match_with_the_worst_error_in_the_detail():
    autos = probes()
    customs = [[a * (1 + 1e-7) for a in p] for p in autos]
    r = decide(measured([X, W, B], autos, customs))
    assert r.verdict == "match" and r.reference == "autodiff"
    assert r.detail == "matches autodiff to 1e-07"
    assert [a.verdict for a in r.args] == ["match"] * 3


def test_one_in_a_thousand_error_in_one_argument_names_it():
    autos = probes()
    customs = [[p[0], p[1], p[2] * 1.001] for p in autos]
    r = decide(measured([X, W, B], autos, customs))
    assert r.verdict == "mismatch"
    assert r.detail == "d/b off by 0.1% vs autodiff (d/x, d/w match)"
    assert {a.name: a.verdict for a in r.args} == {"x": "match", "w": "match", "b": "mismatch"}


def test_broadcast_collapsed_gradient_is_mismatch_with_both_shapes():
    beta = Arg("beta", "input", (2,), "float32")
    autos = [[f32(4, 2), f32(2)] for _ in range(3)]
    customs = [[a[0], np.float32(a[1].sum())] for a in autos]  # tensorflow#127690
    r = decide(measured([Arg("x", "input", (4, 2), "float32"), beta], autos, customs))
    assert r.verdict == "mismatch"
    assert r.detail.startswith("d/beta has shape () but beta has shape (2,): a "
                               "broadcast-collapsed gradient, which TensorFlow silently broadcasts")
    assert r.args[0].verdict == "match" and r.args[1].verdict == "mismatch"


def test_over_reduced_gradient_is_mismatch_and_unbroadcastable_is_error():
    x = Arg("x", "input", (4, 3), "float32")
    autos = [[f32(4, 3)]]
    r = decide(measured([x], autos, [[autos[0][0].sum(0)]]))
    assert r.verdict == "mismatch" and "d/x has shape (3,) but x has shape (4, 3)" in r.detail
    r = decide(measured([x], autos, [[autos[0][0].T]]))
    assert (r.verdict, r.detail) == ("error", "the gradient for x has shape (3, 4) but x has "
                                     "shape (4, 3)")


def test_float32_gradient_for_float64_input_is_mismatch():
    x = Arg("x", "input", (3,), "float64")
    autos = [[rng.standard_normal(3)] for _ in range(2)]
    customs = [[a[0].astype(np.float32)] for a in autos]
    r = decide(measured([x], autos, customs))
    assert r.verdict == "mismatch"
    assert r.detail == "d/x is float32 but x is float64: TensorFlow accepts the gradient in the "\
                       "wrong dtype"


def test_nan_is_reported_as_nan_never_as_an_ignored_upstream():
    norm = Arg("norm", "input", (), "float32")
    autos = [[f32(2, 3), np.float32(0.5)] for _ in range(2)]
    customs = [[a[0], np.float32(np.nan)] for a in autos]
    r = decide(measured([X, norm], autos, customs,
                        zero=[np.zeros((2, 3), np.float32), np.float32(np.nan)]))
    assert r.verdict == "mismatch"
    assert r.detail == "d/norm is not finite (nan) where autodiff is finite (d/x match)"
    assert "upstream" not in r.detail


def test_nan_at_some_elements_and_both_sides_non_finite():
    x = Arg("x", "input", (4,), "float32")
    a = np.array([0.1, 0.2, 0.3, 1e-30], np.float32)
    r = decide(measured([x], [[a]], [[np.array([0.1, 0.2, 0.3, np.nan], np.float32)]]))
    assert r.detail == "d/x is not finite (nan at 1 of 4 elements) where autodiff is finite"
    inf = np.array([0.1, np.inf, 0.3, 0.4], np.float32)
    r = decide(measured([x], [[inf]], [[np.array([0.1, np.nan, 0.3, 0.4], np.float32)]]))
    assert r.verdict == "skipped"
    assert r.detail == ("inconclusive for x: the custom gradient (nan at 1 of 4 elements) and "
                        "autodiff (inf at 1 of 4 elements) are both not finite here")


def test_nonzero_gradient_for_zero_upstream_is_an_ignored_upstream():
    autos = probes()
    r = decide(measured([X, W, B], autos, zero=[np.ones((2, 3), np.float32), None, None]))
    assert r.verdict == "mismatch"
    assert r.detail == "upstream gradient ignored: nonzero gradient for zero upstream (d/x)"


def test_hard_coded_variable_order_from_the_permuted_call():
    v = [Arg(f"v{i}", "variable", (), "float32") for i in range(2)]
    autos = [[np.float32(1.0), np.float32(2.0)]]
    r = decide(measured(v, autos, orders=[((1, 0), [np.float32(1.0), np.float32(2.0)])]))
    assert r.verdict == "mismatch"
    assert r.detail.startswith("gradients do not follow the order of variables: hard-coded order")
    r = decide(measured(v, autos, orders=[((1, 0), [np.float32(2.0), np.float32(1.0)])]))
    assert r.verdict == "match"


def test_swapped_variables_under_tf_function_say_so():
    gamma, beta = Arg("gamma", "variable", (3,), "float32"), Arg("beta", "variable", (3,), "float32")
    autos = [[f32(2, 3), f32(3), f32(3)] for _ in range(3)]
    customs = [[a[0], a[2], a[1]] for a in autos]
    r = decide(measured([X, gamma, beta], autos, customs, mode="tf.function"))
    assert r.verdict == "mismatch"
    assert r.detail == ("gradients swapped between variables (`variables` comes sorted by name "
                        "here): d/gamma is beta's gradient, d/beta is gamma's gradient (d/x match)")
    eager = decide(measured([X, gamma, beta], autos))
    both = combine(eager, r)
    assert both.verdict == "mismatch"
    assert both.detail.startswith("under tf.function (model.fit) only: gradients swapped")
    assert both.detail.endswith("(eager: matches autodiff to 0)")


def test_a_scaled_identity_is_intentional_a_scaled_layer_is_a_bug():
    # A gradient multiplier / reversal layer: the forward is tf.identity(x), so autodiff's
    # gradient is the upstream itself, and the custom one is a constant times it.
    x = Arg("x", "input", (2, 2), "float32")
    ups = [[f32(2, 2)] for _ in range(3)]
    for factor, start in ((-1.0, "gradient reversal: custom = -1"), (0.1, "gradient scaled by 0.1"),
                          (-0.3, "gradient reversed and scaled by 0.3")):
        m = Measurements([x], ups, [[factor * u[0]] for u in ups], [[u[0]] for u in ups],
                         zero=[np.zeros((2, 2), np.float32)], again=[factor * ups[0][0]])
        r = decide(m)
        assert r.verdict == "intentional" and r.detail.startswith(start), r.detail
    # A layer (x, W, b) whose every gradient is negated or halved: a sign error or a missing
    # constant, not a reversal layer. Said so, and a mismatch.
    autos = probes()
    r = decide(measured([X, W, B], autos, [[-a for a in p] for p in autos]))
    assert r.verdict == "mismatch" and "custom = -1 x autodiff, a sign error?" in r.detail, r.detail
    r = decide(measured([X, W, B], autos, [[0.5 * a for a in p] for p in autos]))
    assert r.verdict == "mismatch" and "a constant factor missing or extra?" in r.detail, r.detail
    # Declared intentional, it is.
    r = decide(measured([X, W, B], autos, [[-a for a in p] for p in autos]), opts=Options(intentional=True))
    assert r.verdict == "intentional"
    r = decide(measured([X, W, B], autos, [[p[0], p[1], 2 * p[2]] for p in autos]))
    assert r.verdict == "mismatch"


def test_clipping_is_recognised_by_the_small_upstream_probe():
    x = Arg("x", "input", (5,), "float32")
    autos = [[4 * f32(5)] for _ in range(3)]
    clip = [[np.clip(a[0], -1, 1)] for a in autos]
    small = lambda factor: ([np.clip(autos[0][0] * factor, -1, 1)], [autos[0][0] * factor])  # noqa: E731
    r = decide(measured([x], autos, clip), FD([autos[0][0]], small))
    assert r.verdict == "intentional"
    assert r.detail.startswith("gradient clipping (x): matches autodiff for a small upstream")
    # Without the small-upstream probe the same numbers are a plain mismatch.
    assert decide(measured([x], autos, clip)).verdict == "mismatch"


def test_finite_differences_decide_where_autodiff_is_not_finite():
    x = Arg("x", "input", (3,), "float64")
    true = np.array([0.5, 0.88, 1.0])
    autos = [[np.array([0.5, 0.88, np.nan])]]
    r = decide(measured([x], autos, [[true]]), FD([true]))
    assert (r.verdict, r.reference) == ("match", "finite-differences")
    r = decide(measured([x], autos, [[true * 0.5]]), FD([true]))
    assert (r.verdict, r.reference) == ("mismatch", "finite-differences")
    assert r.detail.startswith("d/x off by")


def test_declared_intentional_and_straight_through():
    x = Arg("x", "input", (3,), "float32")
    autos = [[np.zeros(3, np.float32)] for _ in range(2)]
    customs = [[f32(3)] for _ in range(2)]
    r = decide(measured([x], autos, customs))
    assert r.verdict == "intentional" and r.detail.startswith("straight-through estimator")
    autos = [[f32(3)] for _ in range(2)]
    r = decide(measured([x], autos, customs), opts=Options(intentional=True))
    assert r.verdict == "intentional" and r.detail.startswith("declared intentional: d/x off by")


def test_complex_gradients_compare_with_their_imaginary_part():
    z = Arg("z", "input", (3,), "complex64")
    a = (f32(3) + 1j * f32(3)).astype(np.complex64)
    r = decide(measured([z], [[a]], [[np.conj(a)]]))
    assert r.verdict == "mismatch" and r.detail.startswith("d/z off by")
    assert decide(measured([z], [[a]])).verdict == "match"


def test_noise_floor_flags_a_float32_match_worth_a_float64_rerun():
    autos = probes()
    near = decide(measured([X, W, B], autos, [[p[0] * (1 + 5e-6), p[1], p[2]] for p in autos]))
    assert near.verdict == "match" and near_noise_floor(near)
    assert not near_noise_floor(decide(measured([X, W, B], autos)))


def test_the_verdict_module_never_imports_tensorflow():
    code = textwrap.dedent("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "tensorflow" or name.startswith("tensorflow."):
                    raise ImportError("tensorflow is blocked in this test")
        sys.meta_path.insert(0, Block())
        import numpy as np
        from cglint.gradcheck.verdict import Arg, Measurements, decide
        from cglint.runtime import GradientReport
        a = [np.ones(3, np.float32)]
        r = decide(Measurements([Arg("x", "input", (3,), "float32")], [[a[0]]], [a], [a]))
        assert isinstance(r, GradientReport) and r.verdict == "match", r
        assert "tensorflow" not in sys.modules
        print("ok")
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ok"


@pytest.mark.parametrize("verdict", ["match", "intentional"])
def test_eager_mismatch_wins_and_says_tf_function_agrees(verdict):
    autos = probes()
    bad = decide(measured([X, W, B], autos, [[p[0] * 2, p[1], p[2]] for p in autos]))
    good = decide(measured([X, W, B], autos))
    good.verdict = verdict
    both = combine(bad, good)
    assert both.verdict == "mismatch" and both.detail.endswith("(eagerly; under tf.function it matches)")
