"""The command line's argument parser: usage errors as ruff (clap) words them. Its own module,
so `cglint` and `cglint trace` share it without importing each other."""

from __future__ import annotations

import argparse
from typing import NoReturn

EXIT_ERROR = 2


class Parser(argparse.ArgumentParser):
    """A usage error in three lines, as ruff (clap) words it: the error, a tip, where to read
    more; not argparse's whole usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n{_tip(self, message)}"
                              f"For more information, try '{self.prog} --help'.\n")


def _tip(parser: argparse.ArgumentParser, message: str) -> str:
    if not message.startswith("unrecognized arguments: "):
        return "\n"
    unknown = message.split(": ", 1)[1].split()[0]
    if not unknown.startswith("-"):  # a second positional where none is taken (trace)
        return "\n"
    options = [o for a in parser._actions for o in a.option_strings if a.help != argparse.SUPPRESS]
    import difflib  # only for a mistyped option

    close = difflib.get_close_matches(unknown.split("=", 1)[0], options, n=1, cutoff=0.6)
    if close:
        return f"\n  tip: a similar option exists: '{close[0]}'\n\n"
    return f"\n  tip: to pass '{unknown}' as a path, use '-- {unknown}'\n\n"
