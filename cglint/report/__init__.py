"""Output formats. Each formatter takes the file results (and a `Context` with what the run
knows beyond them) and returns the text to print."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable, Optional

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


FORMAT_NAMES = ("text", "concise", "json", "sarif", "github", "junit", "gitlab")


# Formats a person reads on a terminal. JSON, SARIF and GitLab escape control characters
# themselves; JUnit replaces the ones XML cannot carry.
_FOR_TERMINALS = frozenset({"text", "concise", "github"})

# C0 and C1 control characters but tab and newline, DEL, and the bidirectional overrides
# ("Trojan source"): linted code, file names and cache entries must not drive the terminal.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


# The colour sequences report.style writes (and nothing else: no cursor moves, erasing, titles).
_OWN_COLOUR = re.compile("(\x1b\\[(?:[019][0-9]?)(?:;[019][0-9]?)*m)")


def printable(text: str, colour: bool = False) -> str:
    """`text` with every control character shown escaped (`\\x1b`), tab and newline kept;
    with `colour`, the SGR colour sequences of report.style are kept as they are."""
    if colour:
        parts = _OWN_COLOUR.split(text)  # odd indexes: the colour sequences
        return "".join(p if i % 2 else printable(p) for i, p in enumerate(parts))
    return _CONTROLS.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def render(fmt: str, results: list[FileResult], context: Context | None = None) -> str:
    context = context or Context()
    text = _formatter(fmt)(results, context)
    return printable(text, colour=context.color) if fmt in _FOR_TERMINALS else text
