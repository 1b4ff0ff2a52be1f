"""`--output-format gitlab`: a GitLab Code Quality report (the Code Climate issue format GitLab
reads from a `codequality` artifact): a JSON array with one object per finding,

    {"description": "CG005: ...", "check_name": "CG005", "fingerprint": "…",
     "severity": "major", "location": {"path": "pkg/ops.py", "lines": {"begin": 9, "end": 9}}}

`path` is relative to the repository root (as SARIF's URIs are); the `fingerprint` is the
baseline key (path, code, hash of the line's normalised text, occurrence), so it survives lines
moving and GitLab does not report a moved finding as fixed-and-new. Severities: CG errors are
`major`, warnings `minor`, infos `info`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cglint.diagnostics import FileResult

SEVERITY = {"error": "major", "warning": "minor", "info": "info"}


def _lines(result: FileResult, d) -> dict:
    """The finding's lines in the file; in a notebook, the lines of the `.ipynb` that hold
    the cell's code (where the merge request's diff shows it), else the cell's own."""
    begin, end = d.line, max(d.end_line, d.line)
    nb = result.notebook
    if d.cell is not None and nb is not None:
        begin, end = nb.file_line(d.cell, d.line) or begin, nb.file_line(d.cell, end) or end
    return {"begin": begin, "end": max(begin, end)}


def render(results: list[FileResult], context=None) -> str:
    from cglint.baseline import fingerprints, relative
    from cglint.report.context import Context

    context = context or Context()
    root = Path(os.path.abspath(context.root))
    issues = []
    for result in results:
        for d, fingerprint in zip(result.diagnostics, fingerprints(result, root)):
            issues.append({
                "type": "issue",
                "description": f"{d.code}: {' '.join(d.message.split())}",
                "check_name": d.code,
                "categories": ["Bug Risk"],
                "fingerprint": fingerprint,
                "severity": SEVERITY.get(d.severity, "minor"),
                "location": {"path": relative(d.path, root), "lines": _lines(result, d)},
            })
    return json.dumps(issues, indent=2) + "\n"
