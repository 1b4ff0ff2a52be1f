"""`--output-format json`: the object in DESIGN.md ("Output contract")."""

from __future__ import annotations

import json
from typing import Any

from cglint.diagnostics import FileResult


def render(results: list[FileResult], runtime: list[dict[str, Any]] | None = None) -> str:
    out: dict[str, Any] = {"version": 1, "diagnostics": [d.to_dict() for r in results for d in r.diagnostics]}
    if runtime is not None:
        out["runtime"] = runtime
    return json.dumps(out, indent=2) + "\n"
