"""Every fixable rule's fix, run on a Keras 3 layer (`fixtures/keras/`), gives the gradients
TensorFlow autodiff gives for the same forward, eagerly and under `tf.function` (so also in
`model.fit`). The unfixed layers raise or are wrong (CG001's is right but retraces every call),
so the comparison can fail."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from support import ENV, cglint  # noqa: E402

LAYERS = sorted((ROOT / "fixtures" / "keras").glob("cg*_layer.py"))
FIXABLE = {"CG001", "CG002", "CG003", "CG004", "CG005", "CG006", "CG014", "CG015"}
TOLERANCE = 1e-4


def test_every_fixable_rule_has_a_keras_layer():
    from cglint.rules import ALL_RULES

    codes = {p.name[:5].upper() for p in LAYERS}
    assert codes == FIXABLE
    assert {r.code for r in ALL_RULES if r.code in FIXABLE} == FIXABLE


def test_fixed_keras_layers_match_autodiff(tmp_path):
    fixed = []
    for path in LAYERS:
        shutil.copy(path, tmp_path / path.name)
        fixed.append(tmp_path / path.name)
    # Each layer is flagged by its own rule, and the fixes leave nothing behind.
    found = {}
    for d in json.loads(cglint("--output-format", "json", *fixed).stdout)["diagnostics"]:
        found.setdefault(Path(d["path"]).name, set()).add(d["code"])
    assert found == {p.name: {p.name[:5].upper()} for p in fixed}
    run = cglint("--fix", "--unsafe-fixes", *fixed)
    assert "Traceback" not in run.stderr and run.returncode == 0, run.stdout + run.stderr
    for path in fixed:
        assert path.read_text() != (ROOT / "fixtures" / "keras" / path.name).read_text(), f"{path.name} not fixed"

    child = subprocess.run([sys.executable, str(ROOT / "tests" / "runtime" / "keras_grads.py"), *map(str, LAYERS),
                            *map(str, fixed)], capture_output=True, text=True, env=ENV, timeout=600)
    assert child.returncode == 0, child.stderr[-3000:]
    results = json.loads(child.stdout)
    for original, path in zip(LAYERS, fixed):
        after = results[str(path)]
        for mode in ("eager", "graph"):
            assert after[mode].get("max_abs_error", 1.0) < TOLERANCE, (
                f"{path.name} after the fix, {mode}: {after[mode]}\n{path.read_text()}")
        before = results[str(original)]
        broken = [m for m in ("eager", "graph") if before[m].get("max_abs_error", 1.0) >= TOLERANCE]
        if original.name.startswith("cg001"):
            assert not broken, before  # slow, not wrong
        else:
            assert broken, f"{original.name} was already right: {before}"
