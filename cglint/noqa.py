"""Suppression comments, as in ruff and flake8.

- `# noqa` at the end of the line a diagnostic points at silences every code there;
  `# noqa: CG005, CG002` (commas and/or spaces) only those codes.
- `# cglint: noqa` on a line of its own silences the whole file; `# cglint: noqa: CG005`
  silences those codes in the whole file. (`# flake8: noqa` is flake8's business: it does
  not silence cglint.)
- Codes of other tools (`# noqa: E501, CG005`) are left to them. An unknown `CG` code is
  warned about and ignored, as ruff does: `# noqa: CG999` silences nothing.
- `noqa_edit()` is the one way a `# noqa` is written: `--add-noqa` (`add_noqa()`, for every
  current finding) and the language server's "Suppress" quick fix both use it.
"""

from __future__ import annotations

import io
import re
import tokenize
from typing import Iterable

from cglint.diagnostics import Diagnostic
from cglint.source import line_col, split_lines

_CODES = r"[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*"
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>" + _CODES + r"))?", re.IGNORECASE)
_FILE_NOQA = re.compile(r"^[ \t\f]*#\s*cglint\s*:\s*noqa\b(?P<rest>.*)$", re.IGNORECASE | re.MULTILINE)
_FILE_CODES = re.compile(r"\s*(?::\s*(?P<codes>" + _CODES + r"))?\s*\Z")
_ANY_NOQA = re.compile("noqa", re.IGNORECASE)
ALL = frozenset({"*"})
OWN_PREFIX = "CG"


def suppressions(line: str) -> frozenset[str] | None:
    """Codes suppressed on a source line: None for none, ALL for a bare `# noqa`."""
    if "noqa" not in line.lower() or "#" not in line:
        return None
    match = _NOQA.search(line, line.index("#"))
    if match is None:
        return None
    codes = match.group("codes")
    if not codes:
        return ALL
    return frozenset(_split(codes))


def is_suppressed(line: str, code: str) -> bool:
    codes = suppressions(line)
    return codes is not None and (codes is ALL or code in codes)


def _split(codes: str) -> list[str]:
    return [c.upper() for c in re.split(r"[\s,]+", codes) if c]


def file_suppressions(source: str) -> tuple[frozenset[str] | None, list[tuple[int, str]]]:
    """Codes the file-level `# cglint: noqa[: CODES]` comments silence (None for none, ALL for
    all), and (line, problem) for malformed ones."""
    if not _ANY_NOQA.search(source):
        return None, []
    found: set[str] = set()
    everything = False
    problems: list[tuple[int, str]] = []
    comment_lines = None
    for match in _FILE_NOQA.finditer(source):
        line = line_col(source, match.start())[0]
        if comment_lines is None:
            comment_lines = _comment_lines(source)
        if line not in comment_lines:  # inside a string: not a directive
            continue
        codes = _FILE_CODES.match(match.group("rest").rstrip("\r"))
        if codes is None:
            problems.append((line, "invalid `# cglint: noqa` directive (expected `# cglint: noqa` or "
                                   "`# cglint: noqa: CG001, CG005`), ignored"))
        elif codes.group("codes"):
            found.update(_split(codes.group("codes")))
        else:
            everything = True
    if everything:
        return ALL, problems
    return (frozenset(found) if found else None), problems


def _comment_lines(source: str) -> set[int]:
    """Lines on which a comment token starts (so `#` inside strings does not count)."""
    lines = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source, newline=None).readline):
            if tok.type == tokenize.COMMENT:
                lines.add(tok.start[0])
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return lines


def apply(diags: list[Diagnostic], source: str, known: Iterable[str]) -> tuple[list[Diagnostic], list[str]]:
    """Drop suppressed diagnostics; return the rest (sorted) and warnings
    (`line: text`) about unknown codes and malformed directives."""
    known = set(known)
    warnings: list[str] = []
    file_level, problems = file_suppressions(source)
    warnings += [f"{line}: {text}" for line, text in problems]
    if file_level is not None and file_level is not ALL:
        for code in sorted(c for c in file_level if c.startswith(OWN_PREFIX) and c not in known):
            warnings.append(f"unknown rule code {code!r} in `# cglint: noqa`, ignored")
    lines = split_lines(source)
    if _ANY_NOQA.search(source):
        for number, text in enumerate(lines, 1):
            codes = suppressions(text)
            if codes and codes is not ALL:
                for code in sorted(c for c in codes if c.startswith(OWN_PREFIX) and c not in known):
                    warnings.append(f"{number}: unknown rule code {code!r} in `# noqa`, ignored")
    if not diags:
        return diags, warnings
    kept = []
    for d in diags:
        if file_level is ALL or (file_level is not None and d.code in file_level):
            continue
        if d.line <= len(lines) and is_suppressed(lines[d.line - 1], d.code):
            continue
        kept.append(d)
    return sorted(kept, key=lambda d: (d.line, d.column, d.code)), warnings


# ---- --add-noqa ----------------------------------------------------------------------------


def add_noqa(source: str, diags: Iterable[Diagnostic]) -> tuple[str, int, list[int]]:
    """Append `# noqa: CODES` to each line a diagnostic points at, merging with an existing
    `# noqa: ...` (its codes, other tools' included, are kept first). Returns the new source,
    the number of lines changed, and lines that could not take a comment (they end inside a
    string or with a backslash continuation)."""
    wanted: dict[int, set[str]] = {}
    for d in diags:
        if d.code != "CG000":  # a file that does not parse cannot be annotated reliably
            wanted.setdefault(d.line, set()).add(d.code)
    if not wanted:
        return source, 0, []
    lines = split_lines(source, keepends=True)
    blocked = _lines_without_comment_room(source)
    changed, skipped = 0, []
    for number in sorted(wanted):
        if number > len(lines) or number in blocked:
            skipped.append(number)
            continue
        edit = noqa_edit(source, number, wanted[number], blocked=blocked, lines=lines)
        if edit is not None:
            raw = lines[number - 1]
            lines[number - 1] = raw[:edit[0]] + edit[2] + raw[edit[1]:]
            changed += 1
    return "".join(lines), changed, skipped


def noqa_edit(source: str, line: int, codes: Iterable[str], blocked: set[int] | None = None,
              lines: list[str] | None = None) -> tuple[int, int, str] | None:
    """The edit that makes 1-based `line` suppress `codes`: (start, end, replacement) in code
    points of that line. It appends `  # noqa: CODES`, or adds the missing codes to an existing
    `# noqa: ...` (its codes, other tools' included, stay first). None when nothing is needed
    (a bare `# noqa`, or every code listed already) or where a comment cannot go (the line ends
    inside a string or continues with a backslash)."""
    lines = source.splitlines(keepends=True) if lines is None else lines
    if not 1 <= line <= len(lines):
        return None
    if blocked is None:
        blocked = _lines_without_comment_room(source)
    if line in blocked:
        return None
    text = lines[line - 1].rstrip("\r\n")
    existing = suppressions(text)
    if existing is ALL:
        return None  # a bare `# noqa` silences everything already
    if existing is not None:
        missing = [c for c in sorted(set(codes)) if c not in existing]
        if not missing:
            return None
        match = _NOQA.search(text, text.index("#"))
        assert match is not None and match.group("codes")
        end = match.end("codes")
        return end, end, "".join(f", {c}" for c in missing)
    stripped = len(text.rstrip())
    return stripped, len(text), f"  # noqa: {', '.join(sorted(set(codes)))}"


def _lines_without_comment_room(source: str) -> set[int]:
    """Lines where appending `# ...` would change the program: inside a multi-line string
    (f-strings included) or ending with a backslash continuation."""
    blocked: set[int] = set()
    try:
        fstring_starts: list[int] = []
        for tok in tokenize.generate_tokens(io.StringIO(source, newline=None).readline):
            name = tokenize.tok_name.get(tok.type, "")
            if name == "FSTRING_START":
                fstring_starts.append(tok.start[0])
            elif name == "FSTRING_END" and fstring_starts:
                blocked.update(range(fstring_starts.pop(), tok.end[0]))
            elif tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                blocked.update(range(tok.start[0], tok.end[0]))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return set(range(1, len(split_lines(source)) + 2))
    for number, text in enumerate(split_lines(source), 1):
        if text.rstrip().endswith("\\"):
            blocked.add(number)
    return blocked
