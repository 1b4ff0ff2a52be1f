"""`--output-format concise`: one line per finding, `path:line:col: CODE [*] title`
(`path:cell N:line:col` in a notebook; the title is the message's first line), then the
summary as in the text format (for grep, editors' problem matchers, and CI logs)."""

from __future__ import annotations

from cglint.diagnostics import FileResult
from cglint.report.style import Style
from cglint.report.text import heading, summary


def render(results: list[FileResult], context=None) -> str:
    from cglint.report.context import Context

    context = context or Context()
    style = Style(context.color)
    lines = [heading(d, context.unsafe_fixes, style, " ".join(d.title.split()))
             for r in results for d in r.diagnostics]
    if not context.quiet:
        lines += summary(results, context.fixed, context.unsafe_fixes, context.runtime, context.errors, style)
    return "".join(line + "\n" for line in lines)
