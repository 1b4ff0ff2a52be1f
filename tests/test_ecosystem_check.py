"""The ecosystem check's bookkeeping, offline: a release already in the cache is linted and
its findings are compared with a baseline (new -> exit 1, stale reported, reasons kept)."""

import importlib.util
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("ecosystem_check", ROOT / "scripts" / "ecosystem_check.py")
eco = importlib.util.module_from_spec(spec)
sys.modules["ecosystem_check"] = eco  # dataclasses look their module up while it is executed
spec.loader.exec_module(eco)

DIST, VERSION = "larq", dict((d, v) for d, v, *_ in eco.PROJECTS)["larq"]

BUGGY = '''import tensorflow as tf

@tf.custom_gradient
def square(x):
    return x * x, lambda dy: 2 * x
'''
FINE = '''import tensorflow as tf

@tf.custom_gradient
def square(x):
    return x * x, lambda dy: dy * 2 * x

def unrelated():
    return 1
'''


@pytest.fixture
def cache(tmp_path):
    """A cache holding a fake release of one pinned project: no download happens."""
    dest = tmp_path / "cache" / "downloads" / f"{DIST}-{VERSION}"
    dest.mkdir(parents=True)
    with zipfile.ZipFile(dest / f"{DIST}-{VERSION}-py3-none-any.whl", "w") as zf:
        zf.writestr("pkg/ops.py", BUGGY)
        zf.writestr("pkg/fine.py", FINE)
        zf.writestr("pkg/data.txt", "not python")
        zf.writestr("../evil.py", BUGGY)  # never extracted outside the cache
    return tmp_path / "cache"


def run(cache, baseline, *extra):
    return eco.main(["--cache-dir", str(cache), "--project", DIST, "--baseline", str(baseline), *extra])


def test_new_finding_fails_and_is_printed(cache, tmp_path, capsys):
    baseline = tmp_path / "baseline.txt"
    assert run(cache, baseline) == 1
    out = capsys.readouterr().out
    assert f"NEW    {DIST}/pkg/ops.py:5 CG009" in out
    row = next(line for line in out.splitlines() if line.startswith(f"{DIST}=="))
    assert row.split()[1:7] == ["wheel", "2", "2", "2", "0", "1"]  # from, files, parsed, sites, keras, findings
    assert not (tmp_path / "evil.py").exists() and not (cache / "src" / "evil.py").exists()


def test_baseline_entry_with_reason_passes_and_stale_entries_are_reported(cache, tmp_path, capsys):
    baseline = tmp_path / "baseline.txt"
    baseline.write_text(
        "# comment\n"
        f"{DIST}/pkg/ops.py:5 CG009  grad ignores the upstream: TF trains on the local derivative\n"
        f"{DIST}/pkg/gone.py:3 CG007  no longer there\n"
    )
    assert run(cache, baseline) == 0
    out = capsys.readouterr().out
    assert f"STALE  {DIST}/pkg/gone.py:3 CG007" in out and "0 new" in out


def test_write_baseline_marks_new_entries_unexamined_and_keeps_reasons(cache, tmp_path):
    baseline = tmp_path / "baseline.txt"
    assert run(cache, baseline, "--write-baseline") == 0
    assert eco.read_baseline(baseline)[f"{DIST}/pkg/ops.py:5 CG009"].startswith("UNEXAMINED")
    assert run(cache, baseline) == 1  # an unexamined entry is not an explanation
    baseline.write_text(f"{DIST}/pkg/ops.py:5 CG009  reason given\n")
    assert run(cache, baseline, "--write-baseline") == 0
    assert eco.read_baseline(baseline) == {f"{DIST}/pkg/ops.py:5 CG009": "reason given"}


def test_committed_baseline_is_well_formed():
    entries = eco.read_baseline(eco.BASELINE)
    projects = {d for d, *_ in eco.PROJECTS}
    for where, reason in entries.items():
        path_line, code = where.rsplit(" ", 1)
        assert path_line.split("/", 1)[0] in projects and code.startswith("CG")
        assert int(path_line.rsplit(":", 1)[1]) > 0
        assert len(reason) > 40 and not reason.startswith("UNEXAMINED"), where


# Patterns met in the ecosystem releases, kept here so the check's conclusions stay true offline.

def test_numpy_on_a_numpy_result_is_not_flagged_again():
    """Once `.numpy()` is flagged, NumPy work on what came out of it is not a second finding;
    converting a tensor input in place (`x = np.array(x)`) still is."""
    from cglint.engine import lint_source
    from cglint.rules import select_rules

    follow_up = '''import numpy as np
import tensorflow as tf

@tf.custom_gradient
def gate(theta, cutoff: int):
    theta = theta.numpy()
    g = np.cos(theta) * np.eye(cutoff)
    g = np.transpose(g)

    def grad(dy):
        return tf.reduce_sum(dy), None

    return g, grad
'''
    in_place = '''import numpy as np
import tensorflow as tf

@tf.custom_gradient
def square(x):
    x = np.array(x)
    return x * x, lambda dy: dy * 2 * x
'''
    rules = select_rules(["CG012"], [])
    assert [d.line for d in lint_source(follow_up, "a.py", rules).diagnostics] == [6]
    assert [d.line for d in lint_source(in_place, "b.py", rules).diagnostics] == [6]
