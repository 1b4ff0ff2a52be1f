"""CG009's claim about an upstream read only for its shape, checked with TensorFlow: under
`5 * f(x)` the straight-through grad fn `tf.ones_like(dy)` gives 1.0 (the upstream's 5.0 is
lost), `dy * tf.ones_like(x)` gives 5.0; cglint flags the first only."""

import json
import subprocess
import sys
from pathlib import Path

from cglint import engine
from cglint.rules.cg009_upstream_ignored import UpstreamIgnored

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from support import ENV  # noqa: E402

SHAPE_ONLY = next(v for v in UpstreamIgnored.INVALID if "tf.ones_like(dy)" in v)
VALUES = next(v for v in UpstreamIgnored.VALID if "dy * tf.ones_like(x)" in v)

CHILD = '''
import json, sys
import tensorflow as tf
out = []
for source in json.loads(sys.argv[2]):
    scope = {}
    exec(source, scope)
    x = tf.constant([0.3, -0.2])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(5.0 * scope["sign_ste"](x))
    out.append(tape.gradient(y, x).numpy().tolist())
json.dump(out, open(sys.argv[1], "w"))
'''


def test_tensorflow_loses_the_upstream_read_only_for_its_shape(tmp_path):
    assert "tf.ones_like(dy)" in SHAPE_ONLY and "dy * tf.ones_like(x)" in VALUES
    report = tmp_path / "out.json"
    subprocess.run([sys.executable, "-c", CHILD, str(report), json.dumps([SHAPE_ONLY, VALUES])], env=ENV,
                   capture_output=True, timeout=300)
    assert json.loads(report.read_text()) == [[1.0, 1.0], [5.0, 5.0]]
    assert [d.code for d in engine.lint_source(SHAPE_ONLY, "m.py", ["CG009"]).diagnostics] == ["CG009"]
    assert engine.lint_source(VALUES, "m.py", ["CG009"]).diagnostics == []
