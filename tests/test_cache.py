"""The CLI cache (.cglint_cache) and --jobs: same findings with and without them."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from support import BAD, ENV, FIXTURES, cglint

from cglint import cache as caching
from cglint import config, files, quickscan
from cglint.diagnostics import FileResult


# Every rule's fixtures (a finding of each, files without one, a syntax error), a notebook, the
# seed, a package whose modules import each other, realistic modules: what the cache and the pool
# handle. The held-out corpora add nothing they do not (tests/test_one_answer.py lints everything
# with and without the cache and the pool) and cost most of each run.
TREE = ("rules", "notebooks", "seed", "trace_project", "realistic")


@pytest.fixture()
def tree(tmp_path):
    """The fixtures of TREE as a project."""
    for part in TREE:
        shutil.copytree(FIXTURES / part, tmp_path / "fixtures" / part)
    (tmp_path / "pyproject.toml").write_text("[tool.cglint]\nextend-exclude = []\n")
    return tmp_path


def report(tree, *args):
    run = cglint(*args, "fixtures", cwd=tree)
    assert run.returncode == 1, run.stderr
    return run.stdout


@pytest.mark.parametrize("fmt", ["json", "text"])  # one test each: xdist runs them side by side
def test_findings_identical_with_and_without_cache_and_jobs(tree, fmt):
    plain = report(tree, "--no-cache", "--jobs", "1", "--output-format", fmt)
    assert not (tree / ".cglint_cache").exists()
    cold = report(tree, "--output-format", fmt)  # writes the cache
    warm = report(tree, "--output-format", fmt)  # reads it
    pooled = report(tree, "--no-cache", "--jobs", "2", "--output-format", fmt)
    assert plain == cold == warm == pooled, fmt
    if fmt != "json":
        return
    assert {d["code"] for d in json.loads(plain)["diagnostics"]} >= {"CG000", "CG005", "CG013"}
    # The other reports from the same cache (once: they do not depend on `fmt`).
    stats = [report(tree, "--statistics", *extra) for extra in ([], [], ["--no-cache", "-j", "2"])]
    assert stats[0] == stats[1] == stats[2]
    assert [report(tree, "--output-format", fmt) for fmt in ("concise", "github")] == [
        report(tree, "--no-cache", "--output-format", fmt) for fmt in ("concise", "github")]


def test_cache_layout_gitignore_and_entries(tree):
    report(tree)
    root = tree / ".cglint_cache"
    assert (root / ".gitignore").read_text() == "# Automatically created by cglint.\n*\n"
    assert (root / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    entries = list(root.glob("*/*.json"))
    # One entry per file that mentions custom_gradient; the others cost no lookup.
    mentioning = [p for p in (tree / "fixtures").rglob("*.py") if files.may_hold_site(p.read_text())
                  or quickscan.calls_project_site(p.read_text(), str(p))[0]]  # a keyword call of a project site
    notebooks = list((tree / "fixtures").rglob("*.ipynb"))  # one entry each, by the file's text
    assert notebooks and len(entries) == len(mentioning) + len(notebooks)


def test_corrupt_and_foreign_entries_are_ignored_and_rewritten(tree):
    expected = report(tree, "--output-format", "json")
    entries = sorted((tree / ".cglint_cache").glob("*/*.json"))
    good = {p: p.read_bytes() for p in entries}
    entries[0].write_bytes(b"\x00not json")
    entries[1].write_text(entries[1].read_text()[: len(good[entries[1]]) // 2])  # torn
    foreign = json.loads(good[entries[2]])
    foreign["key"] = "another version"
    foreign["diagnostics"] = []
    entries[2].write_text(json.dumps(foreign))
    entries[3].write_text(json.dumps({"unexpected": True}))
    assert report(tree, "--output-format", "json") == expected
    assert {p: p.read_bytes() for p in entries} == good  # rewritten as they were made


def test_edit_and_configuration_change_invalidate(tree):
    target = tree / "fixtures" / "rules" / "cg005_bad.py"
    report(tree)
    target.write_text(target.read_text() + "\n\n# an edit\n")
    before = json.loads(report(tree, "--output-format", "json"))["diagnostics"]
    (tree / "pyproject.toml").write_text('[tool.cglint]\nignore = ["CG005"]\n')
    after = json.loads(report(tree, "--output-format", "json"))["diagnostics"]
    assert any(d["code"] == "CG005" for d in before) and not any(d["code"] == "CG005" for d in after)
    assert json.loads(cglint("--output-format", "json", "--no-cache", "fixtures", cwd=tree).stdout)["diagnostics"] == after


def test_cache_dir_option_and_environment(tree, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("cache")
    report(tree, "--cache-dir", elsewhere / "c")
    assert (elsewhere / "c" / ".gitignore").exists() and not (tree / ".cglint_cache").exists()
    env_dir = tmp_path_factory.mktemp("env")
    run = subprocess.run([sys.executable, "-m", "cglint", "fixtures"], capture_output=True, text=True, cwd=tree,
                         env={**ENV, caching.ENV_VAR: str(env_dir)})
    assert run.returncode == 1
    assert list(env_dir.glob("*/*.json")) and not (tree / ".cglint_cache").exists()


def test_fixes_diff_sarif_and_noqa_never_come_from_the_cache(tmp_path):
    """Plant an entry that says "clean" for a file with two findings: a plain run trusts it
    (the entry is valid), every mode that needs the parse ignores it."""
    path = tmp_path / "ops.py"
    path.write_text(BAD)
    (tmp_path / "pyproject.toml").write_text("[tool.cglint]\n")
    settings = config.load(str(tmp_path))
    store = caching.Cache(caching.directory_for(settings.root), caching.settings_key(settings))
    store.put(str(path), BAD, settings.codes_for(str(path)), FileResult(str(path), BAD, [], parsed=True))
    assert cglint("ops.py", cwd=tmp_path).returncode == 0  # served from the planted entry
    assert cglint("--no-cache", "ops.py", cwd=tmp_path).returncode == 1
    diff = cglint("--diff", "--unsafe-fixes", "ops.py", cwd=tmp_path)
    assert diff.returncode == 1 and "+++ b/ops.py" in diff.stdout
    sarif = json.loads(cglint("--output-format", "sarif", "ops.py", cwd=tmp_path).stdout)
    assert {r["ruleId"] for r in sarif["runs"][0]["results"]} == {"CG004", "CG005"}
    fixed = cglint("--fix", "ops.py", cwd=tmp_path)
    assert "tf.cos(x * w)" in path.read_text() or "cos(z)" in path.read_text(), fixed.stdout


def _age(path, seconds=60):
    """Backdate a file, as a file not touched for a while is (the index skips racy files)."""
    import os
    import time

    past = time.time() - seconds
    os.utime(path, (past, past))


def test_quiet_files_are_stat_not_read_on_a_warm_run(tmp_path):
    """A file that failed the prefilter is remembered by identity (the index), so a warm run
    stats it instead of reading it; any change of content or permissions is a new identity."""
    plain = tmp_path / "plain.py"
    plain.write_text("import tensorflow as tf\n\n\ndef f(x):\n    return x\n")
    _age(plain)
    assert cglint("plain.py", cwd=tmp_path).returncode == 0
    index = list((tmp_path / ".cglint_cache").glob("*/quiet/*.json"))
    assert len(index) == 1
    assert list(json.loads(index[0].read_text())) == [str(plain.resolve())]
    # Edited to hold a bug: a new identity, so it is read and linted again.
    plain.write_text(BAD)
    _age(plain, 30)
    run = cglint("plain.py", cwd=tmp_path)
    assert run.returncode == 1 and "CG005" in run.stdout, run.stdout + run.stderr
    # A chmod changes the change time: an unreadable file is read (and reported) again.
    plain.write_text("x = 1\n")
    _age(plain)
    assert cglint("plain.py", cwd=tmp_path).returncode == 0
    plain.chmod(0)
    try:
        import os

        if os.geteuid() != 0:  # root reads it anyway
            run = cglint("plain.py", cwd=tmp_path)
            assert run.returncode == 2 and "plain.py" in run.stderr, run.stderr
    finally:
        plain.chmod(0o644)


def test_a_just_written_file_is_not_remembered(tmp_path):
    """Within two seconds of its last write a file may change again without its mtime moving:
    it is read again next time."""
    fresh = tmp_path / "fresh.py"
    fresh.write_text("x = 1\n")
    # An mtime ahead of the clock is as recent as it gets: a run slowed by a loaded machine
    # cannot age it past the two seconds.
    ahead = time.time_ns() + 3600 * 10**9
    os.utime(fresh, ns=(ahead, ahead))
    assert cglint("fresh.py", cwd=tmp_path).returncode == 0
    assert not list((tmp_path / ".cglint_cache").glob("*/quiet/*.json"))


def test_a_corrupt_quiet_index_is_ignored_and_rewritten(tmp_path):
    plain = tmp_path / "plain.py"
    plain.write_text("x = 1\n")
    _age(plain)
    assert cglint("plain.py", cwd=tmp_path).returncode == 0
    (index,) = (tmp_path / ".cglint_cache").glob("*/quiet/*.json")
    good = index.read_bytes()
    index.write_bytes(b"\x00{not json")
    assert cglint("plain.py", cwd=tmp_path).returncode == 0
    assert index.read_bytes() == good


def test_text_and_json_runs_share_one_entry_per_file(tree):
    """pre-commit prints text, CI asks for JSON (with fix edits): both read one entry per file
    (the same findings), and alternating them rewrites nothing."""
    report(tree, "--output-format", "json")
    report(tree)
    entries = {p: p.stat().st_mtime_ns for p in (tree / ".cglint_cache").glob("*/*.json")}
    mentioning = [p for p in (tree / "fixtures").rglob("*.py") if files.may_hold_site(p.read_text())
                  or quickscan.calls_project_site(p.read_text(), str(p))[0]]  # a keyword call of a project site
    notebooks = list((tree / "fixtures").rglob("*.ipynb"))  # one entry each, by the file's text
    assert notebooks and len(entries) == len(mentioning) + len(notebooks)
    report(tree, "--output-format", "json")
    report(tree)
    assert {p: p.stat().st_mtime_ns for p in entries} == entries, "a warm run rewrote entries"


def test_a_notebook_is_cached_by_its_text_and_a_hit_needs_neither_nbformat_nor_libcst(tmp_path):
    shutil.copy(FIXTURES / "notebooks" / "seed_op.ipynb", tmp_path / "nb.ipynb")
    outputs = {fmt: cglint("--no-cache", "--output-format", fmt, "nb.ipynb", cwd=tmp_path).stdout
               for fmt in ("json", "concise", "github", "gitlab")}
    assert cglint("--output-format", "json", "nb.ipynb", cwd=tmp_path).stdout == outputs["json"]  # writes the entry
    for fmt, plain in outputs.items():  # every format from the one entry, as without the cache
        assert cglint("--output-format", fmt, "nb.ipynb", cwd=tmp_path).stdout == plain, fmt
    # A warm run in a fresh interpreter: the result comes from the entry, the cells from the JSON.
    probe = ("import sys; from pathlib import Path; from cglint import batch, cache, config; s = config.load(None, None); "
             "c = cache.Cache(Path('.cglint_cache'), cache.settings_key(s)); "
             "r, = batch.lint_paths(['nb.ipynb'], s.codes_for, cache=c); "
             "print(c.hits, sorted({d.code for d in r.diagnostics}), r.notebook.cell(4) is not None, "
             "'nbformat' in sys.modules, 'libcst' in sys.modules)")
    warm = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=ENV, capture_output=True, text=True)
    assert warm.stdout.split() == ["1", "['CG001',", "'CG002',", "'CG004',", "'CG005']", "True", "False", "False"], warm
    # An edit of the notebook is linted again.
    text = (tmp_path / "nb.ipynb").read_text()
    assert text.count('"    @tf.function\\n",') == 1
    (tmp_path / "nb.ipynb").write_text(text.replace('"    @tf.function\\n",', "", 1))
    edited = json.loads(cglint("--output-format", "json", "nb.ipynb", cwd=tmp_path).stdout)["diagnostics"]
    assert {d["code"] for d in edited} == {"CG002", "CG004", "CG005"}
