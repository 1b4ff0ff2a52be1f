"""What rules report and what the engine hands to the formatters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import libcst as cst

if TYPE_CHECKING:
    from cglint.model import GradientSite


@dataclass
class Fix:
    """A rule's proposed change: replace each node (found by identity in the parsed module) by
    its replacement. `safe` fixes keep behaviour the user intended; unsafe ones need review."""

    edits: list[tuple[cst.CSTNode, cst.CSTNode]]
    safe: bool
    description: str

    def apply(self, module: cst.Module) -> cst.Module:
        return module.visit(_Replace(dict((id(old), new) for old, new in self.edits)))


class _Replace(cst.CSTTransformer):
    def __init__(self, by_id: dict[int, cst.CSTNode]) -> None:
        self.by_id = by_id

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        return self.by_id.get(id(original), updated)


@dataclass
class Finding:
    """A rule's report, before the engine turns the node into a position."""

    node: cst.CSTNode
    message: str
    fix: Fix | None = None
    # The custom-gradient site the finding is about (None for module-level findings such as
    # CG000 or CG013's unwrapped functions); `Rule.check` fills it in for `check_site` rules.
    site: GradientSite | None = None


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
    fix: Fix | None = field(default=None, compare=False, repr=False)

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
    module: cst.Module | None = field(default=None, repr=False)  # the parsed module, for fixes
    model: Any = field(default=None, repr=False)  # its ModuleModel, for the runtime planner
    # `line: text` notes about the file that are not findings (e.g. unknown codes in `# noqa`).
    warnings: list[str] = field(default_factory=list)
