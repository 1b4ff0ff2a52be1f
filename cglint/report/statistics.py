"""`--statistics`: findings counted per rule, most frequent first, as ruff prints them."""

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
    return [{"code": c, "name": names[c], "count": counts[c], "fixable": fixable[c] > 0} for c in ordered]


def render(results: list[FileResult], fmt: str = "text", unsafe: bool = False) -> str:
    table = rows(results, unsafe)
    if fmt == "json":
        return json.dumps(table, indent=2) + "\n"
    if not table:
        return ""
    width = max(len(str(r["count"])) for r in table)
    return "".join(f"{r['count']:>{width}}\t{r['code']}\t{'[*]' if r['fixable'] else '[ ]'} {r['name']}\n" for r in table)
