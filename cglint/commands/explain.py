"""`cglint explain CODE` (`--explain`) and `cglint show rules` (`--list-rules`)."""

from __future__ import annotations

import sys

from cglint.commands.common import EXIT_CLEAN, fail


def explain(wanted: str) -> int:
    """A rule's documentation, by code or by the name every report shows next to it (`output-derivative`)."""
    from cglint.rules import CODES, OPT_IN, rules

    if wanted.strip().lower() == "runtime":  # a topic, not a rule: the verdicts and "off by N%"
        from cglint.gradcheck.report import EXPLAIN

        sys.stdout.write(EXPLAIN)
        return EXIT_CLEAN
    found = [r for r in rules([*CODES, *OPT_IN]) if wanted.strip().upper() == r.code or wanted.strip().lower() == r.name]
    if not found:
        return fail(f"unknown rule code or name: {wanted!r} (see --list-rules; `--explain runtime` explains "
                    "runtime verdicts)")
    sys.stdout.write(found[0].documentation())
    return EXIT_CLEAN


def list_rules() -> int:
    """Every rule: code, name, summary."""
    from cglint.rules import RULES_BY_CODE
    from cglint.rules.cg100_unused_noqa import UnusedNoqa

    for rule in [*RULES_BY_CODE.values(), UnusedNoqa]:
        print(f"{rule.code}  {rule.name:<30} {rule.summary}")
    return EXIT_CLEAN
