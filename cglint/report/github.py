"""`--output-format github`: GitHub Actions workflow commands, which the runner turns into
annotations on the pull request:

    ::error file=pkg/ops.py,line=9,col=31,endLine=9,endColumn=40,title=CG005 (output-derivative)::message

In a notebook the annotation goes on the `.ipynb` file, at the line of the file that holds the
cell's line (so it lands on that code in the file's diff), and the title names the cell and its
line: `title=CG005 (output-derivative) cell 3:4`.

Escaping follows the runner: in the message `%`, CR and LF become `%25`, `%0D`, `%0A`; in
property values `:` and `,` also become `%3A` and `%2C`.
"""

from __future__ import annotations

from cglint.diagnostics import FileResult


def escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def _in_notebook(result: FileResult, d, props: dict) -> dict:
    """Annotation properties for a finding in a notebook cell: lines of the `.ipynb` file."""
    nb = result.notebook
    start = nb.file_line(d.cell, d.line) if nb is not None else None
    end = nb.file_line(d.cell, d.end_line) if nb is not None else None
    title = f"{props['title']} cell {d.cell}:{d.line}"
    if start is None:
        return {"file": d.path, "title": title}
    # Columns are the cell's, not the file's (JSON escapes and indentation shift them): left out.
    return {"file": d.path, "line": start, "endLine": max(start, end or start), "title": title}


def render(results: list[FileResult], context=None) -> str:
    out = []
    for result in results:
        for d in result.diagnostics:
            command = "warning" if d.severity == "warning" else "error"
            props = {
                "file": d.path,
                "line": d.line,
                "col": d.column,
                "endLine": d.end_line,
                "endColumn": d.end_column,
                "title": f"{d.code} ({d.name})",
            }
            if d.cell is not None:
                props = _in_notebook(result, d, props)
            rendered = ",".join(f"{k}={escape_property(str(v))}" for k, v in props.items())
            out.append(f"::{command} {rendered}::{escape_data(f'{d.code} {d.message}')}\n")
    return "".join(out)
