"""Suppression comments, as in ruff and flake8.

- `# noqa` at the end of the line a diagnostic points at silences every code there;
  `# noqa: CG005, CG002` (commas and/or spaces) only those codes.
- `# cglint: noqa` on a line of its own silences the whole file; `# cglint: noqa: CG005`
  silences those codes in the whole file. (`# flake8: noqa` is flake8's business: it does
  not silence cglint.)
- `# cglint: disable=CG005, CG002` on a line of its own silences those codes from there to a
  `# cglint: enable=CG005` (or the end of the file); at the end of a `def` line (or of the
  last line of its signature) it silences them in that whole function, decorators included;
  at the end of any other line, on that line. `disable=all` / `enable=all` for every code.
- `unused_noqa()` says which `# noqa: CODES` codes suppress nothing (`--report-unused-noqa`).
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
NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>" + _CODES + r"))?", re.IGNORECASE)
_FILE_NOQA = re.compile(r"^[ \t\f]*#\s*cglint\s*:\s*noqa\b(?P<rest>.*)$", re.IGNORECASE | re.MULTILINE)
# Matched against the rest of the comment stripped of blanks (blanks on both sides of an optional
# group would be split between them in every way: quadratic in a line of blanks).
_FILE_CODES = re.compile(r"(?::\s*(?P<codes>" + _CODES + r"))?\Z")
_ANY_NOQA = re.compile("noqa", re.IGNORECASE)
_BLOCK = re.compile(r"#\s*cglint\s*:\s*(?P<verb>disable|enable)\b\s*(?:=\s*(?P<codes>[A-Za-z0-9_\s,]*))?",
                    re.IGNORECASE)
_ANY_BLOCK = re.compile(r"cglint\s*:\s*(?:disable|enable)", re.IGNORECASE)
ALL = frozenset({"*"})
OWN_PREFIX = "CG"


def mentions_noqa(source: str) -> bool:
    return _ANY_NOQA.search(source) is not None


def suppressions(line: str) -> frozenset[str] | None:
    """Codes suppressed on a source line: None for none, ALL for a bare `# noqa`."""
    if "noqa" not in line.lower() or "#" not in line:
        return None
    match = NOQA.search(line, line.index("#"))
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
        codes = _FILE_CODES.match(match.group("rest").strip())
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
    return set(_comment_tokens(source))


# ---- `# cglint: disable=...` / `# cglint: enable=...` -----------------------------------


def block_suppressions(source: str) -> tuple[list[tuple[int, int, frozenset[str]]], list[tuple[int, str]]]:
    """The spans (first line, last line, codes; ALL for every code) that `# cglint: disable`
    comments silence, and (line, problem) for malformed ones."""
    if not _ANY_BLOCK.search(source):
        return [], []
    lines = split_lines(source)
    comments = _comment_tokens(source)
    open_: dict[str, int] = {}  # code (or "*") -> line its own-line `disable` opened at
    spans: list[tuple[int, int, frozenset[str]]] = []
    problems: list[tuple[int, str]] = []
    functions = None
    for number in sorted(comments):
        match = _BLOCK.search(comments[number])
        if match is None:
            continue
        raw = (match.group("codes") or "").strip()
        codes = ALL if raw.lower() == "all" else frozenset(_split(raw))
        if not codes:
            problems.append((number, f"`# cglint: {match.group('verb').lower()}` needs codes (`=CG005, CG002` or "
                                     "`=all`), ignored"))
            continue
        text = lines[number - 1] if number <= len(lines) else ""
        own_line = text.lstrip().startswith("#")
        keys = ["*"] if codes is ALL else sorted(codes)
        if match.group("verb").lower() == "enable":
            for key in (list(open_) if codes is ALL else keys):
                if key in open_:
                    start = open_.pop(key)
                    spans.append((start, number, ALL if key == "*" else frozenset([key])))
            continue
        if own_line:
            for key in keys:
                open_.setdefault(key, number)
            continue
        if functions is None:
            functions = _function_spans(source)
        start, end = functions.get(number, (number, number))
        spans.append((start, end, codes))
    end_of_file = len(lines) + 1
    spans += [(start, end_of_file, ALL if key == "*" else frozenset([key])) for key, start in open_.items()]
    return spans, problems


# The last texts tokenized: file noqa, block suppressions and CG100 read the same module's
# comments in one lint, and tokenizing is the costliest step of each.
_tokenized: list[tuple[str, dict[int, str]]] = []


def _comment_tokens(source: str) -> dict[int, str]:
    """Line -> text of the comment on it (tokenized, so `#` inside strings does not count)."""
    for text, comments in _tokenized:
        if text is source or text == source:
            return comments
    out: dict[int, str] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source, newline=None).readline):
            if tok.type == tokenize.COMMENT:
                out[tok.start[0]] = tok.string
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    _tokenized[:] = [(source, out), *_tokenized[:1]]
    return out


def _function_spans(source: str) -> dict[int, tuple[int, int]]:
    """Each line of a `def` signature (the `def` line through the line before its body) ->
    the function's first line (its first decorator) and last line."""
    import ast

    from cglint.source import first_line, python_ast

    try:
        tree = python_ast(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    out: dict[int, tuple[int, int]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = first_line(node)
            body_start = node.body[0].lineno
            span = (first, node.end_lineno or node.lineno)
            for line in range(node.lineno, max(body_start, node.lineno + 1)):
                out.setdefault(line, span)
            if body_start == node.lineno:  # `def f(x): return x` on one line
                out.setdefault(node.lineno, span)
    return out


def _in_blocks(d: Diagnostic, spans: list[tuple[int, int, frozenset[str]]]) -> bool:
    return any(start <= d.line <= end and (codes is ALL or d.code in codes) for start, end, codes in spans)


# ---- applying them -------------------------------------------------------------------------


def apply(diags: list[Diagnostic], source: str, known: Iterable[str], line_noqa: bool = True
          ) -> tuple[list[Diagnostic], list[str]]:
    """Drop suppressed diagnostics; return the rest (sorted) and warnings
    (`line: text`) about unknown codes and malformed directives. `line_noqa=False` leaves
    line `# noqa` comments to the host (flake8 applies them itself); file-level and block
    directives still apply: the one suppression path for the CLI, the editor and flake8."""
    known = set(known)
    warnings: list[str] = []
    file_level, problems = file_suppressions(source)
    warnings += [f"{line}: {text}" for line, text in problems]
    blocks, problems = block_suppressions(source)
    warnings += [f"{line}: {text}" for line, text in problems]
    for _, _, codes in blocks:
        for code in sorted(c for c in codes if codes is not ALL and c.startswith(OWN_PREFIX) and c not in known):
            warnings.append(f"unknown rule code {code!r} in `# cglint: disable`, ignored")
    if file_level is not None and file_level is not ALL:
        for code in sorted(c for c in file_level if c.startswith(OWN_PREFIX) and c not in known):
            warnings.append(f"unknown rule code {code!r} in `# cglint: noqa`, ignored")
    lines = split_lines(source)
    if line_noqa and _ANY_NOQA.search(source):
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
        if line_noqa and d.line <= len(lines) and is_suppressed(lines[d.line - 1], d.code):
            continue
        if blocks and _in_blocks(d, blocks):
            continue
        kept.append(d)
    return sorted(kept, key=lambda d: (d.line, d.column, d.code)), sorted(set(warnings), key=warnings.index)


def unused_noqa(source: str, diags: Iterable[Diagnostic], checked: Iterable[str], known: Iterable[str]
                ) -> list[tuple[int, list[str], list[str]]]:
    """`# noqa: CODES` codes that suppress nothing, as ruff's RUF100: (line, unused codes,
    unknown codes) for each line with some. `diags` are the findings before suppression;
    only codes of rules that ran (`checked`) can be unused, and unknown `CG` codes always are.
    A bare `# noqa` and other tools' codes are not cglint's to judge."""
    if not _ANY_NOQA.search(source):
        return []
    checked, known = set(checked), set(known)
    found: dict[int, set[str]] = {}
    for d in diags:
        found.setdefault(d.line, set()).add(d.code)
    comments = _comment_tokens(source)
    out = []
    for number, comment in sorted(comments.items()):
        codes = suppressions(comment)
        if not codes or codes is ALL:
            continue
        here = found.get(number, set())
        unused = [c for c in _ordered(comment) if c in checked and c not in here]
        unknown = [c for c in _ordered(comment) if c.startswith(OWN_PREFIX) and c not in known]
        if unused or unknown:
            out.append((number, unused, unknown))
    return out


def _ordered(comment: str) -> list[str]:
    match = NOQA.search(comment)
    return list(dict.fromkeys(_split(match.group("codes")))) if match and match.group("codes") else []


def without_codes(comment: str, drop: Iterable[str]) -> str:
    """The comment with `drop` removed from its `# noqa: ...` (the whole `# noqa` when no
    code is left); '' when nothing of the comment remains."""
    drop = {c.upper() for c in drop}
    match = NOQA.search(comment)
    if match is None or not match.group("codes"):
        return comment
    kept = [c for c in re.split(r"[\s,]+", match.group("codes")) if c and c.upper() not in drop]
    before, after = comment[:match.start()], comment[match.end():]
    middle = f"# noqa: {', '.join(kept)}" if kept else ""
    text = (before.rstrip() + ("  " if before.strip() and middle else "") + middle + after).rstrip()
    return text if text.strip() not in ("", "#") else ""


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
    lines = split_lines(source, keepends=True) if lines is None else lines
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
        match = NOQA.search(text, text.index("#"))
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
