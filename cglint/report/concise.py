"""`--output-format concise`: one line per finding, `path:line:col: CODE message` (`path:cell N:line:col`
in a notebook), nothing
else (for grep, editors' problem matchers, and CI logs)."""

from __future__ import annotations

from cglint.diagnostics import FileResult


def render(results: list[FileResult], context=None) -> str:
    lines = [
        f"{d.location}: {d.code} {_one_line(d.message)}" for r in results for d in r.diagnostics
    ]
    return "".join(line + "\n" for line in lines)


def _one_line(message: str) -> str:
    return " ".join(message.split())
