"""Every rule's documented examples are tests: each INVALID must be flagged by that rule, and
no VALID may be. Adding an example to a rule module adds a test here."""

import libcst as cst
import pytest

from cglint.engine import lint_source
from cglint.rules import ALL_RULES

CASES = [
    pytest.param(rule, kind, i, code, id=f"{rule.code}-{kind}-{i}")
    for rule in ALL_RULES
    for kind, examples in (("invalid", rule.INVALID), ("valid", rule.VALID))
    for i, code in enumerate(examples)
]


@pytest.mark.parametrize("rule,kind,index,code", CASES)
def test_example(rule, kind, index, code):
    found = [d for d in lint_source(code, "example.py", [rule], prefilter=False).diagnostics if d.code == rule.code]
    if kind == "invalid":
        assert found, f"{rule.code} did not flag INVALID[{index}]"
        lines = code.splitlines()
        for d in found:
            assert 1 <= d.line <= max(1, len(lines))
    else:
        assert not found, f"{rule.code} flagged VALID[{index}]: {[d.message for d in found]}"


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_rule_is_documented(rule):
    assert len(rule.INVALID) >= 3 and len(rule.VALID) >= 3
    doc = rule.documentation()
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert section in doc, f"{rule.code} lacks {section}"
    # Examples other than CG000's own must parse, or they would test CG000 instead of the rule.
    if rule.code != "CG000":
        for code in rule.INVALID + rule.VALID:
            cst.parse_module(code)


def test_codes_are_unique_and_ordered():
    codes = [r.code for r in ALL_RULES]
    assert codes == sorted(set(codes))
    names = [r.name for r in ALL_RULES]
    assert len(names) == len(set(names))
