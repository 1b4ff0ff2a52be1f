"""ARCHITECTURE.md stays true: every package of cglint is named in it, every file or directory it
names exists, and the path of a file from the CLI to a diagnostic takes at most ten steps."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")


def test_every_package_is_named():
    packages = sorted(p.name for p in (ROOT / "cglint").iterdir() if (p / "__init__.py").is_file())
    assert [p for p in packages if f"cglint/{p}/" not in DOC] == []


def test_every_named_path_exists():
    named = set(re.findall(r"`(cglint/[\w/]+(?:\.py)?/?)", DOC)) | set(re.findall(r"`(tests/[\w/]+\.py)`", DOC))
    assert len(named) > 20
    assert sorted(p for p in named if not (ROOT / p).exists() and "NNN" not in p) == []


def test_the_flow_of_a_file_has_at_most_ten_steps():
    flow = DOC.split("## From `cglint path/` to a diagnostic", 1)[1].split("\n## ", 1)[0]
    steps = re.findall(r"^(\d+)\. `(cglint/[\w/]+\.py)`", flow, re.MULTILINE)
    assert [int(n) for n, _ in steps] == list(range(1, len(steps) + 1)) and 5 <= len(steps) <= 10
    assert all((ROOT / path).is_file() for _, path in steps)
