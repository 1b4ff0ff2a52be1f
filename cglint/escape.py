"""Text from the checkout (file names, messages quoting code, cache entries) as cglint prints
it: control characters escaped, so that linted code cannot drive the terminal. A leaf module,
so that configuration warnings and the formatters escape alike."""

from __future__ import annotations

import re

# C0 and C1 control characters but tab and newline, DEL, and the bidirectional overrides
# ("Trojan source"): linted code, file names and cache entries must not drive the terminal.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


# The colour sequences report.style writes (and nothing else: no cursor moves, erasing, titles).
_OWN_COLOUR = re.compile("(\x1b\\[(?:[019][0-9]?)(?:;[019][0-9]?)*m)")


def printable(text: str, colour: bool = False) -> str:
    """`text` with every control character shown escaped (`\\x1b`), tab and newline kept;
    with `colour`, the SGR colour sequences of report.style are kept as they are."""
    if colour:
        parts = _OWN_COLOUR.split(text)  # odd indexes: the colour sequences
        return "".join(p if i % 2 else printable(p) for i, p in enumerate(parts))
    return _CONTROLS.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)
