"""What a run knows beyond the file results, for the formatters (its own module: the formatters
import it and the package imports the formatters)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Context:
    root: Path = field(default_factory=Path.cwd)  # SARIF URIs are relative to it (%SRCROOT%)
    fixed: int = 0  # fixes applied by --fix
    unsafe_fixes: bool = False  # whether unsafe fixes count as applicable
    runtime: list[dict] | None = None  # --runtime's top-level verdicts (text and json show them)
    errors: int = 0  # paths that could not be checked (the summary must not say "All checks passed")
    quiet: bool = False  # -q: the findings, no summary
    color: bool = False  # ANSI colour (text and concise, on a terminal: report.style.wanted)
