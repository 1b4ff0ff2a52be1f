"""Every install and CI recipe of the README and docs/, run as written with real pip against a
local clone of this repository (no network for cglint itself: pip's own configuration serves its
dependencies). As docs/ci.md says, `https://example.invalid/cglint.git` (this repository's URL)
is replaced by the clone's `file://localhost/...` URL and `/path/to/cglint` (a checkout) by the clone's path;
nothing else in a recipe is changed. The pre-commit recipe is run by tests/test_pre_commit.py.

The clone holds the checkout's commits, not its uncommitted changes: commit before running this.
The error messages that print a pip line are those of the checkout (the pinned commit may be
older), run with the clone's code and the recipes' environment."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
URL = "https://example.invalid/cglint.git"
CHECKOUT = "/path/to/cglint"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BAD = '''import tensorflow as tf


@tf.custom_gradient
def op(x):
    y = tf.math.tan(x)

    def grad(dy):
        return dy / tf.square(tf.math.cos(y))

    return y, grad
'''


def _blocks(page: Path, *languages: str) -> list[str]:
    return [body for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", page.read_text(), re.S | re.M)
            if lang in languages]


def _install_lines() -> list[tuple[str, str]]:
    """(page, line) for every `pip install` of cglint in a shell block: from the git URL or a checkout."""
    found = []
    for page in PAGES:
        for body in _blocks(page, "sh", "bash", ""):
            for line in body.splitlines():
                command = re.split(r"\s+#\s", line.strip(), maxsplit=1)[0]
                if command.startswith("pip install") and (URL in command or CHECKOUT in command):
                    found.append((page.name, command))
    return found


def _ci_recipe(heading: str) -> dict:
    import yaml

    text = (ROOT / "docs" / "ci.md").read_text()
    section = text[text.index(f"## {heading}\n"):]
    return yaml.safe_load(re.search(r"```yaml\n(.*?)^```", section, re.S | re.M).group(1))


def _git(*args, cwd=ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> dict:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    base = tmp_path_factory.mktemp("clone")
    bare, checkout = base / "cglint.git", base / "cglint"
    _git("clone", "-q", "--bare", "--no-local", str(ROOT), str(bare), cwd=base)
    _git("clone", "-q", str(bare), str(checkout), cwd=base)
    return {"bare": bare, "checkout": checkout}


def _as_run_here(command: str, clone: dict) -> str:
    """The recipe's command with the two documented substitutions, nothing else. (`localhost`: the
    pip of Python 3.11's venv, 23.2, refuses a `git+file:///path` URL without a host.)"""
    return command.replace(URL, f"file://localhost{clone['bare']}").replace(CHECKOUT, str(clone["checkout"]))


def _venv(path: Path) -> dict:
    """A new virtual environment and the environment variables of a shell that activated it."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PATH=f"{path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", VIRTUAL_ENV=str(path),
               NO_COLOR="1", TF_CPP_MIN_LOG_LEVEL="3")
    return env


def _bash(command: str, cwd: Path, env: dict, timeout: int = 1200) -> subprocess.CompletedProcess:
    """`command` as GitHub's runner and a login shell run it: bash, stopping at the first error."""
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", command], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _project(path: Path) -> Path:
    path.mkdir()
    _git("init", "-q", cwd=path)
    (path / "ops.py").write_text(BAD)
    return path


def test_every_recipe_pins_one_commit_of_this_repository():
    pinned = set()
    for page in [*PAGES, ROOT / "docs" / "ci.md"]:
        pinned |= set(re.findall(re.escape(URL) + r"@([0-9a-f]+)", page.read_text()))
    pinned.add(str(_ci_recipe("pre-commit")["repos"][0]["rev"]))
    assert len(pinned) == 1, f"the recipes pin different commits: {pinned}"
    sha = pinned.pop()
    assert re.fullmatch(r"[0-9a-f]{40}", sha), sha
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    _git("merge-base", "--is-ancestor", sha, "HEAD")  # a commit of this repository's history (raises if not)


def test_the_install_lines_and_the_error_messages_pip_lines_run_as_written(clone, tmp_path):
    lines = _install_lines()
    pages = {page for page, _ in lines}
    assert {"README.md", "ci.md", "editor.md"} <= pages, pages
    assert any("[lsp]" in c for _, c in lines) and any("[runtime-cpu]" in c for _, c in lines)
    assert any(CHECKOUT in c for _, c in lines)
    env = _venv(tmp_path / "venv")
    project = _project(tmp_path / "project")
    python = str(tmp_path / "venv" / "bin" / "python")

    def run_line(command):
        run = _bash(_as_run_here(command, clone), project, env)
        assert run.returncode == 0, f"{command}\n{run.stdout}\n{run.stderr}"

    # The plain install, then cglint lints the project.
    plain = [c for _, c in lines if c.startswith("pip install 'cglint @")]
    assert plain
    for command in plain:
        run_line(command)
    lint = _bash("cglint ops.py", project, env)
    assert lint.returncode == 1 and "ops.py:9:" in lint.stdout and "CG005" in lint.stdout, lint.stdout + lint.stderr

    # This checkout's messages for a missing extra: each ends with a pip line, which is run as
    # printed, and the command then gets past the message.
    here = {**env, "PYTHONPATH": str(clone["checkout"])}
    missing = subprocess.run([python, "-m", "cglint", "lsp"], cwd=project, env=here, capture_output=True,
                             text=True, stdin=subprocess.DEVNULL, timeout=300)
    assert missing.returncode == 2, missing.stderr
    pip_line = re.search(r"Install it into this environment: (.+ -m pip install .+)$", missing.stderr.strip()).group(1)
    run = _bash(pip_line, project, env)
    assert run.returncode == 0, run.stdout + run.stderr
    server = subprocess.run([python, "-m", "cglint", "lsp"], cwd=project, env=here, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=300)
    assert "needs pygls" not in server.stderr, server.stderr

    missing = subprocess.run([python, "-m", "cglint", "--runtime", "ops.py"], cwd=project, env=here,
                             capture_output=True, text=True, timeout=300)
    assert missing.returncode == 2, missing.stderr
    pip_line = re.search(r"the CPU wheel: (.+ -m pip install .+)$", missing.stderr.strip()).group(1)
    run = _bash(pip_line, project, env)
    assert run.returncode == 0, run.stdout + run.stderr
    checked = subprocess.run([python, "-m", "cglint", "--runtime", "--output-format", "json", "--output-file",
                              "report.json", "ops.py"], cwd=project, env=here, capture_output=True, text=True,
                             timeout=900)
    report = json.loads((project / "report.json").read_text())
    assert checked.returncode == 1 and [r["verdict"] for r in report["runtime"]] == ["mismatch"], checked.stderr[-2000:]

    # The remaining lines, each run as written: the extras, then the editable checkout (last: a
    # git line after it would replace it).
    for command in sorted((c for _, c in lines if c not in plain), key=lambda c: CHECKOUT in c):
        run_line(command)
    where = subprocess.run([python, "-c", "import cglint, pygls, tensorflow; print(cglint.__file__)"], env=env,
                           capture_output=True, text=True, cwd=tmp_path)
    assert where.returncode == 0 and where.stdout.startswith(str(clone["checkout"])), where.stdout + where.stderr


def test_the_readme_demo_runs_as_written_in_a_clone(clone):
    """Command 1 of the README, in a fresh clone's root, exactly as written."""
    readme = (ROOT / "README.md").read_text()
    command = next(line for body in _blocks(ROOT / "README.md", "sh") for line in body.splitlines()
                   if line.startswith("python3 -m venv") and "cglint fixtures/" in line)
    quoted = re.search(r"ends with\n\n```\n(Found .*?)\n```", readme, re.S).group(1)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    run = _bash(command, clone["checkout"], {**env, "NO_COLOR": "1"})
    assert run.returncode == 1, run.stderr[-2000:]
    assert run.stdout.rstrip("\n").endswith(quoted), run.stdout[-400:]


def _github_job(job: dict, project: Path, venv: Path, clone: dict) -> list[tuple[str, int | None]]:
    """Run a GitHub Actions job's steps as the runner does: `run:` with bash -eo pipefail; a step
    without `if:` only while every step so far passed, `if: always()` in any case. The `uses:`
    steps the recipe needs are stood in for: checkout is the project directory, setup-python a
    new virtual environment on PATH, upload-sarif a check that its file is there."""
    env, failed, ran = None, False, []
    for step in job["steps"]:
        condition = str(step.get("if", "success()")).strip()
        assert condition in ("success()", "always()"), f"the test cannot run `if: {condition}`"
        name = step.get("run") or step["uses"]
        if failed and condition != "always()":
            ran.append((name, None))
            continue
        if "run" in step:
            assert env is not None, "a run step before setup-python"
            result = _bash(_as_run_here(step["run"], clone), project, env)
            ran.append((name, result.returncode))
            ran[-1] += (result,)
            failed |= result.returncode != 0
            continue
        action = step["uses"].split("@")[0]
        if action == "actions/checkout":
            ran.append((name, 0))
        elif action == "actions/setup-python":
            env = _venv(venv)
            ran.append((name, 0))
        elif action == "github/codeql-action/upload-sarif":
            sarif = project / step["with"]["sarif_file"]
            ran.append((name, 0 if sarif.is_file() else 1))
            failed |= not sarif.is_file()
        else:
            pytest.fail(f"the test has no stand-in for `uses: {step['uses']}`")
    return ran


def test_the_github_actions_recipe_uploads_sarif_even_when_findings_fail_the_job(clone, tmp_path):
    import jsonschema

    workflow = _ci_recipe("GitHub Actions")
    (job,) = workflow["jobs"].values()
    assert workflow["jobs"]["cglint"]["permissions"]["security-events"] == "write"
    project = _project(tmp_path / "project")
    ran = _github_job(job, project, tmp_path / "venv", clone)
    steps = {name: rest for name, *rest in ran}
    install = next(n for n in steps if str(n).startswith("pip install"))
    annotate = next(n for n in steps if "--output-format github" in str(n))
    sarif_step = next(n for n in steps if "--output-format sarif" in str(n))
    upload = next(n for n in steps if str(n).startswith("github/codeql-action/upload-sarif"))
    assert steps[install][0] == 0, steps[install][1].stderr
    assert steps[annotate][0] == 1  # the findings fail the job ...
    assert "::error file=ops.py,line=9," in steps[annotate][1].stdout and "CG005" in steps[annotate][1].stdout
    assert steps[sarif_step][0] == 0  # ... and the SARIF is written and uploaded all the same
    assert steps[upload][0] == 0
    sarif = json.loads((project / "cglint.sarif").read_text())
    schema = json.loads((ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
    jsonschema.validate(sarif, schema, cls=jsonschema.Draft4Validator)
    results = sarif["runs"][0]["results"]
    assert [(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in results] == [("CG005", 9)]

    # The GitLab recipe's script, in the same kind of environment (a new one: its image).
    job = _ci_recipe("GitLab CI")["cglint"]
    project = _project(tmp_path / "gitlab")
    env = _venv(tmp_path / "gitlab-venv")
    for line in job["script"]:
        run = _bash(_as_run_here(line, clone), project, env)
        assert run.returncode == 0, f"{line}\n{run.stdout}\n{run.stderr}"
    report_name = job["artifacts"]["reports"]["codequality"]
    issues = json.loads((project / report_name).read_text())
    schema = json.loads((ROOT / "tests" / "data" / "gitlab-codeclimate.json").read_text())
    for issue in issues:
        jsonschema.validate(issue, schema)
    assert [(i["check_name"], i["location"]["path"], i["location"]["lines"]["begin"]) for i in issues] == [
        ("CG005", "ops.py", 9)]
