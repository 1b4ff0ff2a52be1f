"""The fuzz harness: inputs (mutations of the project's own examples and fixtures, generated
programs with custom-gradient sites inserted) and the properties every input must keep, through
the whole engine: every rule, every output format, fixes and `--add-noqa` in memory, the lint with
and without the quick scan's prefilter compared.

Used by the short run in the default suite (tests/fuzz/test_fuzz.py) and the long one
(`python scripts/fuzz.py --examples 10000`). `check(source)` raises PropertyFailed naming the
property a source breaks.
"""

from __future__ import annotations

import random
import re
import warnings
from pathlib import Path

from cglint import engine, files, fix, noqa
from cglint import source as pysource
from cglint.report import FORMAT_NAMES, Context, render
from cglint.rules import ALL_RULES

ROOT = Path(__file__).resolve().parents[2]
SPLITLINES_ONLY = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


class PropertyFailed(AssertionError):
    def __init__(self, prop: str, detail: str) -> None:
        super().__init__(f"{prop}: {detail}")
        self.prop = prop


def seeds() -> list[str]:
    """Every rule example (invalid and valid) and every fixture module."""
    out = [code for rule in ALL_RULES for code in (*rule.INVALID, *rule.VALID)]
    out += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "fixtures").glob("**/*.py"))]
    return [s if isinstance(s, str) else s[0] for s in out]


# ---- mutations -------------------------------------------------------------------------------

_TOKEN = re.compile(r"\w+|[^\w\s]|\s+")


def _lines(s: str) -> list[str]:
    return pysource.split_lines(s, keepends=True) or [""]


def _tokens(s):
    return _TOKEN.findall(s) or [s]


# The same three edits on lines and on tokens (the names are the mutation tags failures carry).
def _delete(parts, r):
    del parts[r.randrange(len(parts))]
    return "".join(parts)


def _duplicate(parts, r):
    i = r.randrange(len(parts))
    parts.insert(i, parts[i])
    return "".join(parts)


def _swap(parts, r):
    i, j = r.randrange(len(parts)), r.randrange(len(parts))
    parts[i], parts[j] = parts[j], parts[i]
    return "".join(parts)


def _delete_line(s, r):
    return _delete(_lines(s), r)


def _duplicate_line(s, r):
    return _duplicate(_lines(s), r)


def _swap_lines(s, r):
    return _swap(_lines(s), r)


def _delete_token(s, r):
    return _delete(_tokens(s), r)


def _duplicate_token(s, r):
    return _duplicate(_tokens(s), r)


def _swap_tokens(s, r):
    return _swap(_tokens(s), r)


def _truncate(s, r):
    return s[: r.randrange(len(s) + 1)]


def _insert_at(s, r, text):
    i = r.randrange(len(s) + 1)
    return s[:i] + text + s[i:]


def _nul(s, r):
    return _insert_at(s, r, "\0")


def _bom(s, r):
    return "\ufeff" + s


def _line_endings(s, r):
    kind = r.choice(["\r", "\r\n", "mixed"])
    lines = pysource.split_lines(s)
    if kind != "mixed":
        return kind.join(lines) + (kind if s.endswith(("\n", "\r")) else "")
    return "".join(line + r.choice(["\n", "\r", "\r\n"]) for line in lines)


def _splitlines_char(s, r):
    char = r.choice(SPLITLINES_ONLY)
    if r.random() < 0.5:  # on a line of its own, between statements
        lines = _lines(s)
        i = r.randrange(len(lines) + 1)
        return "".join(lines[:i]) + char + "\n" + "".join(lines[i:])
    return _insert_at(s, r, char)


def _in_comment_or_string(s, r):
    char = r.choice(SPLITLINES_ONLY + ["\r"])
    return s.replace("#", "#" + char, 1) if "#" in s and r.random() < 0.5 else s.replace('"""', '"""' + char, 1)


def _deep_nesting(s, r):
    n = r.choice([20, 99, 150, 199, 250, 1000, 3000])
    names = [m for m in re.finditer(r"\b(?!(?:def|return|class|import|from|as|lambda|if|else|for|in|not|and|or|is)\b)[a-z_]\w*\b", s)]
    if not names:
        return s
    m = r.choice(names)
    kind = r.choice(["paren", "list", "unary", "subscript", "binop"])
    name = m.group()
    deep = {"paren": "(" * n + name + ")" * n, "list": "[" * n + name + "]" * n + "[0]" * 0, "unary": "-" * n + name,
            "subscript": "(" + name + "[0]" * n + ")", "binop": "(" + " + ".join([name] * n) + ")"}[kind]
    return s[: m.start()] + deep + s[m.end():]


def _huge(s, r):
    """Long files: many copies of a module (many sites), or big tables. Kept to a few hundred
    kilobytes so the long run stays long in examples, not in seconds per example."""
    if r.random() < 0.5:
        return s + "\n" + "\n".join(f"TABLE_{i} = [" + "0.5, " * r.choice([50, 5000]) + "]" for i in range(20)) + "\n"
    return "\n\n".join([s] * r.choice([5, 20]))


def _coding_cookie(s, r):
    return r.choice(["# -*- coding: latin-1 -*-\n", "# vim: set fileencoding=utf-8 :\n", "# coding: ascii\n"]) + s


def _tabs(s, r):
    lines = _lines(s)
    indented = [i for i, line in enumerate(lines) if line.startswith("    ")]
    if not indented:
        return s
    i = r.choice(indented)
    lines[i] = "\t" + lines[i][4:] if r.random() < 0.5 else "\t" + lines[i]
    return "".join(lines)


MUTATIONS = [_delete_line, _duplicate_line, _swap_lines, _delete_token, _duplicate_token, _swap_tokens, _truncate,
             _nul, _bom, _line_endings, _splitlines_char, _in_comment_or_string, _deep_nesting, _huge,
             _coding_cookie, _tabs]


def mutate(source: str, r: random.Random, count: int | None = None) -> tuple[str, list[str]]:
    """`source` with 1-3 random mutations; returns it and their names."""
    names = []
    for _ in range(count or r.choice([1, 1, 2, 3])):
        m = r.choice(MUTATIONS)
        source = m(source, r)
        names.append(m.__name__.lstrip("_"))
    return source, names


# ---- generated programs: custom-gradient sites inserted -------------------------------------

SITES = [
    "@tf.custom_gradient\ndef {name}(x):\n    y = tf.math.tan(x)\n    return y, lambda dy: dy * tf.math.cos(y)\n",
    "@tf.custom_gradient\ndef {name}(x):\n    def grad(dy, variables=None):\n        return dy, [dy]\n    return x * w, grad\n",
    "{name} = tf.custom_gradient(lambda x: (x, lambda dy: dy))\n",
]


def with_sites(program: str, r: random.Random) -> str:
    """A generated program made to pass the prefilter: TensorFlow imported, `@tf.custom_gradient`
    put on some of its own top-level defs, and a known site inserted between statements."""
    lines = _lines(program)
    out = ["import tensorflow as tf\n", "w = tf.Variable(1.0)\n"]
    for line in lines:
        if re.match(r"(async\s+)?def\s", line) and r.random() < 0.7:
            out.append("@tf.custom_gradient\n")
        out.append(line)
    text = "".join(out)
    if not text.endswith("\n"):
        text += "\n"
    return text + "\n" + r.choice(SITES).format(name=f"op_{r.randrange(1000)}")


# ---- properties --------------------------------------------------------------------------------


def python_compiles(source: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(source, "fuzz.py", "exec", dont_inherit=True)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return False


def _key(d):
    return d.line, d.column, d.end_line, d.end_column, d.code, d.message


def check(source: str, path: str = "fuzz.py") -> None:
    """Every property, for one source. Raises PropertyFailed."""
    try:
        full = engine.lint_source(source, path)
        unfiltered = engine.lint_source(source, path, prefilter=False)
    except Exception as exc:  # noqa: BLE001 - that is the property
        raise PropertyFailed("no-exception", f"lint raised {type(exc).__name__}: {exc}") from exc
    compiles = python_compiles(source)
    if compiles and any(d.code == "CG000" for d in full.diagnostics):
        cg000 = next(d for d in full.diagnostics if d.code == "CG000")
        raise PropertyFailed("no-false-cg000", f"{cg000.line}:{cg000.column} {cg000.message}")
    if compiles and any(w.startswith("not analysed") for w in full.warnings):
        raise PropertyFailed("analysed", full.warnings[0])
    # The prefilter may skip a module only when no rule would fire on it (a module that never
    # mentions custom_gradient is not even parsed for CG000, by design).
    if files.may_hold_site(source) and [_key(d) for d in full.diagnostics] != [_key(d) for d in unfiltered.diagnostics]:
        raise PropertyFailed("prefilter-keeps-findings",
                             f"prefiltered {[_key(d)[:5] for d in full.diagnostics]} unfiltered {[_key(d)[:5] for d in unfiltered.diagnostics]}")
    for fmt in FORMAT_NAMES:
        for result in (full,):
            try:
                render(fmt, [result], Context(root=ROOT, unsafe_fixes=True))
            except Exception as exc:  # noqa: BLE001
                raise PropertyFailed("formats", f"{fmt} raised {type(exc).__name__}: {exc}") from exc
    if full.module is not None:
        for d in full.diagnostics:
            if d.fix is None:
                continue
            try:
                edits = fix.text_edits(source, full.module, d.fix)
            except Exception as exc:  # noqa: BLE001
                raise PropertyFailed("text-edits", f"{type(exc).__name__}: {exc}") from exc
            if any(a.end > b.start for a, b in zip(edits, edits[1:])):
                raise PropertyFailed("text-edits", f"{d.code} edits overlap")
    try:
        fixed = fix.fix_source(source, path, unsafe=True)
    except Exception as exc:  # noqa: BLE001
        raise PropertyFailed("no-exception", f"fix raised {type(exc).__name__}: {exc}") from exc
    if fixed.changed:
        if compiles and not python_compiles(fixed.new_source):
            raise PropertyFailed("fix-parses", "the fixed source does not compile")
        if fixed.converged:
            again = fix.fix_source(fixed.new_source, path, unsafe=True)
            if again.changed and again.converged:
                raise PropertyFailed("fix-idempotent", f"a second --fix applied {[a.code for a in again.applied]}")
    new, changed, skipped = noqa.add_noqa(source, full.diagnostics)
    if changed:
        if compiles and not python_compiles(new):
            raise PropertyFailed("add-noqa-parses", "the annotated source does not compile")
        after = engine.lint_source(new, path)
        left = {(d.line, d.code) for d in after.diagnostics if d.code != "CG000" and d.line not in skipped}
        wanted = {(d.line, d.code) for d in full.diagnostics if d.code != "CG000"}
        if left & wanted:
            raise PropertyFailed("add-noqa-suppresses", f"still reported after --add-noqa: {sorted(left & wanted)}")


def check_bytes(data: bytes, path: str = "fuzz.py") -> None:
    """Through the file path's decoding (BOM, coding cookie): undecodable is CG000, never a raise."""
    try:
        text = pysource.decode(data).text
    except pysource.UndecodableError:
        return
    check(text, path)
