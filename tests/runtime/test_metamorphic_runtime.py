"""Refactorings must not change a `--runtime` verdict: runtime fixtures (a wrong gradient, a right
one, a stop, a straight-through estimator over replayed random draws) rewritten as real code is
written (tests/metamorphic.py: locals renamed, the decorator aliased, the call form, a
`functools.wraps` wrapper, a staticmethod, the custom-gradient functions split into a sibling
module under each import form) keep their verdict, through the path `--runtime=all` takes (the
static plan, the child's input search and check), in this process. A measurement over the matrix
(`pytest -m benchmark`), as the static one is."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cglint.engine import lint_file
from cglint.runtime.child import check_one, import_by_path
from cglint.runtime.plan import plan_file
from tests.metamorphic import REFACTORINGS

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "runtime"
CASES = {"silu_beta.py": "mismatch", "dense_random_init.py": "match", "zero_grad_stop.py": "intentional",
         "stochastic_rounding.py": "intentional"}


def verdicts(files: dict[str, str], root: Path) -> dict[str, str] | None:
    """{function (last dotted part): verdict} over every module of the variant; None when the
    rewriting broke the module itself (a split that leaves a constant behind)."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for name in [m for m in sys.modules if m == "pkg" or m.startswith("pkg.")]:
        del sys.modules[name]  # each variant's package is its own
    out = {}
    for rel in files:
        result = lint_file(str(root / rel))
        planned = [p for p in plan_file(result, everything=True) if p.skip is None]
        if not planned:
            continue
        try:
            module = import_by_path(str(root / rel))
        except Exception:
            return None
        for p in planned:
            out[p.request["function"].split(".")[-1]] = check_one(module, result.source, p.request, seed=0)["verdict"]
    sys.path[:] = [p for p in sys.path if not p.startswith(str(root))]
    return out


@pytest.mark.parametrize("fixture", sorted(CASES))
def test_runtime_verdicts_survive_every_refactoring(fixture, tmp_path):
    code = (FIXTURES / fixture).read_text()
    base = verdicts({"pkg/__init__.py": "", "pkg/main.py": code}, tmp_path / "base")
    assert set(base.values()) == {CASES[fixture]}, base
    changed, ran = {}, 0
    for name, refactor in REFACTORINGS.items():
        files = refactor(code)
        got = None if files is None else verdicts(files, tmp_path / name.replace(":", "_"))
        if got is None:
            continue
        ran += 1
        if got != base:
            changed[name] = got
    print(f"{fixture}: {base} unchanged by {ran - len(changed)} of {ran} refactorings")
    assert ran >= 5 and not changed, (base, changed)
