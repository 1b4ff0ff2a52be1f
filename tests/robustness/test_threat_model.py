"""docs/threat-model.md (linked from README) names, for each numbered promise, the tests that
prove it: every promise has its "Proved by:", and every test it names exists, so a renamed or
deleted test cannot leave a promise proved by nothing."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "threat-model.md"


def _promises(text: str) -> dict[str, str]:
    """Promise number -> its text (up to the next promise or section)."""
    parts = re.split(r"^(\d+)\. ", text, flags=re.MULTILINE)
    return {parts[i]: parts[i + 1].split("\n## ")[0] for i in range(1, len(parts) - 1, 2)}


def _references(text: str) -> list[tuple[str, str]]:
    """(file, test name) of every `tests/...py::name` and bare `::name` (of the file named
    last); a file named alone is (file, "") and must exist."""
    out, current = [], None
    for path, name in re.findall(r"`(tests/[\w/]+\.py)?(?:::(\w+))?`", text):
        if not path and not name:
            continue
        current = path or current
        out.append((current, name))
    return out


def test_every_promise_names_tests_that_exist():
    text = DOC.read_text()
    promises = _promises(text)
    assert len(promises) >= 17 and list(promises) == [str(i) for i in range(1, len(promises) + 1)], list(promises)
    unproved = [n for n, body in promises.items() if "Proved by:" not in body]
    assert unproved == [], unproved
    missing = []
    for n, body in promises.items():
        refs = _references(body)
        assert refs, f"promise {n} names no test"
        for path, name in refs:
            source = ROOT / path if path else None
            if source is None or not source.is_file() or name and not re.search(
                    rf"^(?:async )?def {re.escape(name)}\(", source.read_text(), re.MULTILINE):
                missing.append(f"promise {n}: {path}::{name}")
    assert missing == [], missing
