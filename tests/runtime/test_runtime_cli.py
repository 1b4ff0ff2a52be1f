"""`cglint --runtime` end to end on the seed fixtures: real TensorFlow in real child processes."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def cglint_json(*args):
    run = subprocess.run([sys.executable, "-m", "cglint", "--output-format", "json", *args], capture_output=True,
                         text=True, cwd=ROOT, env=ENV, timeout=600)
    assert "Traceback" not in run.stderr, run.stderr
    return run.returncode, json.loads(run.stdout)


def test_seed_fixtures_get_verdicts_attached_to_their_findings():
    rc, out = cglint_json("--runtime=all", "fixtures/seed/")
    assert rc == 1
    verdicts = {r["path"]: r for r in out["runtime"]}
    original = verdicts["fixtures/seed/original.py"]
    assert original["verdict"] in ("error", "mismatch") and original["function"] == "custom_op"
    seed_fix = verdicts["fixtures/seed/seed_fix.py"]
    assert seed_fix["verdict"] == "error" and "variables" in seed_fix["detail"]
    correct = verdicts["fixtures/seed/correct.py"]
    assert (correct["verdict"], correct["reference"]) == ("match", "autodiff")
    # A finding in a checked function carries its function's verdict when the verdict shows the
    # finding's own symptom (the seed's error is TensorFlow's `variables` TypeError: it confirms
    # CG004, not the output derivative of CG005).
    from cglint.gradcheck.symptoms import shows

    carried = {(d["path"], d["code"]) for d in out["diagnostics"] if d.get("runtime")}
    for d in out["diagnostics"]:
        verdict = verdicts[d["path"]]
        assert (d.get("runtime") or {}).get("verdict") == (verdict["verdict"] if shows(d["code"], verdict) else None)
    assert ("fixtures/seed/seed_fix.py", "CG004") in carried
    assert ("fixtures/seed/original.py", "CG005") not in carried


def test_flagged_mode_checks_only_flagged_functions_and_text_says_confirmed(tmp_path):
    bad = (ROOT / "fixtures/rules/cg005_bad.py").read_text()
    good = (ROOT / "fixtures/rules/cg005_good.py").read_text()
    (tmp_path / "bad.py").write_text(bad)
    (tmp_path / "good.py").write_text(good)
    run = subprocess.run([sys.executable, "-m", "cglint", "--runtime", "."], capture_output=True, text=True,
                         cwd=tmp_path, env=ENV, timeout=600)
    assert run.returncode == 1
    assert "= runtime: confirmed: d/x off by" in run.stdout
    assert "good.py" not in run.stdout


def test_runtime_tolerance_from_pyproject_reaches_the_check(tmp_path):
    (tmp_path / "bad.py").write_text((ROOT / "fixtures/rules/cg005_bad.py").read_text())
    (tmp_path / "pyproject.toml").write_text("[tool.cglint.runtime]\nrtol = 0.5\n")
    run = subprocess.run([sys.executable, "-m", "cglint", "--runtime", "--output-format", "json", "."],
                         capture_output=True, text=True, cwd=tmp_path, env=ENV, timeout=600)
    (verdict,) = json.loads(run.stdout)["runtime"]
    # The derivative is 35% off: within a (silly) 50% tolerance it is not confirmed.
    assert verdict["verdict"] == "match", verdict


def test_concise_output_carries_the_runtime_verdicts(tmp_path):
    """One line per finding with its verdict, then one line per runtime check (ruff's concise
    keeps what the text format says, on one line)."""
    import re

    (tmp_path / "bad.py").write_text((ROOT / "fixtures/rules/cg005_bad.py").read_text())
    run = subprocess.run([sys.executable, "-m", "cglint", "--runtime", "--output-format", "concise", "."],
                         capture_output=True, text=True, cwd=tmp_path, env={**ENV, "NO_COLOR": "1"}, timeout=600)
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    (finding,) = [line for line in lines if " CG005 " in line]
    assert re.match(r"bad\.py:10:21: CG005 \[\*\] .* = runtime: confirmed: d/x off by \d+%", finding), finding
    (check,) = [line for line in lines if re.match(r"bad\.py:\d+: \w+: ", line)]
    assert re.match(r"bad\.py:5: stable_softplus: mismatch vs autodiff: d/x off by \d+%", check), check
    assert "Found 1 problem in 1 file." in lines
