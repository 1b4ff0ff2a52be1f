"""cglint as a flake8 plugin: flake8 7 in a child process, the plugin found through the
`flake8.extension` entry point (the installed distribution, or this checkout's pyproject
entry point exposed as distribution metadata) or through flake8's local-plugins config."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

BAD = """import tensorflow as tf


@tf.custom_gradient
def op(x):
    y = tf.math.tan(x)

    def grad(dy):
        return dy / tf.square(tf.math.cos(y)){comment}

    return y, grad
"""


def installed_cglint() -> importlib.metadata.Distribution | None:
    try:
        return importlib.metadata.distribution("cglint")
    except importlib.metadata.PackageNotFoundError:
        return None


def is_this_checkout(dist: importlib.metadata.Distribution) -> bool:
    # `pip install -e .` leaves setuptools' cglint.egg-info in the checkout, and the checkout is
    # on sys.path first: that metadata (and its entry points) is this checkout's.
    if Path(str(dist.locate_file(""))).resolve() == ROOT:
        return True
    direct = dist.read_text("direct_url.json")
    if not direct:
        return False
    url = json.loads(direct).get("url", "")
    return url.startswith("file:") and Path(unquote(urlparse(url).path)).resolve() == ROOT


def pyproject_entry_points() -> dict[str, str]:
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["entry-points"]["flake8.extension"]


@pytest.fixture(scope="module")
def entry_point_env(tmp_path_factory) -> dict[str, str]:
    """An environment in which flake8 finds the plugin through the `flake8.extension` entry
    point: the installed distribution when it is this checkout (CI: `pip install -e .`),
    otherwise this checkout's pyproject entry point written out as distribution metadata
    (what pip would install) next to the source on PYTHONPATH."""
    dist = installed_cglint()
    if dist is not None:
        if not is_this_checkout(dist):
            pytest.skip(f"the installed cglint ({dist.locate_file('')}) is not this checkout; its entry points "
                        "would be the ones tested")
        return ENV
    meta = tmp_path_factory.mktemp("dist") / "cglint-0.0.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: cglint\nVersion: 0.0.0\n")
    lines = [f"{name} = {target}" for name, target in pyproject_entry_points().items()]
    (meta / "entry_points.txt").write_text("[flake8.extension]\n" + "\n".join(lines) + "\n")
    return {**ENV, "PYTHONPATH": os.pathsep.join([str(ROOT), str(meta.parent)])}


def flake8(*args: str, env: dict[str, str], stdin: str | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flake8", "--isolated", *args], capture_output=True, text=True,
                          env=env, input=stdin, cwd=cwd)


FLAKE8_LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<code>[A-Z]+\d+) ", re.M)


def flake8_findings(out: str) -> set[tuple[str, int, str]]:
    return {(m["path"], int(m["line"]), m["code"]) for m in FLAKE8_LINE.finditer(out)}


def cglint_findings(*paths: str) -> set[tuple[str, int, str]]:
    """(path, line, code) from `cglint --output-format concise`: `path:line:col: CODE message`."""
    run = subprocess.run([sys.executable, "-m", "cglint", "--output-format", "concise", *paths],
                         capture_output=True, text=True, env=ENV, cwd=ROOT)
    assert run.returncode in (0, 1), run.stderr
    # flake8 reads Python files only; cglint's notebook findings (`nb.ipynb:cell 4:3:5`) are its own.
    return {f for f in flake8_findings(run.stdout) if ".ipynb:" not in f[0]}


def test_entry_point_registers_the_cg_plugin(entry_point_env):
    version = flake8("--version", env=entry_point_env)
    assert re.search(r"\bcglint: \d", version.stdout), version.stdout
    run = flake8("--select", "CG", "fixtures/seed/original.py", env=entry_point_env)
    assert run.returncode == 1, run.stderr
    assert {code for _, _, code in flake8_findings(run.stdout)} == {"CG001", "CG002", "CG004", "CG005"}


def test_flake8_and_cglint_list_the_same_findings_on_the_fixtures(entry_point_env):
    # flake8 chooses its files: the repository's `extend-exclude` for cglint (the held-out
    # corpora) is given to it as its own.
    run = flake8("--select", "CG,E999", "--extend-exclude", "fixtures/heldout,fixtures/heldout2", "fixtures/",
                 env=entry_point_env)
    assert run.returncode == 1, run.stderr
    from_flake8 = flake8_findings(run.stdout)
    from_cglint = cglint_findings("fixtures/")
    assert {c for _, _, c in from_cglint} >= {"CG000", "CG001", "CG002", "CG003", "CG004", "CG005"}
    # A file Python cannot parse is flake8's own E999 (flake8 runs no plugin on it), where
    # cglint says CG000; the two parsers may point at different lines of the error.
    assert {p for p, _, c in from_flake8 if c == "E999"} == {p for p, _, c in from_cglint if c == "CG000"}
    assert {f for f in from_flake8 if f[2] != "E999"} == {f for f in from_cglint if f[2] != "CG000"}


def test_local_plugin_configuration(tmp_path):
    dist = installed_cglint()
    if dist is not None and "flake8.extension" in {ep.group for ep in dist.entry_points}:
        pytest.skip("an installed cglint registers CG through its entry point already; a local-plugins entry "
                    "would run the plugin twice")
    config = tmp_path / ".flake8"
    config.write_text(f"[flake8:local-plugins]\nextension =\n    CG = cglint.flake8_plugin:Plugin\npaths = {ROOT}\n")
    run = subprocess.run([sys.executable, "-m", "flake8", "--config", str(config), "--select", "CG",
                          "fixtures/seed/"], capture_output=True, text=True, cwd=ROOT,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert run.returncode == 1, run.stderr
    assert flake8_findings(run.stdout) == cglint_findings("fixtures/seed/")


def test_noqa_spellings_mean_the_same_to_flake8_and_the_cli(entry_point_env, tmp_path):
    (tmp_path / "plain.py").write_text(BAD.format(comment=""))
    (tmp_path / "other_code.py").write_text(BAD.format(comment="  # noqa: E501"))
    (tmp_path / "suppressed.py").write_text(BAD.format(comment="  # noqa: CG005"))
    (tmp_path / "bare.py").write_text(BAD.format(comment="  # noqa"))
    # flake8 alone compares codes case-sensitively; the plugin reads these as the CLI does.
    (tmp_path / "upper.py").write_text(BAD.format(comment="  # NOQA: cg005"))
    (tmp_path / "spaced.py").write_text(BAD.format(comment="  #noqa:CG001,cg005"))
    run = flake8("--select", "CG", ".", env=entry_point_env, cwd=tmp_path)
    found = {(Path(p).name, line, code) for p, line, code in flake8_findings(run.stdout)}
    assert found == {("plain.py", 9, "CG005"), ("other_code.py", 9, "CG005")}
    assert {(Path(p).name, line, code) for p, line, code in cglint_findings(str(tmp_path))} == found
    # With flake8's noqa off, every finding shows: the plugin leaves line comments alone too.
    run = flake8("--select", "CG", "--disable-noqa", ".", env=entry_point_env, cwd=tmp_path)
    assert {Path(p).name for p, _, _ in flake8_findings(run.stdout)} == {
        "plain.py", "other_code.py", "suppressed.py", "bare.py", "upper.py", "spaced.py"}


def test_file_level_cglint_noqa_is_applied_by_the_plugin(entry_point_env, tmp_path):
    (tmp_path / "all.py").write_text("# cglint: noqa\n" + BAD.format(comment=""))
    (tmp_path / "cg005.py").write_text("# cglint: noqa: CG005\n" + BAD.format(comment=""))
    (tmp_path / "cg001.py").write_text("# cglint: noqa: CG001\n" + BAD.format(comment=""))
    run = flake8("--select", "CG", ".", env=entry_point_env, cwd=tmp_path)
    assert {(Path(p).name, code) for p, _, code in flake8_findings(run.stdout)} == {("cg001.py", "CG005")}
    assert flake8_findings(run.stdout) == {(f"./{p}", line, code) for p, line, code in cglint_findings_in(tmp_path)}


def cglint_findings_in(directory: Path) -> set[tuple[str, int, str]]:
    run = subprocess.run([sys.executable, "-m", "cglint", "--output-format", "json", "."], capture_output=True,
                         text=True, env=ENV, cwd=directory)
    return {(d["path"], d["line"], d["code"]) for d in json.loads(run.stdout)["diagnostics"]}


def test_the_plugin_lints_the_lines_flake8_read(entry_point_env):
    """stdin (an editor buffer) with the display name of a file on disk: the findings are the
    buffer's, so the plugin does not read the file again."""
    buffer = BAD.format(comment="")
    run = flake8("--select", "CG", "--stdin-display-name", "fixtures/seed/correct.py", "-", env=entry_point_env,
                 stdin=buffer)
    assert flake8_findings(run.stdout) == {("fixtures/seed/correct.py", 9, "CG005")}
    col = int(FLAKE8_LINE.search(run.stdout)["col"])
    assert col == buffer.splitlines()[8].index("tf.math.cos") + 1  # flake8's 1-based column, as cglint's


def _messages(out: str) -> dict[tuple[str, int, int, str], str]:
    """(path, line, column, code) -> message, from flake8 or concise lines (`[*]` dropped)."""
    found = {}
    for m in re.finditer(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<code>CG\d+) (\[\*\] )?(?P<message>.*)$", out,
                         re.M):
        found[(m["path"].removeprefix("./"), int(m["line"]), int(m["col"]), m["code"])] = m["message"]
    return found


def test_flake8_and_concise_messages_are_one_short_line(entry_point_env):
    """ruff's habit: one line per finding, the title only (what TensorFlow does and what to do
    are in the text format's details, `help:` and `--explain`); over the fixtures the median
    message is at most 100 characters, and flake8 says what concise says."""
    from statistics import median

    run = flake8("--select", "CG", "--extend-exclude", "fixtures/heldout,fixtures/heldout2", "fixtures/",
                 env=entry_point_env)
    from_flake8 = _messages(run.stdout)
    concise = subprocess.run([sys.executable, "-m", "cglint", "--no-cache", "--output-format", "concise", "fixtures/"],
                             capture_output=True, text=True, env={**ENV, "NO_COLOR": "1"}, cwd=ROOT)
    from_concise = _messages(concise.stdout)
    assert len(from_flake8) > 30 and len(from_concise) > 30
    for name, messages in (("flake8", from_flake8), ("concise", from_concise)):
        lengths = [len(m) for m in messages.values()]
        assert median(lengths) <= 100, (name, sorted(lengths))
    # Every line of flake8's output is a finding (no continuation lines), worded as concise words it.
    assert len(run.stdout.splitlines()) == len(from_flake8)
    shared = {k: m for k, m in from_flake8.items() if k in from_concise}
    assert len(shared) > 30
    for key, message in shared.items():
        assert from_concise[key] == message, key
