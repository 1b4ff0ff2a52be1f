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
