"""What every command shares: exit codes, and one-line errors, warnings and notes on stderr."""

from __future__ import annotations

import os
import sys
import time

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


class Progress:
    """`cglint: 412/1202 files` on one line of an interactive terminal's stderr, redrawn at most
    ten times a second and erased when the run ends (or before a message), as the runtime's
    bar: a cold run over a large tree says it is working. Only made by `terminal_progress`."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.shown = 0.0
        self.drawn = False

    def __call__(self, done: int, total: int) -> None:
        if total < 2:  # one file is reported at once: a bar would only flicker before it
            return
        now = time.monotonic()
        if done < total and now - self.shown < 0.1 and self.drawn:
            return
        self.shown = now
        self.stream.write(f"\r\x1b[Kcglint: {done}/{total} files")
        self.stream.flush()
        self.drawn = True

    def clear(self) -> None:
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False


def terminal_progress(args) -> Progress | None:
    """A progress line for a report meant for people on a terminal: stderr an interactive
    terminal, not `-q`, a human output format (JSON and the other machine formats, pipes and
    CI logs get nothing extra)."""
    if args.quiet or args.output_format not in ("text", "concise") or os.environ.get("TERM") == "dumb":
        return None
    try:
        if not sys.stderr.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return Progress(sys.stderr)
