"""One answer everywhere: every way of asking cglint about a file gives the same findings.

The corpus is everything the repository holds (the fixtures, Python files and notebooks; every
rule's VALID and INVALID examples; mutations of them from the fuzz harness) and, when its
download cache exists, the ecosystem check's projects. The entry points: the text, concise,
JSON and SARIF reports; the cache cold and warm; `--jobs 1` and `--jobs 2`; the whole tree and
each file alone; each file on stdin with `--stdin-filename`; flake8 with the plugin; the
language server's analysis, fresh and after an edit. Each must give exactly the findings
`engine.lint_file` gives (position, code, message; end positions where the format has them).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cglint import engine, files
from cglint.diagnostics import split_message
from cglint.rules import ALL_RULES
from tests.fuzz import harness
from tests.inprocess import cglint

ROOT = Path(__file__).resolve().parents[1]
FUZZ_INPUTS = 40
Key = tuple  # (cell, line, column, end_line, end_column, code, message)


ECOSYSTEM_SAMPLE = 30  # files of the ecosystem corpus in the default suite; CGLINT_ONE_ANSWER_FULL=1: all ~200


def _ecosystem_sources() -> list[Path]:
    """The ecosystem check's unpacked projects (scripts/ecosystem_check.py), when downloaded: an
    even sample of the files that mention custom_gradient (every entry point lints each file, so
    all of them take minutes; `CGLINT_ONE_ANSWER_FULL=1 pytest tests/test_one_answer.py` runs
    them all). Only where CGLINT_ECOSYSTEM_CACHE names it: a test never reads the user's home."""
    named = os.environ.get("CGLINT_ECOSYSTEM_CACHE")
    cache = Path(named) / "src" if named else None
    if cache is None or not cache.is_dir():
        return []
    found = [p for p in sorted(cache.rglob("*.py")) if "custom_gradient" in p.read_text(errors="replace")]
    if os.environ.get("CGLINT_ONE_ANSWER_FULL") or len(found) <= ECOSYSTEM_SAMPLE:
        return found
    step = len(found) / ECOSYSTEM_SAMPLE
    return [found[int(i * step)] for i in range(ECOSYSTEM_SAMPLE)]


def build_corpus(root: Path) -> Path:
    corpus = root / "corpus"
    shutil.copytree(ROOT / "fixtures", corpus / "fixtures", ignore=shutil.ignore_patterns("*.md", "__pycache__"))
    examples = corpus / "examples"
    examples.mkdir()
    for rule in ALL_RULES:
        for kind in ("INVALID", "VALID"):
            for i, source in enumerate(getattr(rule, kind)):
                (examples / f"{rule.code.lower()}_{kind.lower()}_{i}.py").write_text(source)
    fuzz = corpus / "fuzz"
    fuzz.mkdir()
    seeds = harness.seeds()
    for i in range(FUZZ_INPUTS):
        r = random.Random(i)
        mutated, _ = harness.mutate(r.choice(seeds), r, count=1)
        (fuzz / f"mutant_{i}.py").write_bytes(mutated[:20_000].encode("utf-8", "surrogatepass"))
    for i, path in enumerate(_ecosystem_sources()):
        target = corpus / "ecosystem" / f"{i}_{path.name}"
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(path, target)
    (corpus / "scope_vars.py").write_text(SCOPE_VARS)
    (corpus / "multiline.py").write_text(MULTILINE)
    (root / "pyproject.toml").write_text("[tool.cglint]\nextend-exclude = []\n")
    return corpus


def _message(text: str) -> str:
    return " ".join(text.split())  # concise output puts a message on one line


def _key(d) -> Key:
    return (d.cell, d.line, d.column, d.end_line, d.end_column, d.code, _message(d.message))


def _paths(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in (root / "corpus").rglob("*") if p.suffix in (".py", ".ipynb"))


# ---- the entry points: each returns {path: sorted findings} --------------------------------

def reference(root: Path) -> dict[str, list[Key]]:
    from cglint import config

    settings = config.load(str(root))
    out = {}
    here = os.getcwd()
    os.chdir(root)
    try:
        for path in _paths(root):
            out[path] = sorted(_key(d) for d in engine.lint_file(path, settings.codes_for(path)).diagnostics)
    finally:
        os.chdir(here)
    return out


def _run(root: Path, *args) -> subprocess.CompletedProcess:
    run = cglint(*args, cwd=root)
    assert run.returncode in (0, 1), run.stderr[-2000:]
    return run


def _from_json(text: str) -> dict[str, list[Key]]:
    out: dict[str, list[Key]] = {}
    for d in json.loads(text)["diagnostics"]:
        out.setdefault(d["path"], []).append((d.get("cell"), d["line"], d["column"], d["end_line"], d["end_column"],
                                              d["code"], _message(d["message"])))
    return {p: sorted(v) for p, v in out.items()}


LOCATED = re.compile(r"^(?P<path>[^\s:]+):(?:cell (?P<cell>\d+):)?(?P<line>\d+):(?P<col>\d+): "
                     r"(?P<code>CG\d{3})(?: \[\*\])? (?P<message>.*)$", re.M)


def _from_lines(text: str) -> dict[str, list[Key]]:
    out: dict[str, list[Key]] = {}
    for m in LOCATED.finditer(text):
        cell = int(m["cell"]) if m["cell"] else None
        out.setdefault(m["path"], []).append((cell, int(m["line"]), int(m["col"]), None, None, m["code"],
                                              _message(m["message"])))
    return {p: sorted(v) for p, v in out.items()}


def _from_sarif(text: str) -> dict[str, list[Key]]:
    out: dict[str, list[Key]] = {}
    for result in json.loads(text)["runs"][0]["results"]:
        where = result["locations"][0]["physicalLocation"]
        region = where.get("region", {})
        cell = region.get("properties", result.get("properties", {}).get("cell", {}))
        if "cell" in cell:  # a notebook: the region is on the file's lines, the cell's position in properties
            region = {"startLine": cell["cellLine"], "startColumn": cell["cellColumn"], "endLine": cell["cellEndLine"],
                      "endColumn": cell["cellEndColumn"]}
        out.setdefault(where["artifactLocation"]["uri"], []).append((
            cell.get("cell"), region["startLine"], region["startColumn"], region["endLine"],
            region["endColumn"], result["ruleId"], _message(result["message"]["text"])))
    return {p: sorted(v) for p, v in out.items()}


def cli_text(root):
    return _from_lines(_run(root, "--no-cache", "corpus").stdout)


def cli_concise(root):
    return _from_lines(_run(root, "--no-cache", "--output-format", "concise", "corpus").stdout)


def cli_json(root):
    return _from_json(_run(root, "--no-cache", "--output-format", "json", "corpus").stdout)


def cli_sarif(root):
    return _from_sarif(_run(root, "--no-cache", "--output-format", "sarif", "corpus").stdout)


def cli_json_jobs_2(root):
    return _from_json(_run(root, "--no-cache", "--jobs", "2", "--output-format", "json", "corpus").stdout)


def cli_json_jobs_1(root):
    return _from_json(_run(root, "--no-cache", "--jobs", "1", "--output-format", "json", "corpus").stdout)


def cli_cache_cold_text(root):
    shutil.rmtree(root / "cache", ignore_errors=True)
    return _from_lines(_run(root, "--cache-dir", "cache", "corpus").stdout)


def _warm(root, name: str) -> str:
    """A cache of its own, filled by a text run: each warm entry point runs alone (xdist)."""
    shutil.rmtree(root / name, ignore_errors=True)
    _run(root, "--cache-dir", name, "corpus")
    return name


def cli_cache_warm_json(root):
    """After a text run filled the cache: JSON from the same entries."""
    return _from_json(_run(root, "--cache-dir", _warm(root, "cache-json"), "--output-format", "json", "corpus").stdout)


def cli_cache_warm_text(root):
    return _from_lines(_run(root, "--cache-dir", _warm(root, "cache-text"), "corpus").stdout)


def cli_each_file(root):
    out = {}
    for path in _paths(root):
        out.update(_from_json(_run(root, "--no-cache", "--output-format", "json", path).stdout))
    return out


def cli_stdin(root):
    from cglint import cli

    out = {}
    here = os.getcwd()
    os.chdir(root)
    try:
        for path in _paths(root):
            stdin = io.TextIOWrapper(io.BytesIO((root / path).read_bytes()))
            stdout, stderr = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                saved, sys.stdin = sys.stdin, stdin
                try:
                    code = cli.main(["-", "--stdin-filename", path, "--output-format", "json"])
                finally:
                    sys.stdin = saved
            assert code in (0, 1), stderr.getvalue()[-2000:]
            out.update(_from_json(stdout.getvalue()))
    finally:
        os.chdir(here)
    return out


def flake8_plugin(root):
    """flake8 itself, with the plugin found through the installed entry point. flake8 reads
    Python files only, and reports a file Python cannot parse as its own E999 (no plugin runs):
    that is compared as CG000, by code."""
    run = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select", "CG,E9", "--jobs", "1",
                          "--format", "%(path)s:%(row)d:%(col)d: %(code)s %(text)s", "corpus"],
                         capture_output=True, text=True, cwd=root)
    assert run.returncode in (0, 1), run.stderr[-2000:]
    out: dict[str, list[Key]] = {}
    for line in run.stdout.splitlines():
        m = re.match(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<code>[A-Z]+\d+) (?P<message>.*)$", line)
        if m is None:
            continue
        code, text = m["code"], m["message"].removeprefix(m["code"] + " ")
        if code.startswith("E9"):
            out.setdefault(m["path"], []).append((None, None, None, None, None, "CG000", None))
            continue
        out.setdefault(m["path"], []).append((None, int(m["line"]), int(m["col"]), None, None, code, _message(text)))
    return {p: sorted(v, key=repr) for p, v in out.items()}


def language_server(root):
    """The server's incremental analysis of each Python file: fresh, then after an edit (the
    file's text without its last line, then the whole text again)."""
    from cglint import config
    from cglint.lsp.incremental import Analysis
    from cglint.rules import rules as rule_classes

    settings = config.load(str(root))
    analysis = Analysis()
    out = {}
    for path in _paths(root):
        if not path.endswith(".py"):
            continue
        try:
            text = files.read_source(str(root / path))
        except files.UndecodableError:
            continue  # the server gets text from the editor, never undecodable bytes
        rules = rule_classes(settings.codes_for(path))
        # An editor sends absolute paths: the imports a finding follows (a grad fn in another
        # module of the package) are read relative to the file, not to this process's directory.
        where = str(root / path)
        fresh = analysis.lint(text, where, rules).result
        before = analysis.lint(text.rsplit("\n", 2)[0], where, rules)
        edited = analysis.lint(text, where, rules, previous=before).result
        assert sorted(map(_key, edited.diagnostics)) == sorted(map(_key, fresh.diagnostics)), path
        if fresh.diagnostics:
            out[path] = sorted(_key(d) for d in fresh.diagnostics)
    return out


# Text and concise reports print each finding's title on its header line (`split_message`), and
# flake8 the title alone.
TITLE_ONLY = (cli_text, cli_concise, cli_cache_cold_text, cli_cache_warm_text, flake8_plugin)
# `--jobs` automatic is the in-process path on one CPU and the pool on more: the text, concise and
# SARIF reports take it, and JSON is asked with each of the two explicitly.
ENTRY_POINTS = [cli_text, cli_concise, cli_sarif, cli_json_jobs_1, cli_json_jobs_2, cli_cache_cold_text,
                cli_cache_warm_json, cli_cache_warm_text, cli_each_file, cli_stdin, flake8_plugin, language_server]


TEXT_ENTRIES = {cli_text, cli_concise, cli_cache_cold_text, cli_cache_warm_text, flake8_plugin}


def _titles(keys: list[Key]) -> list[Key]:
    """Findings with their messages cut to the title a text report shows (`split_message`)."""
    from cglint.diagnostics import split_message

    return [k[:6] + (k[6] if k[5] == "CG000" or k[6] is None else _message(split_message(k[6])[0]),) for k in keys]


def differences(root: Path, entry_points=ENTRY_POINTS, expected: dict[str, list[Key]] | None = None) -> list[str]:
    """Every finding on which an entry point and `engine.lint_file` (or `expected`) disagree,
    compared on the fields the entry point reports."""
    expected = {p: v for p, v in (reference(root) if expected is None else expected).items() if v}
    out = []
    for entry in entry_points:
        got = entry(root)
        for path in sorted(set(expected) | set(got)):
            if entry in (flake8_plugin, language_server) and path.endswith(".ipynb"):
                continue  # flake8 reads no notebook; the server's notebook cells go through engine.lint_notebook
            want = expected.get(path, [])
            if entry in TITLE_ONLY:  # the header line holds the message's title (the rest follows, wrapped)
                want = [k[:6] + (" ".join(split_message(k[6])[0].split()),) for k in want]
            have = got.get(path, [])
            if entry is flake8_plugin and any(k[5] == "CG000" for k in want + have):
                # flake8's own E999/E902 for a file Python cannot read (no plugin runs): as CG000,
                # by code, where cglint parses the file (it never parses one that does not
                # mention custom_gradient, not even for CG000).
                want = [(None,) * 5 + ("CG000", None)] if any(k[5] == "CG000" for k in want) else want
                if not files.may_hold_site((root / path).read_bytes().decode("utf-8", "replace")):
                    have = [k for k in have if k[5] != "CG000"]
            if entry in TEXT_ENTRIES:  # the text report's finding line holds the message's title
                want, have = _titles(want), _titles(have)
            fields = [i for i in range(7) if any(k[i] is not None for k in have)] if have else list(range(7))
            project = lambda keys: sorted((tuple(k[i] for i in fields) for k in keys), key=repr)  # noqa: E731
            if project(want) != project(have):
                out.append(f"{entry.__name__}: {path}: expected {project(want)}, got {project(have)}")
    return out


@pytest.fixture(scope="module")
def corpus_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("one_answer")
    build_corpus(root)
    return root


@pytest.fixture(scope="module")
def expected(corpus_root):
    """`engine.lint_file`'s answer, once per worker: every entry point is compared with it."""
    return reference(corpus_root)


def test_the_corpus_exercises_every_rule(corpus_root, expected):
    codes = {k[5] for keys in expected.values() for k in keys}
    assert {r.code for r in ALL_RULES if r.code != "CG100"} <= codes
    assert any(p.endswith(".ipynb") for p in _paths(corpus_root))


# One test per entry point: they are independent, so xdist spreads them over its workers.
@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=[e.__name__ for e in ENTRY_POINTS])
def test_every_entry_point_gives_the_same_findings(corpus_root, expected, entry):
    assert differences(corpus_root, [entry], expected) == []


@pytest.fixture()
def small_root(tmp_path):
    """Two modules of the corpus, for the test of the comparison itself."""
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "scope_vars.py").write_text(SCOPE_VARS)
    (tmp_path / "corpus" / "multiline.py").write_text(MULTILINE)
    (tmp_path / "pyproject.toml").write_text("[tool.cglint]\nextend-exclude = []\n")
    return tmp_path


def test_a_differing_entry_point_is_caught(small_root, monkeypatch):
    """The comparison fails when one way of asking answers differently: JSON output that drops
    one finding, and the reduced-parse bug this test was written against (the text report
    linted a module without its module-level `with` block holding the variables, so the
    grad fn's CG002 became CG007)."""
    from cglint.report import json_format

    corpus_root = small_root
    expected = reference(corpus_root)
    assert [k[5] for k in expected["corpus/scope_vars.py"]] == ["CG002"]
    real_render = json_format.render

    def drop_last(results, *args, **kwargs):
        data = json.loads(real_render(results, *args, **kwargs))
        data["diagnostics"] = data["diagnostics"][:-1]
        return json.dumps(data)

    monkeypatch.setattr(json_format, "render", drop_last)
    found = differences(corpus_root, [cli_json], expected)
    assert len(found) == 1 and found[0].startswith("cli_json: "), found
    monkeypatch.setattr(json_format, "render", real_render)

    real_lint = engine.lint_source
    blanked = re.compile(r"(?m)^with .*:\n(?:    .*\n)+")
    monkeypatch.setattr(engine, "lint_source", lambda source, path, *args, **kwargs: real_lint(
        blanked.sub(lambda m: "\n" * m.group(0).count("\n"), source), path, *args, **kwargs))
    found = differences(corpus_root, [cli_text], expected)
    assert any(f.startswith("cli_text: corpus/scope_vars.py") and "CG007" in f for f in found), found


# A module-level `with tf.compat.v1.variable_scope(...)` block creating the variables the forward
# reads: the grad fn's flat return is CG002. TensorFlow 2.21, `tape.gradient(op(x), [x, w, b])`:
# "ValueError: too many values to unpack (expected 2)".
SCOPE_VARS = '''import tensorflow as tf

with tf.compat.v1.variable_scope("layer"):
    w = tf.Variable(2.0, name="w")
    b = tf.Variable(1.0, name="b")


@tf.custom_gradient
def op(x):
    y = w * x + b

    def grad(upstream, variables=None):
        return upstream * w, upstream * x, upstream

    return y, grad
'''

# A finding over several lines that ends left of where it starts (SARIF once clamped its end
# column to the start column, as for a one-line span).
MULTILINE = '''import numpy as np
import tensorflow as tf


@tf.custom_gradient
def op(x):
    def grad(dy):
        total = tf.constant(0.0) + tf.constant(np.sum(
            np.array(dy),
        ))
        return total

    return x * 2.0, grad
'''
