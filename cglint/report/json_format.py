"""`--output-format json`: the object in DESIGN.md ("Output contract"). Each finding's `fix` is
null or `{"applicability", "message", "edits"}` (ruff's shape); `fixable` says whether this
run's `--fix` (with `--unsafe-fixes` when given) applies it."""

from __future__ import annotations

import json
from typing import Any

from cglint.diagnostics import FileResult


def render(results: list[FileResult], runtime: list[dict[str, Any]] | None = None, unsafe: bool = False) -> str:
    from cglint.fix import json_edits

    diagnostics = [
        d.to_dict(unsafe, json_edits(r.source, r.module, d.fix) if d.fix is not None else None)
        for r in results for d in r.diagnostics
    ]
    out: dict[str, Any] = {"version": 1, "diagnostics": diagnostics}
    if runtime is not None:
        out["runtime"] = runtime
    return json.dumps(out, indent=2) + "\n"
