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


# Other linters' spellings (flake8, ruff's older ones, pylint) whose names alone lead nowhere.
_ELSEWHERE = {"--format": "--output-format", "--json": "--output-format json", "--extend-ignore": "--ignore",
              "--html": "--output-format html --output-file", "--report": "--output-format html --output-file"}


def _tip(parser: argparse.ArgumentParser, message: str) -> str:
    if not message.startswith("unrecognized arguments: "):
        return "\n"
    unknown = message.split(": ", 1)[1].split()[0]
    if not unknown.startswith("-"):  # a second positional where none is taken (trace)
        return "\n"
    options = [o for a in parser._actions for o in a.option_strings if a.help != argparse.SUPPRESS]
    similar = _similar(unknown.split("=", 1)[0], options)
    if similar:
        return f"\n  tip: a similar option exists: '{similar}'\n\n"
    setting = _setting(unknown.split("=", 1)[0].lstrip("-"))
    if setting:
        return f"\n  tip: '{unknown.split('=', 1)[0].lstrip('-')}' is a setting, not an option: set it under {setting}\n\n"
    return f"\n  tip: to pass '{unknown}' as a path, use '-- {unknown}'\n\n"


def _similar(name: str, options: list[str]) -> str | None:
    """The option meant by `name`: another tool's spelling of it, a close misspelling (difflib
    over the option names without their dashes, so `--json` is not `--version`), or one whose
    whole words begin or end it (`--config-file`: `--config`; `--timeout`: `--runtime-timeout`)."""
    if name in _ELSEWHERE and _ELSEWHERE[name].split()[0] in options:
        return _ELSEWHERE[name]
    longs = {o[2:]: o for o in options if o.startswith("--")}
    bare = name.lstrip("-")
    import difflib  # only for a mistyped option

    close = difflib.get_close_matches(bare, longs, n=1, cutoff=0.75)
    if close:
        return longs[close[0]]
    words = bare.split("-")
    by_words = [o for o in longs if o.split("-") == words[:len(o.split("-"))] and len(o.split("-")) < len(words)
                or len(o.split("-")) > len(words) and o.split("-")[-len(words):] == words]
    return longs[max(by_words, key=len)] if by_words else None


def _setting(name: str) -> str | None:
    """Where a configuration key named `name` goes (`per-file-ignores`: `[tool.cglint] in pyproject.toml`)."""
    from cglint.config import SETTING_NAMES

    for table, keys in SETTING_NAMES.items():
        if name in keys:
            return f"[{table}] in pyproject.toml"
    return None
