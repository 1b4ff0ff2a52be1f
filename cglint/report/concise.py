"""`--output-format concise`: one line per finding, `path:line:col: CODE [*] title`
(`path:cell N:line:col` in a notebook; the title is the message's first line) and, with
`--runtime`, ` = runtime: <verdict on this finding>`; then one line per runtime check
(`path:line: function: verdict vs reference: detail`, as the text format lists them) and the
summary as in the text format (for grep, editors' problem matchers, and CI logs)."""

from __future__ import annotations

from cglint.diagnostics import FileResult
from cglint.report.style import Style
from cglint.report.text import heading, runtime_entry, summary


def render(results: list[FileResult], context=None) -> str:
    from cglint.report.context import Context

    context = context or Context()
    style = Style(context.color)
    lines = [heading(d, context.unsafe_fixes, style, " ".join(d.title.split())) + _verdict(d)
             for r in results for d in r.diagnostics]
    for r in context.runtime or []:
        lines.append(" ".join(runtime_entry(r).split()) + (f" ({' '.join(r['checked'].split())})" if r.get("checked")
                                                             else ""))
    if not context.quiet:
        lines += summary(results, context.fixed, context.unsafe_fixes, context.runtime, context.errors, style)
    return "".join(line + "\n" for line in lines)


def _verdict(d) -> str:
    if d.runtime is None:
        return ""
    from cglint.gradcheck.report import describe

    return " = runtime: " + " ".join(describe(d.runtime).split())
