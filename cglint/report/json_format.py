"""`--output-format json`: the object in DESIGN.md ("Output contract"). Each finding's `fix` is
null or `{"applicability", "message", "edits"}` (ruff's shape); `fixable` says whether this
run's `--fix` (with `--unsafe-fixes` when given) applies it. In a notebook, rows are the cell's
and each edit names its `cell`."""

from __future__ import annotations

import json
from typing import Any

from cglint.diagnostics import FileResult


def render(results: list[FileResult], runtime: list[dict[str, Any]] | None = None, unsafe: bool = False) -> str:
    from cglint.fix import json_edits

    from cglint import notebook

    diagnostics = [
        d.to_dict(unsafe, None if d.fix is None else notebook.json_edits(r, d) if d.cell is not None
                  else json_edits(r.source, r.module, d.fix))
        for r in results for d in r.diagnostics
    ]
    out: dict[str, Any] = {"version": 1, "diagnostics": diagnostics}
    if runtime is not None:
        out["runtime"] = runtime
    return json.dumps(out, indent=2) + "\n"
