"""The default output, ruff's layout with the location first: `path:line:col: CODE [*] title`
(`nb.ipynb:cell 3:4:9: ...` in a notebook; `[*]` when `--fix` can fix it), the source line
with a caret under the span, the message's detail lines (what TensorFlow does, what to do),
`help: <fix>` and, for an unsafe fix, how to apply it; then a summary."""

from __future__ import annotations

import textwrap

from cglint.diagnostics import DISPLAY_ONLY, SAFE, TITLE_WIDTH, Diagnostic, FileResult
from cglint.gradcheck.report import describe
from cglint.report.style import Style
from cglint.source import split_lines


def render(results: list[FileResult], context=None) -> str:
    from cglint.report.context import Context

    context = context or Context()
    style = Style(context.color)
    out: list[str] = []
    for result in results:
        if not result.diagnostics:
            continue
        lines = split_lines(result.source)  # Python's line breaks, as the positions count them
        for d in result.diagnostics:
            if d.cell is not None:  # a notebook: the frame shows the cell's own lines
                from cglint.notebook import frame_lines

                lines = frame_lines(result, d)
            out.append(heading(d, context.unsafe_fixes, style))
            out.extend(_frame(d, lines, style))
            out.extend(f"  {line}" for line in detail_lines(d))
            if d.runtime is not None:
                out.append(f"  = runtime: {describe(d.runtime)}")
            out.extend(fix_lines(d, context.unsafe_fixes, style))
            out.append("")
    runtime = context.runtime
    if runtime:
        out.append("Runtime checks:")
        for r in runtime:
            out.append(f"  {runtime_entry(r)}")
            if r.get("checked"):  # `cglint trace`: how the function was checked
                out.append(f"      ({r['checked']})")
        out.append("")
    if not context.quiet:
        out.extend(summary(results, context.fixed, context.unsafe_fixes, runtime, context.errors, style))
    return "".join(line + "\n" for line in out)


def heading(d: Diagnostic, unsafe: bool, style: Style, title: str | None = None) -> str:
    """`path:line:col: CODE [*] title`: the finding's first line (text and concise)."""
    star = f" [{style('*', 'bold', 'cyan')}]" if d.is_fixable(unsafe) else ""
    return f"{style(d.location, 'bold')}: {style(d.code, 'bold', 'red')}{star} {title or d.title}"


def detail_lines(d: Diagnostic) -> list[str]:
    """The message after its title: one clause a line, wrapped (continuations indented)."""
    out: list[str] = []
    for clause in d.details:
        out.extend(textwrap.wrap(clause, TITLE_WIDTH, subsequent_indent="  ", break_long_words=False,
                                 break_on_hyphens=False))
    return out


def fix_lines(d: Diagnostic, unsafe: bool, style: Style) -> list[str]:
    """`help: <what the fix does>`, as ruff; a note says how to apply a fix `--fix` leaves."""
    if d.fix is None:
        return []
    out = [f"{style('help', 'bold', 'cyan')}: {d.fix.description}"] if d.fix.description else []
    if d.fix.applicability == DISPLAY_ONLY:
        out.append(f"{style('note', 'bold')}: shown only: no option applies this fix; make the change by hand")
    elif d.fix.applicability != SAFE:
        out.append(f"{style('note', 'bold')}: this is an unsafe fix (review it)"
                   + ("" if unsafe else ": apply it with `--fix --unsafe-fixes`"))
    return out


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{('es' if word.endswith('x') else 's') if n != 1 else ''}"


def runtime_entry(r: dict) -> str:
    """`path:line: function: verdict vs reference: detail`, one runtime check (text and concise)."""
    against = f" vs {r['reference']}" if r.get("reference") else ""
    cell = f"cell {r['cell']}:" if r.get("cell") is not None else ""
    return f"{r['path']}:{cell}{r['line']}: {r['function']}: {r['verdict']}{against}: {r.get('detail') or ''}"


def summary(results: list[FileResult], fixed: int = 0, unsafe: bool = False, runtime=None, errors: int = 0,
            style: Style | None = None) -> list[str]:
    """The closing lines, as ruff words them: counts, then what `--fix` could still do.
    `runtime`: the run's runtime verdicts (`--runtime=all` can find mismatches in functions no
    rule flagged: then not "All checks passed", which the exit status would contradict).
    `errors`: paths that could not be checked (named on stderr), likewise."""
    style = style or Style()
    diags = [d for r in results for d in r.diagnostics]
    total = len(diags)
    files_with = sum(1 for r in results if r.diagnostics)
    unchecked = [f"{_plural(errors, 'path')} could not be checked (see the errors above)."] if errors else []
    if fixed:
        lines = [f"Found {_plural(fixed + total, 'problem')} ({fixed} fixed, {total} remaining)."]
    elif total:
        lines = [f"Found {_plural(total, 'problem')} in {_plural(files_with, 'file')}."]
    else:
        failing = []
        if runtime:  # (imported only then: a plain run never loads the runtime's modules)
            from cglint.gradcheck.report import FAILING

            failing = [r for r in runtime if r.get("verdict") in FAILING]
        if failing:
            return [f"No static findings; {_plural(len(failing), 'runtime check')} failed "
                    f"({_plural(len(results), 'file')} checked)."] + unchecked
        if errors:
            return [f"No problems found in the {_plural(len(results), 'file')} checked; " + unchecked[0]]
        return [f"All checks passed ({_plural(len(results), 'file')} checked)."]
    fixable = sum(1 for d in diags if d.is_fixable(unsafe))
    hidden = 0 if unsafe else sum(1 for d in diags if d.is_fixable(True) and not d.is_fixable(False))
    hint = f"{_plural(hidden, 'hidden fix')} can be enabled with the `--unsafe-fixes` option" if hidden else ""
    if fixable:
        lines.append(f"[{style('*', 'bold', 'cyan')}] {fixable} fixable with the `--fix` option"
                     + (f" ({hint})." if hint else "."))
    elif hint:
        lines.append(f"No fixes available ({hint}).")
    return lines + unchecked


def _frame(d: Diagnostic, lines: list[str], style: Style) -> list[str]:
    if not 1 <= d.line <= len(lines):
        return []
    src = lines[d.line - 1].expandtabs(1)  # tabs count one column, as in the positions
    gutter = f"{d.line:>4} | "
    start = d.column - 1
    end = d.end_column - 1 if d.end_line == d.line else len(src.rstrip())
    width = max(1, end - start)
    return [style(gutter, "bold", "blue") + src, " " * (len(gutter) + start) + style("^" * width, "bold", "red")]
