"""`# noqa` suppressions: a bare `# noqa` silences every code on its line, `# noqa: CG005,CG002`
only those codes (as in flake8 and ruff)."""

from __future__ import annotations

import re

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?", re.IGNORECASE)
ALL = frozenset({"*"})


def suppressions(line: str) -> frozenset[str] | None:
    """Codes suppressed on a source line: None for none, ALL for a bare `# noqa`."""
    if "noqa" not in line.lower() or "#" not in line:
        return None
    match = _NOQA.search(line, line.index("#"))
    if match is None:
        return None
    codes = match.group("codes")
    if not codes:
        return ALL
    return frozenset(c.upper() for c in re.split(r"[\s,]+", codes) if c)


def is_suppressed(line: str, code: str) -> bool:
    codes = suppressions(line)
    return codes is not None and (codes is ALL or code in codes)
