"""What every command shares: exit codes, and one-line errors, warnings and notes on stderr."""

from __future__ import annotations

import sys

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def fail(message: str) -> int:
    from cglint.escape import printable  # file names and messages may come from the tree

    print(f"cglint: error: {printable(message)}", file=sys.stderr)
    return EXIT_ERROR


def warn(message: str) -> None:
    from cglint.escape import printable

    print(f"cglint: warning: {printable(message)}", file=sys.stderr)


def note(args, message: str) -> None:
    """A line about the run (not a finding) on stderr; -q leaves it out."""
    if not args.quiet:
        print(message, file=sys.stderr)


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def why(exc: OSError) -> str:
    from cglint import files

    return files.why(exc)


def with_unused_noqa(rules, args):
    """--report-unused-noqa: CG100 joins the rules (the engine runs it after the others), as
    `--extend-select CG100` makes it join them."""
    if not args.report_unused_noqa or "CG100" in rules:
        return rules
    from cglint.rules.cg100_unused_noqa import UnusedNoqa

    return [*rules, UnusedNoqa]
