"""One meaning of "fixable": `Fix.applies(unsafe)`. JSON's `fixable`, text's `[*]` and summary,
`--statistics` and the language server's quick fixes (offered / preferred) agree on every
finding, with and without `--unsafe-fixes`; display-only fixes are shown, never applied; a fix
whose result does not compile is refused by `--fix` and never offered by the editor."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import libcst as cst
import pytest
import pytest_asyncio
from lsprotocol import types as lsp
from inprocess import cglint as cglint_in
from support import FIXTURES, ROOT, cglint

from cglint.diagnostics import DISPLAY_ONLY, SAFE, UNSAFE, Finding, Fix
from cglint.fix import fix_source, validated
from cglint.rules import ALL_RULES
from cglint.rules.base import Rule

sys.path.insert(0, str(Path(__file__).parent))
from test_lsp import VSCODE, Editor, start  # noqa: E402

SEED = FIXTURES / "seed" / "original.py"
# What the seed's findings offer today: CG001 a safe fix, CG004 and CG005 unsafe ones, CG002 none
# (its fix needs CG004's `variables` parameter first).
EXPECTED = {False: {"CG001"}, True: {"CG001", "CG004", "CG005"}}


def _cli_views(unsafe: bool) -> dict[str, set[str]]:
    flag = ["--unsafe-fixes"] if unsafe else []
    views = {}
    def cglint(*args):
        return cglint_in(*args, cwd=ROOT)

    js = json.loads(cglint("--output-format", "json", *flag, SEED).stdout)["diagnostics"]
    views["json"] = {d["code"] for d in js if d["fixable"]}
    views["json applicability"] = {d["code"] for d in js if d["fix"] and (
        d["fix"]["applicability"] == SAFE or (unsafe and d["fix"]["applicability"] == UNSAFE))}
    text = cglint(*flag, SEED).stdout
    views["text [*]"] = set(re.findall(r"^\S+:\d+:\d+: (CG\d+) \[\*\]", text, re.M))
    (summary,) = re.findall(r"^\[\*\] (\d+) fixable", text, re.M)
    views["text summary"] = {f"{summary} findings"}
    stats = json.loads(cglint("--statistics", "--output-format", "json", *flag, SEED).stdout)
    views["--statistics json"] = {r["code"] for r in stats if r["fixable"]}
    stats_text = cglint("--statistics", *flag, SEED).stdout
    views["--statistics"] = set(re.findall(r"(CG\d+)\t\[\*\]", stats_text))
    return views


@pytest.mark.parametrize("unsafe", [False, True], ids=["default", "unsafe-fixes"])
def test_cli_outputs_agree_on_fixable(unsafe):
    views = _cli_views(unsafe)
    want = EXPECTED[unsafe]
    assert views.pop("text summary") == {f"{len(want)} findings"}, views
    assert all(v == want for v in views.values()), views


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def editor(tmp_path_factory):
    client, published, encoding = await start(VSCODE, tmp_path_factory.mktemp("cache"))
    ed = Editor(client, VSCODE, published, encoding)
    yield ed
    await client.shutdown_session()
    await client.stop()


@pytest.mark.asyncio(loop_scope="module")
async def test_language_server_offers_and_prefers_what_the_cli_fixes(editor):
    diags = await editor.open(FIXTURES / "seed" / "scratch_fixable.py", SEED.read_text())
    offered, preferred = set(), set()
    for d in diags:
        for action in await editor.code_actions(d):
            if action.title.startswith(f"Fix {d.code}"):
                offered.add(d.code)
                if action.is_preferred:
                    preferred.add(d.code)
    # The editor offers every fix `--fix --unsafe-fixes` applies, prefers those `--fix` applies.
    # (test_cli_outputs_agree_on_fixable shows the CLI's outputs give EXPECTED)
    assert preferred == EXPECTED[False]
    assert offered == EXPECTED[True]


# ---- display-only and refused fixes, with a rule written for the test ----------------------

SOURCE = """import tensorflow as tf


@tf.custom_gradient
def op(x):
    y = tf.tan(x)

    def grad(dy):
        return dy / tf.square(tf.cos(x))

    return y, grad
"""


def _rule(applicability: str, break_it: bool = False) -> type[Rule]:
    class Suggest(Rule):
        code, name, summary = "CG000", "syntax-error", "test"  # a known code, so noqa stays quiet

        def check(self, model):
            for site in model.sites:
                grad = site.grad_fns[0].node
                new = grad.with_changes(name=cst.Name("renamed"))
                if break_it:  # duplicate parameters parse but do not compile
                    params = grad.params.with_changes(params=[*grad.params.params, *grad.params.params])
                    new = grad.with_changes(params=params)
                yield Finding(grad.name, "test finding", Fix([(grad, new)], applicability=applicability,
                                                             description="rename"))
    return Suggest


def test_display_only_fix_is_reported_never_applied():
    rules = [_rule(DISPLAY_ONLY)]
    for unsafe in (False, True):
        out = fix_source(SOURCE, "m.py", rules, unsafe=unsafe)
        assert not out.changed and out.applied == []
        (d,) = out.remaining
        assert not d.is_fixable(unsafe) and d.to_dict(unsafe)["fix"]["applicability"] == "display-only"


def test_display_only_fix_is_shown_in_json_and_sarif_but_not_counted():
    from cglint import engine
    from cglint.report import Context, render

    result = engine.lint_source(SOURCE, "m.py", [_rule(DISPLAY_ONLY)])
    for unsafe in (False, True):
        (d,) = json.loads(render("json", [result], Context(unsafe_fixes=unsafe)))["diagnostics"]
        assert not d["fixable"] and d["fix"]["applicability"] == "display-only"
        # `grad` -> `renamed`, as the smallest replacement: `gra` (8:9-8:12) -> `rename`
        assert d["fix"]["edits"] == [{"content": "rename", "location": {"row": 8, "column": 9},
                                      "end_location": {"row": 8, "column": 12}}]
        text = render("text", [result], Context(unsafe_fixes=unsafe))
        assert "[*]" not in text and "fixable" not in text and "hidden" not in text
    (entry,) = json.loads(render("sarif", [result]))["runs"][0]["results"]
    assert entry["fixes"][0]["description"]["text"] == "rename (suggestion: cglint does not apply it)"


def test_a_fix_that_does_not_compile_is_refused_by_the_one_validated_path():
    from cglint import engine

    rules = [_rule(SAFE, break_it=True)]
    out = fix_source(SOURCE, "m.py", rules)
    assert not out.changed and [x.reason for x in out.dropped] == [
        "the fixed code would not compile: duplicate argument 'dy' in function definition (line 8)"]
    result = engine.lint_source(SOURCE, "m.py", rules)
    code, problem = validated(result.module, result.diagnostics[0].fix, "m.py")
    assert code is None and problem == out.dropped[0].reason


def test_language_server_does_not_offer_a_fix_the_cli_refuses():
    from cglint import engine
    from cglint.lsp.server import Lint

    rules = [_rule(SAFE, break_it=True)]
    result = engine.lint_source(SOURCE, "m.py", rules)
    lint = Lint(SOURCE, None, rules, result, [], "1")
    assert lint.fixed_text(0) is None
    good = [_rule(SAFE)]
    lint = Lint(SOURCE, None, good, engine.lint_source(SOURCE, "m.py", good), [], "1")
    assert "def renamed(dy):" in lint.fixed_text(0)


def test_fix_keeps_the_safe_keyword_construction():
    node = cst.Name("x")
    assert Fix(edits=[(node, node)], safe=True, description="d").applicability == SAFE
    assert not Fix([(node, node)], False, "d").safe
    assert Fix([], applicability=UNSAFE).applies(unsafe=True) and not Fix([], applicability=UNSAFE).applies()
    with pytest.raises(ValueError):
        Fix([], applicability="sometimes")
    assert len(ALL_RULES) > 10


# ---- --show-fixes ---------------------------------------------------------------------------


def test_show_fixes_lists_what_fix_changed_per_file_and_rule(tmp_path):
    (tmp_path / "ops.py").write_text(SEED.read_text())
    (tmp_path / "clean.py").write_text((FIXTURES / "seed" / "correct.py").read_text())
    run = cglint_in("--fix", "--unsafe-fixes", "--show-fixes", "clean.py", "ops.py", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith(
        "Fixed 4 problems:\n"
        "- ops.py:\n"
        "    1 × CG001 (nested-tf-function)\n"
        "    1 × CG002 (flat-variable-gradients)\n"
        "    1 × CG004 (missing-variables-parameter)\n"
        "    1 × CG005 (output-derivative)\n\n"), run.stdout
    assert "clean.py" not in run.stdout
    # Nothing left to fix: nothing listed.
    again = cglint_in("--fix", "--unsafe-fixes", "--show-fixes", "ops.py", cwd=tmp_path)
    assert "Fixed" not in again.stdout and again.returncode == 0


def test_show_fixes_with_diff_says_would_fix_on_stderr(tmp_path):
    (tmp_path / "ops.py").write_text(SEED.read_text())
    run = cglint_in("--diff", "--show-fixes", "ops.py", cwd=tmp_path)
    assert run.returncode == 1 and run.stdout.startswith("--- a/ops.py")
    assert "Would fix 1 problem:\n- ops.py:\n    1 × CG001 (nested-tf-function)\n" in run.stderr
    assert (tmp_path / "ops.py").read_text() == SEED.read_text()


# ---- the runtime extra -----------------------------------------------------------------------


def test_runtime_extra_installs_no_tensorflow_and_ci_keeps_the_cpu_wheel():
    import tomllib

    extras = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert not [r for r in extras["runtime"] if r.lower().startswith(("tensorflow", "tf-", "tf_"))]
    assert "cglint[runtime-cpu]" in extras["test"]
    assert any(r.startswith("tensorflow-cpu") for r in extras["runtime-cpu"])


def test_runtime_without_tensorflow_is_a_one_line_error(monkeypatch, capsys, tmp_path):
    import importlib.util

    from cglint import cli

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorflow" else real(name, *a))
    (tmp_path / "ops.py").write_text(SEED.read_text())
    assert cli.main(["--runtime", str(tmp_path / "ops.py")]) == 2
    err = capsys.readouterr().err
    assert err == ("cglint: error: --runtime needs TensorFlow in this environment (cglint installs none, to keep "
                   f"yours); the CPU wheel: {shlex.quote(sys.executable)} -m pip install tensorflow-cpu\n")
