"""Output formats. Each formatter takes the file results (and a `Context` with what the run
knows beyond them) and returns the text to print."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

if TYPE_CHECKING:  # diagnostics imports libcst; `cglint --version` and `--help` need not pay for it
    from cglint.diagnostics import FileResult


@dataclass
class Context:
    root: Path = field(default_factory=Path.cwd)  # SARIF URIs are relative to it (%SRCROOT%)
    fixed: int = 0  # fixes applied by --fix
    unsafe_fixes: bool = False  # whether unsafe fixes count as applicable
    runtime: list[dict] | None = None  # --runtime's top-level verdicts (text and json show them)
    errors: int = 0  # paths that could not be checked (the summary must not say "All checks passed")
    quiet: bool = False  # -q: the findings, no summary
    color: bool = False  # ANSI colour (text and concise, on a terminal: report.style.wanted)


Formatter = Callable[[list["FileResult"], Optional[Context]], str]


def _formatters() -> dict[str, Formatter]:
    from cglint.report import concise, github, gitlab, json_format, junit, sarif, text

    return {
        "text": text.render,
        "concise": concise.render,
        "json": lambda results, context=None: json_format.render(
            results, context.runtime if context else None, context.unsafe_fixes if context else False),
        "sarif": sarif.render,
        "github": github.render,
        "junit": junit.render,
        "gitlab": gitlab.render,
    }


FORMAT_NAMES = ("text", "concise", "json", "sarif", "github", "junit", "gitlab")


def render(fmt: str, results: list[FileResult], context: Context | None = None) -> str:
    return _formatters()[fmt](results, context or Context())
