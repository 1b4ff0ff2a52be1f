"""Terminal colour for the text and concise reports, in ruff's palette (bold red codes and
carets, cyan `[*]` and `help`, blue gutters). `enabled` is decided once per run by `wanted`."""

from __future__ import annotations

import os
from typing import TextIO

_CODES = {"bold": "1", "red": "91", "cyan": "96", "blue": "94", "green": "92", "yellow": "93"}


def wanted(choice: str, stream: TextIO) -> bool:
    """`--color auto|always|never`. `auto`: `NO_COLOR` (non-empty) turns colour off,
    `FORCE_COLOR` (non-empty) on, otherwise colour only on a terminal that is not `TERM=dumb`."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False


class Style:
    def __init__(self, enabled: bool = False) -> None:
        self.enabled = enabled

    def __call__(self, text: str, *names: str) -> str:
        if not self.enabled or not text:
            return text
        return f"\x1b[{';'.join(_CODES[n] for n in names)}m{text}\x1b[0m"
