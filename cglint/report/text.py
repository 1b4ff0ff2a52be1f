"""The default output: `path:line:col: CODE message`, the source line with a caret under the
span, and a summary line."""

from __future__ import annotations

from typing import Any

from cglint.diagnostics import Diagnostic, FileResult


def render(results: list[FileResult], runtime: list[dict[str, Any]] | None = None) -> str:
    out: list[str] = []
    files_with = 0
    total = 0
    for result in results:
        if not result.diagnostics:
            continue
        files_with += 1
        lines = result.source.splitlines()
        for d in result.diagnostics:
            total += 1
            out.append(f"{d.path}:{d.line}:{d.column}: {d.code} {d.message}")
            out.extend(_frame(d, lines))
            if d.runtime is not None:
                out.insert(len(out) - 1, f"  = runtime: {describe(d.runtime)}")
    if runtime:
        out.append("Runtime checks:")
        for r in runtime:
            against = f" vs {r['reference']}" if r.get("reference") else ""
            out.append(f"  {r['path']}:{r['line']}: {r['function']}: {r['verdict']}{against}: {r.get('detail') or ''}")
        out.append("")
    if total:
        out.append(f"Found {total} problem{'s' if total != 1 else ''} in {files_with} file{'s' if files_with != 1 else ''}.")
    else:
        checked = len(results)
        out.append(f"All checks passed ({checked} file{'s' if checked != 1 else ''} checked).")
    return "\n".join(out) + "\n"


def describe(summary: dict[str, Any]) -> str:
    from cglint.runtime.session import describe as words

    return words(summary)


def _frame(d: Diagnostic, lines: list[str]) -> list[str]:
    if not 1 <= d.line <= len(lines):
        return []
    src = lines[d.line - 1].expandtabs(1)  # tabs count one column, as in the positions
    gutter = f"{d.line:>4} | "
    start = d.column - 1
    end = d.end_column - 1 if d.end_line == d.line else len(src.rstrip())
    width = max(1, end - start)
    return [gutter + src, " " * (len(gutter) + start) + "^" * width, ""]
