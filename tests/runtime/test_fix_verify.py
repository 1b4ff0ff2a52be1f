"""`cglint --fix --verify`: an unsafe fix is kept where the fixed function matches autodiff and
refused where it does not. CG006's fix maps gradients to variables by the order the forward
first reads them; right for `x @ w + b`, wrong for `b + x @ w` when the list is `[dW, db]`."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

RIGHT = """import tensorflow as tf

w = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
b = tf.Variable([0.5, -0.5])


@tf.custom_gradient
def dense(x):
    def grad(dy, variables=None):
        return dy @ tf.transpose(w), [tf.transpose(x) @ dy, tf.reduce_sum(dy, 0)]

    return x @ w + b, grad
"""
WRONG = RIGHT.replace("return x @ w + b, grad", "return b + x @ w, grad")


def test_verify_keeps_a_right_unsafe_fix_and_refuses_a_wrong_one(tmp_path):
    (tmp_path / "right.py").write_text(RIGHT)
    (tmp_path / "wrong.py").write_text(WRONG)
    run = subprocess.run([sys.executable, "-m", "cglint", "--isolated", "--no-cache", "--fix", "--verify",
                          "right.py", "wrong.py"], capture_output=True, text=True, cwd=tmp_path, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 1, run.stderr  # wrong.py's finding remains
    fixed = (tmp_path / "right.py").read_text()
    assert "[grads_by_variable[v.ref()] for v in variables]" in fixed
    assert (tmp_path / "wrong.py").read_text() == WRONG  # refused: the file is as it was
    assert "right.py:7: dense: unsafe fixes verified against autodiff (match" in run.stderr
    assert "wrong.py:7: dense: unsafe fixes not applied: the fixed function is error against autodiff" in run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["right.py", "wrong.py"]  # no probe left behind


def test_verify_needs_fix_or_diff(tmp_path):
    (tmp_path / "right.py").write_text(RIGHT)
    run = subprocess.run([sys.executable, "-m", "cglint", "--verify", "right.py"], capture_output=True, text=True,
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (run.returncode, run.stderr.strip()) == (2, "cglint: error: --verify checks fixes: use it with --fix or --diff")
