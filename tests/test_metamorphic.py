"""Refactorings must not change a finding (tests/metamorphic.py): every rule's INVALID and VALID
examples, rewritten as real code is written (helpers or the custom-gradient functions split into
a sibling module under each import form, a re-export through `__init__`, a star import, every
local renamed, the decorator aliased, the call form, a `functools.wraps` wrapper, a
staticmethod), keep their verdict: INVALID variants keep their finding, VALID ones stay clean.
The matrix is printed (`pytest -s`, or `python -m tests.metamorphic`)."""

from __future__ import annotations

import pytest

from tests.metamorphic import matrix, render

# The share of INVALID variants that keep their finding. Calls in another module than the
# custom-gradient function are judged at the call (CG007, CG008, CG015, CG016); what is left is
# mostly a caller the prefilter skips (no custom gradient named, no keyword call) and a forward
# wrapped by `tf.custom_gradient(f)` in another module than its def.
KEPT = 0.95


@pytest.fixture(scope="module")
def result():
    table, failures = matrix()
    print("\n" + render(table))
    return table, failures


def test_valid_variants_stay_clean(result):
    table, failures = result
    flagged = [f for f in failures if f[1] == "valid"]
    assert not flagged, flagged


def test_invalid_variants_keep_their_finding(result):
    table, failures = result
    kept = sum(c[0] for c in table.values())
    applicable = sum(c[1] for c in table.values())
    assert applicable > 600
    assert kept / applicable >= KEPT, (kept, applicable, [f for f in failures if f[1] == "invalid"])
