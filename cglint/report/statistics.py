"""`--statistics`: findings counted per rule, most frequent first, then the summary, as ruff
prints them."""

from __future__ import annotations

import json
from collections import Counter

from cglint.diagnostics import FileResult


def rows(results: list[FileResult], unsafe: bool = False) -> list[dict]:
    counts: Counter[str] = Counter()
    names: dict[str, str] = {}
    fixable: Counter[str] = Counter()
    for r in results:
        for d in r.diagnostics:
            counts[d.code] += 1
            names[d.code] = d.name
            if d.is_fixable(unsafe):
                fixable[d.code] += 1
    ordered = sorted(counts, key=lambda c: (-counts[c], c))
    return [{"code": c, "name": names[c], "count": counts[c], "fixable": fixable[c] > 0, "fixable_count": fixable[c]}
            for c in ordered]


def render(results: list[FileResult], fmt: str = "text", context=None) -> str:
    from cglint.report.context import Context
    from cglint.report.style import Style
    from cglint.report.text import summary

    context = context or Context()
    table = rows(results, context.unsafe_fixes)
    if fmt == "json":
        return json.dumps(table, indent=2) + "\n"
    if not table:
        return ""
    style = Style(context.color)
    width = max(len(str(r["count"])) for r in table)
    lines = [f"{r['count']:>{width}}\t{style(r['code'], 'bold', 'red')}\t"
             f"{'[' + style('*', 'bold', 'cyan') + ']' if r['fixable'] else '[ ]'} {r['name']}" for r in table]
    if not context.quiet:
        lines += summary(results, context.fixed, context.unsafe_fixes, context.runtime, context.errors, style)
    return "".join(line + "\n" for line in lines)
