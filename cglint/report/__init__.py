"""Output formats. Each formatter takes the file results (and a `Context` with what the run
knows beyond them) and returns the text to print."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from cglint.escape import printable  # noqa: F401 - the formatters' and hosts' name for it
from cglint.report.context import Context

if TYPE_CHECKING:  # diagnostics imports libcst; `cglint --version` and `--help` need not pay for it
    from cglint.diagnostics import FileResult


Formatter = Callable[[list["FileResult"], Optional[Context]], str]


def _formatter(fmt: str) -> Formatter:
    """The format's renderer, importing only its module (JUnit's XML library alone costs a
    one-file run as much as linting the file)."""
    import importlib

    if fmt not in FORMAT_NAMES:
        raise KeyError(fmt)
    module = importlib.import_module(f"cglint.report.{'json_format' if fmt == 'json' else fmt}")
    if fmt == "json":
        return lambda results, context=None: module.render(
            results, context.runtime if context else None, context.unsafe_fixes if context else False)
    return module.render


FORMAT_NAMES = ("text", "concise", "json", "sarif", "github", "junit", "gitlab", "html")


# Formats a person reads on a terminal. JSON, SARIF and GitLab escape control characters
# themselves; JUnit replaces the ones XML cannot carry.
_FOR_TERMINALS = frozenset({"text", "concise", "github"})

def render(fmt: str, results: list[FileResult], context: Context | None = None) -> str:
    context = context or Context()
    text = _formatter(fmt)(results, context)
    return printable(text, colour=context.color) if fmt in _FOR_TERMINALS else text
