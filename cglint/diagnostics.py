"""What rules report and what the engine hands to the formatters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import libcst as cst


@dataclass
class Finding:
    """A rule's report, before the engine turns the node into a position."""

    node: cst.CSTNode
    message: str


@dataclass
class Diagnostic:
    path: str
    line: int  # 1-based
    column: int  # 1-based
    end_line: int
    end_column: int  # 1-based, exclusive
    code: str
    name: str
    severity: str
    message: str
    fixable: bool = False
    runtime: dict[str, Any] | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "message": self.message,
            "fixable": self.fixable,
        }
        if self.runtime is not None:
            out["runtime"] = self.runtime
        return out


@dataclass
class FileResult:
    path: str
    source: str
    diagnostics: list[Diagnostic]
    parsed: bool  # False when the prefilter skipped the file or it did not parse
