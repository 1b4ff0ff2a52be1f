"""`--show-fixes`: what `--fix` changed (or `--diff` would change), per file and rule, in
ruff's words:

    Fixed 3 problems:
    - pkg/ops.py:
        2 × CG001 (nested-tf-function)
        1 × CG005 (output-derivative)
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable


def render(applied_by_file: Iterable[tuple[str, Iterable[tuple[str, str]]]], would: bool = False) -> str:
    """`applied_by_file`: (path, [(code, name) of each applied fix]) in report order."""
    files = [(path, Counter(fixes)) for path, fixes in applied_by_file]
    files = [(path, counts) for path, counts in files if counts]
    total = sum(sum(c.values()) for _, c in files)
    if not total:
        return ""
    verb = "Would fix" if would else "Fixed"
    out = [f"{verb} {total} problem{'s' if total != 1 else ''}:"]
    for path, counts in files:
        out.append(f"- {path}:")
        width = max(len(str(n)) for n in counts.values())
        for (code, name), n in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
            out.append(f"    {n:>{width}} × {code} ({name})")
    return "\n".join(out) + "\n\n"
