"""`--output-format github`: GitHub Actions workflow commands, which the runner turns into
annotations on the pull request:

    ::error file=pkg/ops.py,line=9,col=31,endLine=9,endColumn=40,title=CG005 (output-derivative)::message

Escaping follows the runner: in the message `%`, CR and LF become `%25`, `%0D`, `%0A`; in
property values `:` and `,` also become `%3A` and `%2C`.
"""

from __future__ import annotations

from cglint.diagnostics import FileResult


def escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


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
            rendered = ",".join(f"{k}={escape_property(str(v))}" for k, v in props.items())
            out.append(f"::{command} {rendered}::{escape_data(f'{d.code} {d.message}')}\n")
    return "".join(out)
