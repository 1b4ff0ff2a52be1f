"""CG100 unused-noqa: a `# noqa: CODES` code that suppresses nothing (ruff's RUF100).

Reported only with `--report-unused-noqa`: it is about the suppressions, not the gradients, so
it is not among the rules every run checks. The engine asks `cglint.noqa.unused_noqa` after the
other rules and the suppressions have run; the fix (safe) removes the unused codes, and the
whole `# noqa` when none is left.
"""

from __future__ import annotations

from typing import Iterable

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from cglint.diagnostics import SAFE, Diagnostic, Fix
from cglint.rules.base import Rule


class UnusedNoqa(Rule):
    """A `# noqa` code suppresses nothing: the finding it was written for is gone (fixed, or
    the code moved), or the code is unknown (`CG999`). An unused suppression hides the next
    real finding on that line, so it is better removed.

    Only codes of rules that ran are judged (with `--select CG001`, a `# noqa: CG005` is left
    alone), and never a bare `# noqa` or other tools' codes (`E501`): cglint cannot know whether
    they are used.
    """

    code = "CG100"
    name = "unused-noqa"
    summary = "a `# noqa` code suppresses nothing (with --report-unused-noqa)"
    severity = "warning"
    INVALID = ["import tensorflow as tf\n\nx = tf.constant(1.0)  # noqa: CG005\n"]
    VALID = ["import tensorflow as tf\n\nx = tf.constant(1.0)\n"]
    fix_safety = """
        Safe: removing a code that suppresses nothing changes no finding and no behaviour.
    """


def diagnostics(path: str, source: str, module: cst.Module, before: list[Diagnostic], rules: Iterable[type[Rule]]
                ) -> list[Diagnostic]:
    """CG100 for each line whose `# noqa` has unused or unknown codes. `before`: the findings
    before suppression."""
    from cglint import noqa
    from cglint.rules import RULES_BY_CODE

    known = set(RULES_BY_CODE) | {UnusedNoqa.code}
    checked = {r.code for r in rules} - {UnusedNoqa.code}
    found = noqa.unused_noqa(source, before, checked, known)
    if not found:
        return []
    comments = _comments(module)
    out = []
    for line, unused, unknown in found:
        node, where = comments.get(line, (None, None))
        if node is None:
            continue
        parts = [f"unused: {', '.join(f'`{c}`' for c in unused)}"] if unused else []
        parts += [f"unknown: {', '.join(f'`{c}`' for c in unknown)}"] if unknown else []
        d = Diagnostic(path=path, line=where.start.line, column=where.start.column + 1, end_line=where.end.line,
                       end_column=where.end.column + 1, code=UnusedNoqa.code, name=UnusedNoqa.name,
                       severity=UnusedNoqa.severity, message=f"Unused `noqa` directive ({'; '.join(parts)})")
        d.fix = _fix(node, noqa.without_codes(node.comment.value, unused + unknown))  # type: ignore[attr-defined]
        out.append(d)
    return out


def _comments(module: cst.Module) -> dict[int, tuple[cst.CSTNode, object]]:
    """Line -> (the node holding the comment that starts there: a TrailingWhitespace or an
    EmptyLine, and the comment's position)."""
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    out = {}
    for node in positions:
        if isinstance(node, (cst.TrailingWhitespace, cst.EmptyLine)) and node.comment is not None:
            where = positions[node.comment]
            out[where.start.line] = (node, where)
    return out


def _fix(holder: cst.CSTNode, new_text: str) -> Fix:
    comment = holder.comment  # type: ignore[attr-defined]
    if new_text:
        return Fix([(holder, holder.with_changes(comment=comment.with_changes(value=new_text)))],
                   applicability=SAFE, description="Remove the unused codes from the `# noqa`")
    if isinstance(holder, cst.EmptyLine):  # a `# noqa` on a line of its own: the line goes
        return Fix([(holder, cst.RemovalSentinel.REMOVE)], applicability=SAFE,
                   description="Remove the unused `# noqa` directive")
    return Fix([(holder, holder.with_changes(whitespace=cst.SimpleWhitespace(""), comment=None))],
               applicability=SAFE, description="Remove the unused `# noqa` directive")
