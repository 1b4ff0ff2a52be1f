"""The data-flow examples of the rules say what TensorFlow does, and TensorFlow agrees: each
INVALID below raises or gives gradients that differ from autodiff (eagerly or under
`tf.function`), each VALID matches autodiff in both modes. One child process runs them all
with TensorFlow 2.21 + Keras 3 (`examples_behaviour.py`)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from support import ENV  # noqa: E402

from cglint.rules import RULES_BY_CODE  # noqa: E402

# (rule, INVALID or VALID, a line that picks the example, what TensorFlow does)
CASES = [
    ("CG002", "INVALID", "return tuple([dy * w, dw, db])", "raises"),  # too many values to unpack
    ("CG003", "VALID", "def grad_grad(ddx):", "match"),  # a grad fn that is itself @tf.custom_gradient
    ("CG004", "INVALID", "        w = self.kernel\n", "raises"),  # alias made in `call`
    ("CG004", "INVALID", "kernel, bias = self.trainable_weights", "raises"),
    ("CG004", "INVALID", "self.scales = [tf.Variable(1.0), tf.Variable(2.0)]", "raises"),
    ("CG004", "INVALID", "            return self.dense(x), grad\n", "raises"),  # sublayer
    ("CG004", "INVALID", "tf.compat.v1.get_variable(", "raises"),
    ("CG004", "VALID", "kernel, bias = self.dense.kernel.value, self.dense.bias.value", "match"),
    ("CG004", "VALID", "trainable=False)\n\n    def call(self, x):\n        mean = self.mean", "match"),
    ("CG005", "INVALID", "    x = tf.tan(x)\n", "mismatch"),  # input rebound to the output
    ("CG005", "INVALID", "        return dy * 2 * y\n", "mismatch"),  # judged by evaluating the maths
    ("CG005", "INVALID", "        return dy / (1 + tf.abs(y)) ** 2\n", "mismatch"),
    ("CG005", "VALID", "    y = x * x\n\n    def grad(dy):\n        return dy * 2 * x\n", "match"),
    ("CG005", "INVALID", "keras.activations.sigmoid(s)", "mismatch"),
    ("CG005", "INVALID", "ops.cosh(t)", "mismatch"),
    ("CG005", "INVALID", "def sec2(a):", "mismatch"),  # a derivative helper two calls deep
    ("CG005", "VALID", "h = x  # the backward needs the pre-activation", "match"),
    ("CG005", "VALID", "from tensorflow.keras import activations", "match"),
    ("CG006", "INVALID", "list((dw, db))", "mismatch"),  # under tf.function: sorted by name, b before w
    ("CG006", "VALID", 'self.params = {"w": tf.Variable(2.0), "b": tf.Variable(1.0)}', "match"),
    ("CG009", "INVALID", "functools.partial(_square_grad, x=x)", "mismatch"),
    ("CG009", "VALID", "functools.partial(_scaled_square_grad, x=x, scale=3.0)", "match"),
    ("CG014", "INVALID", "dkernel if v is self.dense.kernel else", "mismatch"),
    ("CG014", "INVALID", "by_var = {self.gain: tf.reduce_sum(dy * x, axis=0)}", "raises"),  # unhashable
    ("CG014", "VALID", "gain = self.gain.value", "match"),
    # CG019: wrong formulas differ from autodiff; the right ones (one a stable rewrite) match
    ("CG019", "INVALID", "return dy * tf.where(x > 0.0, 1.0, ALPHA * tf.exp(x))", "mismatch"),  # SELU's scale
    ("CG019", "INVALID", "return -dy * tf.sigmoid(x)", "mismatch"),
    ("CG019", "INVALID", "return dy * s\n", "mismatch"),  # the softmax VJP's second term missing
    ("CG019", "VALID", "return dy * SCALE * tf.where(", "match"),
    ("CG019", "VALID", "return dy / (1.0 + tf.exp(-x))", "match"),
]


def _example(code, kind, marker):
    found = [str(e) for e in getattr(RULES_BY_CODE[code], kind) if marker in e]
    assert len(found) == 1, f"{code} {kind}: {len(found)} examples contain {marker!r}"
    return found[0]


def test_examples_behave_as_they_say():
    sources = [_example(code, kind, marker) for code, kind, marker, _ in CASES]
    child = subprocess.run([sys.executable, str(ROOT / "tests" / "runtime" / "examples_behaviour.py")],
                           input=json.dumps(sources), capture_output=True, text=True, env=ENV, timeout=600)
    assert child.returncode == 0, child.stderr[-3000:]
    wrong = []
    for (code, kind, marker, expected), got in zip(CASES, json.loads(child.stdout)):
        modes = [got["eager"], got["graph"]]
        if expected == "match":
            ok = modes == ["match", "match"]
        else:
            ok = any(m.startswith(expected) for m in modes)
        if not ok:
            wrong.append(f"{code} {kind} {marker!r}: expected {expected}, got eager={modes[0]!r} graph={modes[1]!r}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("code,kind,marker,expected", CASES)
def test_each_case_is_a_real_example_of_its_rule(code, kind, marker, expected):
    from cglint.engine import lint_source

    source = _example(code, kind, marker)
    flagged = [d for d in lint_source(source, "e.py", [RULES_BY_CODE[code]], prefilter=False).diagnostics]
    assert bool(flagged) == (kind == "INVALID")
