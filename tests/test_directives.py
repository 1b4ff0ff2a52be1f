"""`# cglint: intentional` and `# cglint: example`: one parser (cglint/directives.py) for the
rules, the runtime's plan and trace, and `intentional` accepted where users put it: above the
function, on its `def` line, and at the end of the flagged line (where `# noqa` goes)."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from cglint import directives
from cglint.engine import lint_source
from cglint.rules import rules
from cglint.runtime.plan import plan_file

ROOT = Path(__file__).resolve().parents[1]

# CG019: swish's grad fn drops the product rule's second term.
SWISH = '''import tensorflow as tf


@tf.custom_gradient
def swish(x):
    s = tf.sigmoid(x)

    def grad(dy):
        return dy * s

    return x * s, grad


y = swish(tf.constant([1.0, 2.0]))
'''
FLAGGED = "        return dy * s"


def cg019(source: str) -> list:
    return [d for d in lint_source(source, "m.py", rules(["CG019"])).diagnostics if d.code == "CG019"]


def test_the_swish_example_is_flagged_on_its_return_line():
    (d,) = cg019(SWISH)
    assert (d.line, SWISH.splitlines()[d.line - 1]) == (9, FLAGGED)


@pytest.mark.parametrize("where", ["flagged line", "def line", "above the decorator", "between decorator and def"])
def test_intentional_is_accepted_where_users_put_it(where):
    source = {
        "flagged line": SWISH.replace(FLAGGED, FLAGGED + "  # cglint: intentional"),
        "def line": SWISH.replace("def swish(x):", "def swish(x):  # cglint: intentional"),
        "above the decorator": SWISH.replace("\n\n@tf.custom_gradient", "\n\n# cglint: intentional\n@tf.custom_gradient"),
        "between decorator and def": SWISH.replace("@tf.custom_gradient\n", "@tf.custom_gradient\n# cglint: intentional\n"),
    }[where]
    assert cg019(source) == [], where
    # The runtime's plan reads the same places (it checks the function as intentional).
    (planned,) = [p for p in plan_file(lint_source(source, "m.py"), everything=True) if p.request["function"] == "swish"]
    assert planned.request.get("intentional") is True, where


def test_intentional_elsewhere_in_the_body_is_not_a_declaration():
    source = SWISH.replace("    s = tf.sigmoid(x)", "    s = tf.sigmoid(x)  # cglint: intentional")
    assert len(cg019(source)) == 1
    (planned,) = [p for p in plan_file(lint_source(source, "m.py"), everything=True) if p.request["function"] == "swish"]
    assert "intentional" not in planned.request


def test_the_message_shows_the_exact_line_and_adding_it_silences_the_finding():
    (d,) = cg019(SWISH)
    shown = re.search(r"end the line with it: `(.+?)`", d.message).group(1)
    assert shown == "return dy * s  # cglint: intentional"
    fixed = SWISH.replace(FLAGGED, "        " + shown)
    assert cg019(fixed) == []


def test_without_a_one_line_return_the_message_names_the_line_to_add_above_the_def():
    source = SWISH.replace("        return dy * s\n", "        if True:\n            return dy * s\n        return dy * s\n")
    (d,) = cg019(source)
    assert "add the line `# cglint: intentional` above `def swish`" in d.message
    fixed = source.replace("\n\n@tf.custom_gradient", "\n\n# cglint: intentional\n@tf.custom_gradient")
    assert cg019(fixed) == []


def test_an_existing_comment_is_kept_in_the_line_shown():
    source = SWISH.replace(FLAGGED, FLAGGED + "  # product rule?")
    (d,) = cg019(source)
    assert "`return dy * s  # product rule?  # cglint: intentional`" in d.message


def test_example_is_read_above_and_on_the_def_never_on_a_return_line():
    source = SWISH.replace("\n\n@tf.custom_gradient", "\n\n# cglint: example x=normal(3) float64\n@tf.custom_gradient")
    planned = {p.request["function"]: p for p in plan_file(lint_source(source, "m.py"), everything=True)}
    assert planned["swish"].request["inputs"] == "x=normal(3) float64"
    assert directives.parse([], ["# cglint: example x=normal(3)"]) == directives.Directives()
    assert directives.parse(["# cglint: example x=normal(3)  "]).example == "x=normal(3)"


def _load(tmp_path, source):
    path = tmp_path / "traced_mod.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("traced_mod", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module


TRACED = '''import functools


def deco(f):
    @functools.wraps(f)
    def inner(*args):
        return f(*args)
    return inner


@deco
def op(x):{def}
    def grad(dy):
        return dy * 2{ret}

    return x * 2, grad
'''


@pytest.mark.parametrize("def_comment,ret_comment,expected", [
    ("", "", False),
    ("  # cglint: intentional", "", True),
    ("", "  # cglint: intentional", True),
])
def test_trace_reads_the_same_places_from_the_code_objects(tmp_path, def_comment, ret_comment, expected):
    """`cglint trace` knows a function by its code object: the decorator line it starts at, the
    `def` below, its returns and those of the functions defined in it (the grad fn)."""
    from cglint.trace.instrument import _declared_intentional

    path, module = _load(tmp_path, TRACED.format(**{"def": def_comment, "ret": ret_comment}))
    code = module.op.__wrapped__.__code__
    assert _declared_intentional(code, str(path), code.co_firstlineno) is expected
    sys.modules.pop("traced_mod", None)


def test_one_parser():
    """No module but cglint/directives.py spells the directives' pattern."""
    pattern = re.compile(r"cglint:\\s\*(intentional|example)")  # `#\s*cglint:\s*intentional` as a regex spells it
    spelled = [p.relative_to(ROOT) for p in (ROOT / "cglint").rglob("*.py")
               if p.name != "directives.py" and pattern.search(p.read_text())]
    assert spelled == []
    assert pattern.search((ROOT / "cglint" / "directives.py").read_text())  # (the pattern finds a parser)
