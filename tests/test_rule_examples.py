"""Every rule's documented examples are tests, pinned as Fixit pins them: each INVALID states
where its findings start (line:col, so also how many) and what the rule's fixes write
(`Invalid(code, at=..., fixed=...)`); no VALID may be flagged. Adding an example to a rule
module adds a test here. A failing example prints its code and every finding on it."""

import libcst as cst
import pytest

from cglint.engine import lint_source
from cglint.fix import fix_source
from cglint.rules import ALL_RULES
from cglint.rules.base import Invalid

CASES = [
    pytest.param(rule, kind, i, code, id=f"{rule.code}-{kind}-{i}")
    for rule in ALL_RULES
    for kind, examples in (("invalid", rule.INVALID), ("valid", rule.VALID))
    for i, code in enumerate(examples)
]


def _report(code: str, rule) -> str:
    """The example with line numbers, then every finding of every rule on it."""
    numbered = "\n".join(f"{n:3} | {line}" for n, line in enumerate(code.splitlines(), 1))
    every = lint_source(code, "example.py", ALL_RULES, prefilter=False).diagnostics
    findings = "\n".join(
        f"  {d.line}:{d.column} {d.code} {'(fix: ' + d.fix.description + ')' if d.fix else ''} {d.message}" for d in every
    ) or "  (none)"
    return f"\n--- example ({rule.code}) ---\n{numbered}\n--- findings ---\n{findings}\n"


@pytest.mark.parametrize("rule,kind,index,code", CASES)
def test_example(rule, kind, index, code):
    found = [d for d in lint_source(code, "example.py", [rule], prefilter=False).diagnostics if d.code == rule.code]
    at = tuple(f"{d.line}:{d.column}" for d in found)
    if kind == "valid":
        assert not found, f"{rule.code} flagged VALID[{index}] at {at}" + _report(code, rule)
        return
    fixed = fix_source(code, "example.py", [rule], unsafe=True)
    new = fixed.new_source if fixed.changed else None
    assert isinstance(code, Invalid), (
        f"{rule.code} INVALID[{index}] is not pinned: write it as Invalid(code, at={at!r}, fixed=...)"
        + _report(code, rule) + ("" if new is None else f"--- its fix writes ---\n{new}"))
    assert at == code.at, f"{rule.code} INVALID[{index}]: findings at {at}, the example says {code.at}" + _report(code, rule)
    assert new == code.fixed, (
        f"{rule.code} INVALID[{index}]: the fix writes\n{new}\nthe example says\n{code.fixed}" + _report(code, rule))
    if new is not None:  # the rule's own fixes leave nothing for it to say
        left = [d for d in fixed.remaining if d.code == rule.code]
        assert not left, f"{rule.code} INVALID[{index}] still flagged after its fix" + _report(new, rule)


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


def test_a_wrong_pin_fails_and_shows_the_findings():
    """The pins can fail: a wrong position is reported with the code and every finding."""
    from cglint.rules import RULES_BY_CODE

    rule = RULES_BY_CODE["CG014"]
    good = rule.INVALID[0]
    wrong = Invalid(str(good), at="1:1", fixed=good.fixed)
    with pytest.raises(AssertionError) as info:
        test_example(rule, "invalid", 0, wrong)
    text = str(info.value)
    assert f"findings at ({good.at[0]!r},)" in text and "CG014" in text and "| import tensorflow as tf" in text
