"""Baselines (write, report only new findings, survive line moves, stale entries and pruning,
`[tool.cglint] baseline`) and `--output-format gitlab` (GitLab's own Code Quality schema,
fingerprints stable under line moves)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from inprocess import cglint
from support import FIXTURES

DATA = Path(__file__).parent / "data"
SEED = (FIXTURES / "seed" / "original.py").read_text()

# A second op with one new bug (CG005 at its `cos(y)`), written the way the seed's users write.
NEW_OP = '''

@tf.custom_gradient
def scaled_tan(x):
    y = tf.math.tan(x)

    def grad(upstream):
        return upstream / tf.square(tf.math.cos(y))

    return y, grad
'''


def findings(run) -> list[tuple[str, int, str]]:
    assert run.returncode in (0, 1), run.stderr
    return [(d["path"], d["line"], d["code"]) for d in json.loads(run.stdout)["diagnostics"]]


def test_baseline_round_trip_reports_only_the_new_finding_even_after_lines_move(tmp_path):
    ops = tmp_path / "ops.py"
    ops.write_text(SEED)
    before = findings(cglint("--output-format", "json", "ops.py", cwd=tmp_path))
    assert sorted(code for _, _, code in before) == ["CG001", "CG002", "CG004", "CG005"]

    run = cglint("--write-baseline", "cglint-baseline.json", "ops.py", cwd=tmp_path)
    assert run.returncode == 0 and "Wrote 4 findings to the baseline cglint-baseline.json." in run.stderr
    recorded = json.loads((tmp_path / "cglint-baseline.json").read_text())
    assert recorded["version"] == 1 and {e["path"] for e in recorded["findings"]} == {"ops.py"}

    # Nothing new: clean, exit 0.
    run = cglint("--baseline", "cglint-baseline.json", "ops.py", cwd=tmp_path)
    assert run.returncode == 0 and "4 findings hidden by the baseline" in run.stderr, run.stdout + run.stderr

    # A new bug: only it is reported.
    ops.write_text(SEED + NEW_OP)
    run = cglint("--baseline", "cglint-baseline.json", "--output-format", "json", "ops.py", cwd=tmp_path)
    new_line = (SEED + NEW_OP).splitlines().index("        return upstream / tf.square(tf.math.cos(y))") + 1
    assert findings(run) == [("ops.py", new_line, "CG005")]
    assert run.returncode == 1

    # Move everything: the new op first, blank lines and a comment above the old one.
    head, rest = SEED.split("import tensorflow as tf\n", 1)
    moved = head + "import tensorflow as tf\n" + NEW_OP + "\n\n# the original op, moved down\n\n\n" + rest
    ops.write_text(moved)
    run = cglint("--baseline", "cglint-baseline.json", "--output-format", "json", "ops.py", cwd=tmp_path)
    new_line = moved.splitlines().index("        return upstream / tf.square(tf.math.cos(y))") + 1
    assert findings(run) == [("ops.py", new_line, "CG005")], run.stdout
    assert new_line < 20  # the finding really moved


def test_stale_entries_are_counted_and_pruned(tmp_path):
    ops = tmp_path / "ops.py"
    ops.write_text(SEED)
    assert cglint("--write-baseline", "base.json", ".", cwd=tmp_path).returncode == 0
    # Fix CG001 (the nested @tf.function): its entry no longer matches anything.
    assert cglint("--fix", "--select", "CG001", "ops.py", cwd=tmp_path).returncode == 0
    run = cglint("--baseline", "base.json", ".", cwd=tmp_path)
    assert run.returncode == 0
    assert "3 findings hidden by the baseline base.json; 1 stale entry (fixed or gone: --prune-baseline drops them)." \
        in run.stderr
    run = cglint("--baseline", "base.json", "--prune-baseline", ".", cwd=tmp_path)
    assert "pruned 1 stale entry" in run.stderr
    entries = json.loads((tmp_path / "base.json").read_text())["findings"]
    assert sorted(e["code"] for e in entries) == ["CG002", "CG004", "CG005"]
    run = cglint("--baseline", "base.json", ".", cwd=tmp_path)
    assert "stale" not in run.stderr and run.returncode == 0


def test_equal_findings_are_counted_not_merged(tmp_path):
    """Two findings with the same key (same code, same line text): the baseline holds two, and a
    third copy is new."""
    op = NEW_OP.replace("scaled_tan", "first")
    (tmp_path / "ops.py").write_text("import tensorflow as tf\n" + op + op.replace("first", "second"))
    assert cglint("--write-baseline", "b.json", "ops.py", cwd=tmp_path).returncode == 0
    (entry,) = json.loads((tmp_path / "b.json").read_text())["findings"]
    assert entry["count"] == 2
    (tmp_path / "ops.py").write_text("import tensorflow as tf\n" + op + op.replace("first", "second")
                                     + op.replace("first", "third"))
    run = cglint("--baseline", "b.json", "--output-format", "json", "ops.py", cwd=tmp_path)
    assert [code for _, _, code in findings(run)] == ["CG005"]


def test_configured_baseline_and_bad_baselines(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.cglint]\nbaseline = "ci/cglint-baseline.json"\n')
    (tmp_path / "ops.py").write_text(SEED)
    run = cglint("ops.py", cwd=tmp_path)
    assert run.returncode == 2 and run.stderr.startswith("cglint: error: baseline file not found: ")
    assert len(run.stderr.splitlines()) == 1
    (tmp_path / "ci").mkdir()
    assert cglint("--write-baseline", "ci/cglint-baseline.json", "ops.py", cwd=tmp_path).returncode == 0
    assert cglint("ops.py", cwd=tmp_path).returncode == 0  # the configured baseline hides all four
    assert cglint("--no-baseline", "ops.py", cwd=tmp_path).returncode == 1
    (tmp_path / "ci" / "cglint-baseline.json").write_text("[1, 2")
    run = cglint("ops.py", cwd=tmp_path)
    assert run.returncode == 2 and "cannot read baseline" in run.stderr and "Traceback" not in run.stderr
    (tmp_path / "pyproject.toml").write_text("[tool.cglint]\nbaseline = 3\n")
    run = cglint("ops.py", cwd=tmp_path)
    assert run.returncode == 2 and "`baseline`" in run.stderr


# ---- GitLab Code Quality ---------------------------------------------------------------------


def gitlab(tmp_path, *paths) -> list[dict]:
    run = cglint("--output-format", "gitlab", *paths, cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    return json.loads(run.stdout)


def test_gitlab_report_validates_against_gitlabs_code_quality_schema(tmp_path):
    (tmp_path / ".git").mkdir()  # paths are relative to the repository root
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "ops.py").write_text(SEED)
    issues = gitlab(tmp_path, "pkg")
    schema = json.loads((DATA / "gitlab-codeclimate.json").read_text())
    assert isinstance(issues, list) and len(issues) == 4
    for issue in issues:
        jsonschema.validate(issue, schema)
        # What GitLab's documentation requires beyond the schema's types.
        assert issue["severity"] in {"info", "minor", "major", "critical", "blocker"}
        assert isinstance(issue["check_name"], str) and issue["description"].startswith(issue["check_name"] + ": ")
        assert issue["location"]["path"] == "pkg/ops.py" and issue["location"]["lines"]["begin"] >= 1
    assert sorted((i["check_name"], i["location"]["lines"]["begin"], i["severity"]) for i in issues) == [
        ("CG001", 16, "minor"), ("CG002", 27, "major"), ("CG004", 22, "major"), ("CG005", 23, "major")]
    assert len({i["fingerprint"] for i in issues}) == 4


def test_gitlab_fingerprints_survive_line_moves(tmp_path):
    (tmp_path / "ops.py").write_text(SEED)
    before = {i["check_name"]: (i["fingerprint"], i["location"]["lines"]["begin"]) for i in gitlab(tmp_path, "ops.py")}
    (tmp_path / "ops.py").write_text(SEED.replace("import tensorflow as tf\n", "import tensorflow as tf\n\n\n# moved\n", 1))
    after = {i["check_name"]: (i["fingerprint"], i["location"]["lines"]["begin"]) for i in gitlab(tmp_path, "ops.py")}
    assert {k: f for k, (f, _) in before.items()} == {k: f for k, (f, _) in after.items()}
    assert all(after[k][1] == before[k][1] + 3 for k in before)


def test_gitlab_report_is_an_empty_array_when_clean(tmp_path):
    (tmp_path / "ok.py").write_text((FIXTURES / "seed" / "correct.py").read_text())
    run = cglint("--output-format", "gitlab", "ok.py", cwd=tmp_path)
    assert run.returncode == 0 and json.loads(run.stdout) == []


def test_fix_leaves_the_baselined_findings_alone(tmp_path):
    # The baseline records the seed's findings; --fix rewrites only the new op's CG005, and the
    # seed's CG005 (fixable, safe) stays as written: hidden in the report, untouched in the file.
    ops = tmp_path / "ops.py"
    ops.write_text(SEED)
    assert cglint("--write-baseline", "baseline.json", "ops.py", cwd=tmp_path).returncode == 0
    ops.write_text(SEED + NEW_OP)
    run = cglint("--fix", "--baseline", "baseline.json", "ops.py", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    fixed = ops.read_text()
    assert fixed.startswith(SEED)  # the recorded findings' code, as it was
    assert "tf.square(tf.math.cos(y))" not in fixed[len(SEED):]  # the new finding's fix applied
    # --diff agrees; without the baseline, the seed's CG005 is fixed too.
    ops.write_text(SEED + NEW_OP)
    diff = cglint("--diff", "--baseline", "baseline.json", "ops.py", cwd=tmp_path).stdout
    assert diff.count("\n-    ") == 1, diff
    assert cglint("--fix", "--no-baseline", "ops.py", cwd=tmp_path).returncode == 1
    assert not ops.read_text().startswith(SEED)
