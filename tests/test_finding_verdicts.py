"""A verdict per finding (issue #36, item 3): in a function with two bugs, a hard-coded variable
order and a wrong derivative, each finding's claim is judged on its own numbers. Measured numbers
in, verdicts out (no TensorFlow here; tests/runtime/test_finding_verdicts.py runs the real check)."""

import numpy as np

from cglint.gradcheck.symptoms import for_finding
from cglint.gradcheck.verdict import Arg, Measurements, decide, pct

rng = np.random.default_rng(3)
X = Arg("x", "input", (2, 3), "float32")
W = Arg("w", "variable", (3, 4), "float32")
B = Arg("b", "variable", (4,), "float32")


def _measured(dx_factor: float, shared_shapes: bool = False) -> Measurements:
    """Autodiff VJPs for 3 probes; the grad fn returns the variable gradients in a fixed order,
    [db, dw] whichever order `variables` comes in, and d/x times `dx_factor`."""
    b = Arg("b", "variable", (3, 4), "float32") if shared_shapes else B
    autos = [[rng.standard_normal(a.shape).astype(np.float32) for a in (X, W, b)] for _ in range(3)]
    customs = [[a[0] * np.float32(dx_factor), a[2], a[1]] for a in autos]
    return Measurements([X, W, b], [[rng.standard_normal((2, 4)).astype(np.float32)] for _ in autos],
                        customs, autos, zero=[np.zeros_like(c) for c in customs[0]], again=list(customs[0]),
                        orders=[((1, 0), [customs[0][0], customs[0][1], customs[0][2]])])


def _summary(report) -> dict:
    return report.to_dict()


def test_the_order_finding_and_the_value_finding_get_their_own_verdicts():
    report = _summary(decide(_measured(1.3)))
    assert report["verdict"] == "mismatch" and "order of variables" in report["detail"]
    order = for_finding("CG006", report)
    values = for_finding("CG005", report)
    assert order["detail"] == report["detail"]
    assert values["verdict"] == "mismatch"
    assert values["detail"].startswith("d/x off by 30% vs autodiff (d/w, d/b match)")
    assert "paired with its variable by shape" in values["detail"]
    assert values["max_rel_error"] == report["claims"]["values"]["max_rel_error"]
    assert f"off by {pct(values['max_rel_error'])}" in values["detail"]  # one number, one rounding


def test_a_right_formula_behind_a_wrong_order_is_not_confirmed():
    report = _summary(decide(_measured(1.0)))
    assert report["verdict"] == "mismatch"
    assert for_finding("CG006", report)["verdict"] == "mismatch"
    values = for_finding("CG005", report)
    assert values["verdict"] == "match" and values["detail"].startswith("matches autodiff")


def test_variables_of_one_shape_leave_the_inputs_to_judge():
    report = _summary(decide(_measured(2.0, shared_shapes=True)))
    values = for_finding("CG009", report)
    assert values["verdict"] == "mismatch" and "on the inputs alone" in values["detail"]
    assert values["detail"].startswith("d/x off by 100% vs autodiff")


def test_without_an_order_problem_a_value_finding_takes_the_functions_verdict():
    report = {"verdict": "mismatch", "reference": "autodiff", "max_rel_error": 0.3,
              "detail": "d/x off by 30% vs autodiff"}
    assert for_finding("CG005", report) == report
    assert for_finding("CG006", report) is None  # not its symptom: no verdict rather than a wrong one


def test_explain_runtime_defines_off_by():
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "cglint", "--explain", "runtime"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "||c - a|| / ||a||" in run.stdout and "A verdict per finding" in run.stdout
