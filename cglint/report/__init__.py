"""Output formats. Each formatter takes the file results (and a `Context` with what the run
knows beyond them) and returns the text to print."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from cglint.report.context import Context

if TYPE_CHECKING:  # diagnostics imports libcst; `cglint --version` and `--help` need not pay for it
    from cglint.diagnostics import FileResult


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
