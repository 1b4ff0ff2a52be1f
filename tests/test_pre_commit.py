"""The hooks in .pre-commit-hooks.yaml, run by the real pre-commit against this checkout.

pre-commit clones the hook repository at `rev`, so this tests the checkout's HEAD commit:
commit before running it. Creating the hook environment installs cglint and libcst from PyPI
(network needed); both hooks share that one environment."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

BAD = '''import tensorflow as tf


@tf.custom_gradient
def op(x):
    y = tf.math.tan(x)

    def grad(dy):
        return dy / tf.square(tf.math.cos(y))

    return y, grad
'''


def _notebook() -> str:
    """BAD as a Jupyter notebook: the import in one cell, the op in the next (after a magic)."""
    import nbformat

    head, op = BAD.split("\n\n\n", 1)
    nb = nbformat.v4.new_notebook(metadata={"language_info": {"name": "python"}})
    nb.cells = [nbformat.v4.new_code_cell(head, id="imports"), nbformat.v4.new_markdown_cell("The op:", id="md"),
                nbformat.v4.new_code_cell("%load_ext autoreload\n" + op.rstrip("\n"), id="op")]
    return nbformat.writes(nb) + "\n"


def _git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def head():
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    try:
        return _git("rev-parse", "HEAD", cwd=ROOT)
    except subprocess.CalledProcessError:
        pytest.skip("the checkout is not a git repository")


def test_pre_commit_hooks_fail_then_fix(tmp_path, head):
    repo = tmp_path / "project"
    repo.mkdir()
    _git("init", "-q", cwd=repo)
    (repo / "ops.py").write_text(BAD)
    (repo / "notebooks").mkdir()
    (repo / "notebooks" / "op.ipynb").write_text(_notebook())  # pre-commit's `jupyter` type
    # Excluded in the configuration: pre-commit names it, --force-exclude must skip it.
    (repo / "generated").mkdir()
    (repo / "generated" / "ops_gen.py").write_text(BAD)
    (repo / "pyproject.toml").write_text('[tool.cglint]\nextend-exclude = ["generated/"]\n')
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {ROOT}\n  rev: {head}\n  hooks:\n  - id: cglint\n  - id: cglint-fix\n"
    )
    _git("add", "-A", cwd=repo)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "PRE_COMMIT_COLOR": "never"}
    env.pop("PYTHONPATH", None)

    def pre_commit(*args):
        return subprocess.run([sys.executable, "-m", "pre_commit", "run", *args, "--all-files"], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=900)

    check = pre_commit("cglint")
    assert check.returncode == 1, check.stdout + check.stderr
    assert "ops.py:9:" in check.stdout and "CG005" in check.stdout
    assert "generated/" not in check.stdout
    # The op is cell 3; its `cos(y)` is on line 7 of the cell (the magic is line 1).
    assert "notebooks/op.ipynb:cell 3:7:" in check.stdout, check.stdout
    assert (repo / "ops.py").read_text() == BAD
    assert (repo / "notebooks" / "op.ipynb").read_text() == _notebook()

    fix = pre_commit("cglint-fix")
    assert fix.returncode == 1, fix.stdout + fix.stderr  # pre-commit fails a hook that modifies files
    assert "files were modified by this hook" in fix.stdout
    fixed = (repo / "ops.py").read_text()
    assert "tf.math.cos(x)" in fixed and "tf.math.cos(y)" not in fixed
    assert (repo / "generated" / "ops_gen.py").read_text() == BAD
    fixed_nb = (repo / "notebooks" / "op.ipynb").read_text()
    assert "tf.math.cos(x)" in fixed_nb and "%load_ext autoreload" in fixed_nb

    again = pre_commit()
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("Passed") == 2


CI_DOC = (ROOT / "docs" / "ci.md").read_text()
PLACEHOLDER = "https://example.invalid/cglint.git"  # the docs' stand-in for this repository's URL


def _doc_snippet() -> str:
    """The `.pre-commit-config.yaml` the "pre-commit" section of docs/ci.md shows, as written."""
    import re

    found = re.search(r"^## pre-commit\n\n```yaml\n(.*?)^```", CI_DOC, re.S | re.M)
    assert found, "docs/ci.md has no pre-commit snippet"
    return found.group(1)


def test_the_documented_recipe_as_written_fails_a_bad_commit_the_fix_hook_repairs_it_and_autoupdate_moves_it(
        tmp_path, head):
    """docs/ci.md's recipe, with the clone's `file://` URL for the repository's (as that page
    says), and nothing else changed: it pins a commit (there are no release tags), which
    pre-commit installs; `pre-commit autoupdate --bleeding-edge --freeze` moves it to the newest."""
    import re

    snippet = _doc_snippet()
    rev = re.search(r"^\s*rev:\s*(\S+)", snippet, re.M).group(1)
    assert re.fullmatch(r"[0-9a-f]{40}", rev), "the recipe pins a commit"
    hooks_repo = tmp_path / "cglint.git"
    _git("clone", "-q", "--bare", "--no-local", str(ROOT), str(hooks_repo), cwd=tmp_path)
    assert snippet.count(PLACEHOLDER) == 1
    config = snippet.replace(PLACEHOLDER, f"file://{hooks_repo}")

    project = tmp_path / "project"
    project.mkdir()
    _git("init", "-q", cwd=project)
    (project / ".pre-commit-config.yaml").write_text(config)
    (project / "ops.py").write_text(BAD)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "PRE_COMMIT_COLOR": "never",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    env.pop("PYTHONPATH", None)

    def sh(*args):  # (git commit shows its hooks' output on stderr)
        run = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=900)
        return run.returncode, run.stdout + run.stderr

    assert sh(sys.executable, "-m", "pre_commit", "install")[0] == 0
    sh("git", "add", "-A")
    status, out = sh("git", "commit", "-m", "ops")
    assert status != 0, out  # the check hook fails the commit
    assert "ops.py:9:" in out and "CG005" in out, out
    assert (project / "ops.py").read_text() == BAD

    # The recipe's alternative: the fix hook instead of the check.
    fix_line = re.search(r"^(\s*)# (- id: cglint-fix)", config, re.M)
    assert fix_line, "the recipe offers the cglint-fix hook"
    config = re.sub(r"^\s*- id: cglint\b(?!-).*\n", "", config, flags=re.M)
    config = config.replace(fix_line.group(0), fix_line.group(1) + fix_line.group(2))
    (project / ".pre-commit-config.yaml").write_text(config)
    sh("git", "add", "-A")
    status, out = sh("git", "commit", "-m", "ops")
    assert status != 0 and "files were modified by this hook" in out, out
    fixed = (project / "ops.py").read_text()
    assert "tf.math.cos(x)" in fixed and "tf.math.cos(y)" not in fixed
    sh("git", "add", "-A")
    status, out = sh("git", "commit", "-m", "ops")
    assert status == 0 and "Passed" in out, out
    assert sh("git", "log", "--oneline")[1].count("\n") == 1

    # The documented way to move the pin: to the newest commit of the default branch.
    status, out = sh(sys.executable, "-m", "pre_commit", "autoupdate", "--bleeding-edge", "--freeze")
    assert status == 0, out
    newest = _git("rev-parse", "HEAD", cwd=hooks_repo)
    moved = (project / ".pre-commit-config.yaml").read_text()
    assert re.search(rf"^\s*rev:\s*{newest}\b", moved, re.M), (newest == rev, moved)
