"""The language server's incremental analysis gives exactly what a full lint gives.

A module made of every rule's bad fixture and the seed is edited at random, one small edit
after another (characters typed and deleted, lines duplicated, removed and re-indented; many
edits break the syntax for a while, as typing does). After each edit the incremental lint must
equal `engine.lint_source` on the same text; every few edits, also the full-tree lint (no
reduction) and the quick fixes must equal what `cglint --fix` would write.
"""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from cglint import engine
from cglint.lsp import text as txt
from cglint.lsp.incremental import Analysis
from cglint.rules import ALL_RULES

ROOT = Path(__file__).resolve().parents[1]
# Rules with fixes, a module-wide rule (CG013), call-site rules (CG010) and the seed.
PARTS = [ROOT / "fixtures" / "rules" / f"cg{n:03d}_bad.py" for n in (1, 2, 4, 5, 6, 10, 13)]
MODULE = "\n\n".join(p.read_text() for p in PARTS + [ROOT / "fixtures" / "seed" / "original.py"])
TYPED = list("abxyz019 _.,:()[]=+*#\"'\n\t") + ["    ", "\n\n", "def ", "return ", "tf.", "@tf.custom_gradient\n"]


def _edit(rng: random.Random, text: str) -> str:
    lines = text.split("\n")
    kind = rng.random()
    if kind < 0.45:  # type something
        at = rng.randrange(len(text) + 1)
        return text[:at] + rng.choice(TYPED) + text[at:]
    if kind < 0.75:  # delete a few characters
        at = rng.randrange(max(len(text), 1))
        return text[:at] + text[at + rng.randint(1, 3):]
    i = rng.randrange(len(lines))
    if kind < 0.85:
        lines.insert(i, lines[i])  # duplicate a line
    elif kind < 0.92:
        del lines[i]
    else:
        lines[i] = ("    " + lines[i]) if rng.random() < 0.5 else lines[i][4:]  # indent / dedent
    return "\n".join(lines)


def _facts(result):
    return [(d.line, d.column, d.end_line, d.end_column, d.code, d.message, None if d.fix is None else
             (d.fix.applicability, d.fix.description)) for d in result.diagnostics], result.warnings


@pytest.mark.parametrize("seed", [0, 1])
def test_random_edits_match_a_full_lint(seed):
    rng = random.Random(seed)
    rules = list(ALL_RULES)
    analysis = Analysis()
    text = MODULE
    previous = None  # the lint of the previous text, as the server keeps it per buffer
    edits = 260  # two seeds: 520 edits
    fixes_checked = 0
    for n in range(edits):
        # Mostly a walk of edits on the current text; sometimes back to a clean module, as
        # when a user undoes, so both broken and valid states get their share.
        text = _edit(rng, text if rng.random() < 0.93 else MODULE)
        incremental = analysis.lint(text, "m.py", rules, previous=previous)
        previous = incremental
        expected = engine.lint_source(text, "m.py", rules)
        if n % 5 == 0 and incremental.chunks is not None:
            # Python's parse assembled from the chunks is Python's parse of the text.
            assembled = ast.Module(body=[s for c in incremental.chunks for s in c.statements], type_ignores=[])
            assert ast.dump(assembled, include_attributes=True) == ast.dump(ast.parse(text), include_attributes=True)
        assert _facts(incremental.result) == _facts(expected), f"edit {n}:\n{text}"
        if n % 25 == 0:
            # One edit away from the clean module: findings on the full tree, and the fixes.
            near = analysis.lint(_edit(rng, MODULE), "m.py", rules)
            full = engine.lint_source(near.result.source, "m.py", rules)
            assert _facts(near.result) == _facts(full), f"edit {n} (full tree):\n{near.result.source}"
            for d in near.result.diagnostics if near.chunks else ():  # "Suppress" tokenizes one statement
                chunk = next(c for c in near.chunks if c.first_line <= d.line < c.first_line + c.lines)
                assert txt.noqa_edit(chunk.text, d.line - chunk.first_line + 1, d.code) == txt.noqa_edit(
                    near.result.source, d.line, d.code), (n, d)
            for d in [d for d in near.result.diagnostics if d.fix is not None][::4]:
                assert near.fixed_text(d, rules) == near._whole_file(d, rules), (n, d)
                fixes_checked += 1
    assert analysis.parsed < edits * 3, "most statements must come from the cache"
    assert fixes_checked >= 4


def test_an_edit_parses_only_the_statement_it_changes():
    rules = list(ALL_RULES)
    analysis = Analysis()
    first = analysis.lint(MODULE, "m.py", rules)
    parsed = analysis.parsed
    assert parsed > 10 and first.result.diagnostics
    edited = MODULE.replace("tf.math.sigmoid(out)", "tf.math.sigmoid(out )", 1)
    assert edited != MODULE
    second = analysis.lint(edited, "m.py", rules, previous=first)
    assert analysis.parsed == parsed + 1
    assert _facts(second.result) == _facts(engine.lint_source(edited, "m.py", rules))


def test_a_statement_repeated_word_for_word_is_reported_at_each_place():
    """Two identical top-level statements (a def pasted twice) are two sets of nodes, as in a
    whole parse: each copy's finding is reported at its own line, and a second lint parses
    nothing again."""
    op = ("@tf.custom_gradient\ndef op(x):\n    y = tf.tan(x)\n\n    def grad(dy):\n"
          "        return dy / tf.cos(y) ** 2\n\n    return y, grad\n\n\n")
    text = "import tensorflow as tf\n\n\n" + op + op
    rules = list(ALL_RULES)
    analysis = Analysis()
    result = analysis.lint(text, "m.py", rules).result
    assert [(d.line, d.code) for d in result.diagnostics] == [(9, "CG005"), (19, "CG005")]
    assert _facts(result) == _facts(engine.lint_source(text, "m.py", rules))
    parsed = analysis.parsed
    assert _facts(analysis.lint(text, "m.py", rules).result) == _facts(result) and analysis.parsed == parsed


def test_comments_above_a_statement_are_its_leading_lines_as_in_a_full_lint():
    """A whole parse gives the comment lines above a def to the def (`# cglint: intentional`,
    which rules read); only above the file's first statement are they the module's header."""
    source = ("import tensorflow as tf\n\n# cglint: intentional\n@tf.custom_gradient\ndef sign_backward(x):\n"
              "    y = tf.tanh(x)\n\n    def grad(dy):\n        return tf.sign(dy) * (1.0 - y * y)\n\n    return y, grad\n")
    for text in (source, source.replace("import tensorflow as tf\n\n", "") + "\nimport tensorflow as tf\n"):
        lint = Analysis().lint(text, "m.py", list(ALL_RULES))
        assert _facts(lint.result) == _facts(engine.lint_source(text, "m.py"))
        assert lint.result.diagnostics == []
    # Without the comment the transformed upstream is a finding: the comment is what decides.
    plain = source.replace("# cglint: intentional\n", "")
    assert [d.code for d in Analysis().lint(plain, "m.py", list(ALL_RULES)).result.diagnostics] == ["CG009"]
