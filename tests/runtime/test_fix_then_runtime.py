"""Fixes checked by real TensorFlow: the seed's op after `--fix --unsafe-fixes` must match
autodiff in `--runtime=all`, and so must the seed's "corrected code" after its fixes."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def cglint(*args, cwd):
    return subprocess.run([sys.executable, "-m", "cglint", *args], capture_output=True, text=True, cwd=cwd, env=ENV,
                          timeout=600)


@pytest.mark.parametrize("name", ["original.py", "seed_fix.py"])
def test_fixed_seed_matches_autodiff(tmp_path, name):
    shutil.copy(ROOT / "fixtures" / "seed" / name, tmp_path / name)
    before = json.loads(cglint("--output-format", "json", "--runtime=all", name, cwd=tmp_path).stdout)
    assert before["runtime"][0]["verdict"] in ("mismatch", "error")
    fix = cglint("--fix", "--unsafe-fixes", name, cwd=tmp_path)
    assert "Traceback" not in fix.stderr, fix.stderr
    run = cglint("--output-format", "json", "--runtime=all", name, cwd=tmp_path)
    out = json.loads(run.stdout)
    (verdict,) = out["runtime"]
    assert (verdict["function"], verdict["verdict"], verdict["reference"]) == ("custom_op", "match", "autodiff"), verdict
    assert out["diagnostics"] == [] and run.returncode == 0
