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


def render(results: list[FileResult], context=None) -> str:
    from cglint.baseline import fingerprints, relative
    from cglint.report import Context

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
                "location": {"path": relative(d.path, root),
                             "lines": {"begin": d.line, "end": max(d.end_line, d.line)}},
            })
    return json.dumps(issues, indent=2) + "\n"
