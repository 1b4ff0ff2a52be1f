"""The default output: `path:line:col: CODE message` (`nb.ipynb:cell 3:4:9: ...` in a notebook) (`CODE [*]` when `--fix` can fix it), the
source line with a caret under the span, and a summary line."""

from __future__ import annotations

from typing import Any

from cglint.diagnostics import Diagnostic, FileResult
from cglint.source import split_lines


def render(results: list[FileResult], context=None) -> str:
    fixed = context.fixed if context is not None else 0
    unsafe = context.unsafe_fixes if context is not None else False
    out: list[str] = []
    files_with = 0
    total = 0
    for result in results:
        if not result.diagnostics:
            continue
        files_with += 1
        lines = split_lines(result.source)  # Python's line breaks, as the positions count them
        for d in result.diagnostics:
            if d.cell is not None:  # a notebook: the frame shows the cell's own lines
                from cglint.notebook import frame_lines

                lines = frame_lines(result, d)
            total += 1
            star = " [*]" if d.is_fixable(unsafe) else ""
            out.append(f"{d.location}: {d.code}{star} {d.message}")
            out.extend(_frame(d, lines))
            if d.runtime is not None:
                out.insert(len(out) - 1, f"  = runtime: {describe(d.runtime)}")
    runtime = context.runtime if context is not None else None
    if runtime:
        out.append("Runtime checks:")
        for r in runtime:
            against = f" vs {r['reference']}" if r.get("reference") else ""
            cell = f"cell {r['cell']}:" if r.get("cell") is not None else ""
            out.append(f"  {r['path']}:{cell}{r['line']}: {r['function']}: {r['verdict']}{against}: {r.get('detail') or ''}")
            if r.get("checked"):  # `cglint trace`: how the function was checked
                out.append(f"      ({r['checked']})")
        out.append("")
    out.extend(summary(results, fixed, unsafe, runtime))
    return "\n".join(out) + "\n"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{('es' if word.endswith('x') else 's') if n != 1 else ''}"


def summary(results: list[FileResult], fixed: int = 0, unsafe: bool = False, runtime=None) -> list[str]:
    """The closing lines, as ruff words them: counts, then what `--fix` could still do.
    `runtime`: the run's runtime verdicts (`--runtime=all` can find mismatches in functions no
    rule flagged: then not "All checks passed", which the exit status would contradict)."""
    diags = [d for r in results for d in r.diagnostics]
    total = len(diags)
    files_with = sum(1 for r in results if r.diagnostics)
    if fixed:
        lines = [f"Found {_plural(fixed + total, 'problem')} ({fixed} fixed, {total} remaining)."]
    elif total:
        lines = [f"Found {_plural(total, 'problem')} in {_plural(files_with, 'file')}."]
    else:
        failing = []
        if runtime:  # (imported only then: a plain run never loads the runtime's modules)
            from cglint.runtime.session import FAILING

            failing = [r for r in runtime if r.get("verdict") in FAILING]
        if failing:
            return [f"No static findings; {_plural(len(failing), 'runtime check')} failed "
                    f"({_plural(len(results), 'file')} checked)."]
        return [f"All checks passed ({_plural(len(results), 'file')} checked)."]
    fixable = sum(1 for d in diags if d.is_fixable(unsafe))
    hidden = 0 if unsafe else sum(1 for d in diags if d.is_fixable(True) and not d.is_fixable(False))
    hint = f"{_plural(hidden, 'hidden fix')} can be enabled with the `--unsafe-fixes` option" if hidden else ""
    if fixable:
        lines.append(f"[*] {fixable} fixable with the `--fix` option" + (f" ({hint})." if hint else "."))
    elif hint:
        lines.append(f"No fixes available ({hint}).")
    return lines


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
