"""`--output-format json`: the object in DESIGN.md ("Output contract"). Each finding's `fix` is
null or `{"applicability", "message", "edits"}` (ruff's shape); `fixable` says whether this
run's `--fix` (with `--unsafe-fixes` when given) applies it. In a notebook, rows are the cell's
and each edit names its `cell`."""

from __future__ import annotations

import json
from typing import Any

from cglint.diagnostics import FileResult


def render(results: list[FileResult], runtime: list[dict[str, Any]] | None = None, unsafe: bool = False) -> str:
    diagnostics = [d.to_dict(unsafe, _edits(r, d) if d.fix is not None else None) for r in results for d in r.diagnostics]
    out: dict[str, Any] = {"version": 1, "diagnostics": diagnostics}
    if runtime is not None:  # without the plot data (`sample`), which only the HTML report draws
        out["runtime"] = [{k: v for k, v in r.items() if k != "sample"} for r in runtime]
    return json.dumps(out, indent=2) + "\n"


def _edits(result: FileResult, d: Any) -> list[dict[str, Any]]:
    known = getattr(d.fix, "json_edits", None)  # computed where the tree was (cglint.cache.strip)
    if known is not None:
        return known
    if getattr(d, "cell", None) is not None:  # a notebook's cell
        from cglint.fix import notebook_json_edits

        return notebook_json_edits(result, d)
    from cglint.fix import json_edits

    return json_edits(result.source, result.module, d.fix)
