"""Text and positions as the language server protocol sees them, without pygls.

LSP lines end at `\\n`, `\\r\\n` or `\\r` (the same breaks libcst and Python use; not
`str.splitlines`, which also breaks at form feeds and U+2028), and a column counts code units
of the negotiated position encoding: UTF-16 unless client and server agree on UTF-8 or UTF-32.
cglint's diagnostics count code points, so every position crosses `LineIndex`.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from cglint import noqa
from cglint.source import common_ends

UTF8, UTF16, UTF32 = "utf-8", "utf-16", "utf-32"
_EOL = re.compile(r"\r\n|\r|\n")


def units(text: str, encoding: str) -> int:
    """Length of `text` in code units of `encoding`."""
    if encoding == UTF32 or text.isascii():
        return len(text)
    if encoding == UTF8:
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def code_points(line: str, count: int, encoding: str) -> int:
    """How many code points of `line` the first `count` code units cover (clamped to the
    line; a count inside a character rounds up past it)."""
    if encoding == UTF32 or line.isascii():
        return max(0, min(count, len(line)))
    seen = 0
    for i, char in enumerate(line):
        if seen >= count:
            return i
        seen += units(char, encoding)
    return len(line)


@dataclass(frozen=True)
class Position:
    line: int  # 0-based
    character: int  # code units of the negotiated encoding


class LineIndex:
    """Offsets <-> LSP positions for one text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in _EOL.finditer(text)]

    def line(self, number: int) -> str:
        """Line `number` (0-based) without its line break; '' past the end."""
        if not 0 <= number < len(self.starts):
            return ""
        start = self.starts[number]
        end = self.starts[number + 1] if number + 1 < len(self.starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")

    def offset(self, position: Position, encoding: str) -> int:
        """The string offset of an LSP position, clamped into the text as the spec asks."""
        if position.line >= len(self.starts):
            return len(self.text)
        if position.line < 0:
            return 0
        line = self.line(position.line)
        return self.starts[position.line] + code_points(line, position.character, encoding)

    def unit_offset(self, position: Position) -> tuple[int, bool]:
        """`offset` for UTF-16 positions, exact: (offset, True) when the position falls between
        the two code units of the astral character at `offset`."""
        if position.line >= len(self.starts):
            return len(self.text), False
        if position.line < 0:
            return 0, False
        start = self.starts[position.line]
        line = self.line(position.line)
        seen = 0
        for i, char in enumerate(line):
            if seen >= position.character:
                return start + i, False
            width = 2 if ord(char) > 0xFFFF else 1
            if seen + width > position.character:
                return start + i, True
            seen += width
        return start + len(line), False

    def position(self, offset: int, encoding: str) -> Position:
        offset = max(0, min(offset, len(self.text)))
        number = bisect_right(self.starts, offset) - 1
        start = self.starts[number]
        return Position(number, units(self.text[start:offset], encoding))

    def from_cglint(self, line: int, column: int, encoding: str) -> Position:
        """A cglint position (1-based line, 1-based code-point column) as an LSP position,
        clamped to the text (a parse error may point one past the last line or column)."""
        number = line - 1
        if number >= len(self.starts):
            last = len(self.starts) - 1
            return Position(last, units(self.line(last), encoding))
        number = max(number, 0)
        text = self.line(number)
        return Position(number, units(text[: max(column - 1, 0)], encoding))


def too_large(text: str) -> str | None:
    """Why a buffer is over the limit for one file (the CLI's, `files.MAX_FILE_BYTES` of UTF-8),
    or None. An editor's buffer is linted as a file would be: one CG000, never parsed."""
    from cglint.files import MAX_FILE_BYTES

    if len(text) * 4 <= MAX_FILE_BYTES or len(text.encode("utf-8", "surrogatepass")) <= MAX_FILE_BYTES:
        return None
    return f"more than {MAX_FILE_BYTES // 2**20} MB, cglint's limit for one file"


def apply_change(text: str, start: Position, end: Position, new_text: str, encoding: str) -> str:
    """An incremental `didChange` applied to `text`. In UTF-16 a position may fall between the
    two halves of a surrogate pair: the edit splits the pair there, as it does in the client's
    own (UTF-16) text, and halves that meet again make one character again; rounding the
    position instead would leave server and client holding different texts from then on."""
    index = LineIndex(text)
    if encoding != UTF16 or text.isascii():
        a, b = index.offset(start, encoding), index.offset(end, encoding)
        if b < a:
            a, b = b, a
        return text[:a] + new_text + text[b:]
    (a, a_half), (b, b_half) = index.unit_offset(start), index.unit_offset(end)
    if (b, b_half) < (a, a_half):
        (a, a_half), (b, b_half) = (b, b_half), (a, a_half)
    head, tail = text[:a], text[b:]
    if a_half:  # keep the high surrogate of the character the edit starts inside
        head += _halves(text[a])[0]
    if b_half:  # and the low surrogate of the one it ends inside
        tail = _halves(text[b])[1] + tail[1:]
    # Rejoin at the seams: a high surrogate followed by a low one is one character.
    left, right = (head[-1:] if _is_surrogate(head[-1:]) else ""), (tail[:1] if _is_surrogate(tail[:1]) else "")
    middle = left + new_text + right
    if left or right or not middle.isascii():
        middle = middle.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return head[: len(head) - len(left)] + middle + tail[len(right):]


def _halves(char: str) -> tuple[str, str]:
    """The two surrogates of an astral character, as two code points."""
    value = ord(char) - 0x10000
    return chr(0xD800 + (value >> 10)), chr(0xDC00 + (value & 0x3FF))


def _is_surrogate(char: str) -> bool:
    return len(char) == 1 and 0xD800 <= ord(char) <= 0xDFFF


def line_edit(old: str, new: str) -> tuple[int, int, str] | None:
    """The smallest whole-line replacement turning `old` into `new`: (start offset, end offset,
    replacement), or None when they are equal. Whole lines keep the edit readable in an
    editor's preview and never split a character."""
    if old == new:
        return None
    prefix, suffix = common_ends(old, new)
    # Widen to whole lines of `old`. The text before `start` and after `end` is the same in
    # `new`, so the replacement is `new` between those two anchors.
    starts = LineIndex(old).starts
    start = starts[bisect_right(starts, prefix) - 1]
    end = len(old) - suffix
    line_no = bisect_right(starts, end) - 1
    if starts[line_no] != end:
        end = starts[line_no + 1] if line_no + 1 < len(starts) else len(old)
    tail = len(old) - end
    return start, end, new[start:len(new) - tail]


def noqa_edit(source: str, line: int, code: str) -> tuple[int, int, str] | None:
    """The edit adding `code` to the `# noqa` of 1-based `line`: `cglint.noqa.noqa_edit`, the
    one place `--add-noqa` and the editor write a `# noqa`."""
    return noqa.noqa_edit(source, line, [code])


def noqa_code_at(line_text: str, column: int) -> tuple[str, int, int] | None:
    """The rule code under code-point `column` inside a `# noqa: ...` comment of `line_text`:
    (code, start column, end column), or None."""
    if "#" not in line_text:
        return None
    match = noqa.NOQA.search(line_text, line_text.index("#"))
    if match is None or not match.group("codes"):
        return None
    base = match.start("codes")
    for code in re.finditer(r"(?<![A-Za-z])[A-Za-z]+[0-9]+", match.group("codes")):
        start, end = base + code.start(), base + code.end()
        if start <= column <= end:
            return code.group().upper(), start, end
    return None


def fs_path(uri: str) -> str | None:
    """The file a document URI names, or None (an `untitled:` buffer, or a URI that maps to
    no usable path, like `file:///a/%00/b.py`): such a buffer is linted without a path."""
    if not uri.startswith("file:"):
        return None
    try:
        from pygls.uris import to_fs_path

        path = to_fs_path(uri)
    except Exception:  # noqa: BLE001 - whatever the client sent
        return None
    return path if path and "\0" not in path else None
