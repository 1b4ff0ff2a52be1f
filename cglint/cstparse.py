"""libcst's parse of a module, cheaper, with the same result (`Module.deep_equals` the plain
`libcst.parse_module`, same code, same nodes).

Parsing is most of a large module's lint (a 72,000-line module: ~9 s of ~16 s). Two costs
in it are not the parse itself:

- **Validation.** Every node libcst builds runs `CSTNode._validate` (`__post_init__`); on the
  parser's output for ASCII text that never fails, and it is ~17 % of the parse (libcst's own
  source notes that the parse should skip it). It is skipped while libcst builds the tree of
  an ASCII module, and only then.
- **Length.** libcst's native parser costs more per line the longer the module (whole: 7.8 s;
  the same module in pieces of ~200 lines: 5.4 s). A long module is cut between top-level
  statements (Python's parse says where they start; the tokenizer holds no state there: no
  open bracket, string or continuation, indentation 0), each piece parsed alone, and the
  pieces' statements joined into one Module, a piece's leading blank and comment lines (its
  header) moved to its first statement as a whole parse places them. Whatever does not line up (a
  piece that does not parse alone, pieces whose inferred indentation or newline differ) is
  parsed whole.
"""

from __future__ import annotations

import ast
import contextlib
import os
import threading
from typing import Iterator

import libcst as cst
from libcst import CSTNode

from cglint.source import first_line, split_lines

# A module shorter than this is parsed whole; pieces are at least this many lines.
PIECE_LINES = 200

_VALIDATE = CSTNode.__post_init__
_lock = threading.Lock()
_depth = 0


def _no_validation(self: CSTNode) -> None:
    pass


@contextlib.contextmanager
def unvalidated() -> Iterator[None]:
    """Nodes built meanwhile skip `_validate` (counted, so nested and concurrent parses restore
    libcst's own check only when the last one ends)."""
    global _depth
    with _lock:
        _depth += 1
        CSTNode.__post_init__ = _no_validation  # type: ignore[method-assign]
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                CSTNode.__post_init__ = _VALIDATE  # type: ignore[method-assign]


# libcst's native parser aborts the whole process when an allocation fails (Rust's allocation
# error handler), which no `except` catches: under an address-space limit (`ulimit -v`,
# `prlimit --as`) it is asked to parse only with room to spare.
_HEADROOM = 48 << 20  # bytes, plus 64 per character of the text


def _check_headroom(chars: int) -> None:
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY:
            return
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError, ValueError):
        return  # no limit to read (not Linux): nothing to guard
    if soft - used < _HEADROOM + 64 * chars:
        raise MemoryError(f"{(soft - used) >> 20} MiB of address space left under its limit of {soft >> 20} MiB, "
                          "too little for libcst's parser")


def parse_module(text: str, tree: ast.Module | None = None, *,
                 piece_lines: int = PIECE_LINES) -> cst.Module:
    """`libcst.parse_module(text)`. `tree`: Python's parse of `text` (or of a text with the same
    lines), which says where a long module may be cut; without it the module is parsed whole.
    Raises what libcst raises."""
    # Only a non-ASCII identifier can fail validation on parser output (libcst's identifier
    # check lags Python's Unicode tables): such a module keeps libcst's check, and its answer
    # (a CSTValidationError the engine reports), since every later libcst visit would raise it.
    _check_headroom(len(text))
    with unvalidated() if text.isascii() else contextlib.nullcontext():
        if tree is not None:
            module = _in_pieces(text, tree, piece_lines)
            if module is not None:
                return module
        return cst.parse_module(text)


def _cuts(text: str, tree: ast.Module, piece_lines: int) -> list[tuple[str, bool]] | None:
    """`text` cut into pieces of at least `piece_lines` lines, each with whether it holds a
    compound statement (only those can hold an indented block). A piece ends where a top-level
    statement ends and the lines up to the next one are empty or comments at column 0: a whole
    parse gives those to the next statement (`leading_lines`), never to a block before it, and
    libcst misprints some lines left at the very end of a text (an indented comment, then an
    empty line), which a piece then never has."""
    lines = split_lines(text, keepends=True)  # Python's line breaks, as `tree` counts lines
    if len(lines) < 2 * piece_lines or len(tree.body) < 2:
        return None
    starts, blocks = [1], [False]
    last_end = 0
    for stmt in tree.body:
        first = first_line(stmt)
        # Never inside one statement line (`a = 1; b = 2`), nor before a statement the quick
        # scan blanked (a piece holds at least one statement).
        if (last_end and first > last_end and last_end + 1 - starts[-1] >= piece_lines
                and first <= len(lines) and lines[first - 1].strip()
                and all(_between(line) for line in lines[last_end : first - 1])):
            starts.append(last_end + 1)
            blocks.append(False)
        if hasattr(stmt, "body"):
            blocks[-1] = True
        last_end = max(last_end, stmt.end_lineno or stmt.lineno)
    if len(starts) < 2:
        return None
    ends = [s - 1 for s in starts[1:]] + [len(lines)]
    return [("".join(lines[a - 1 : b]), block) for a, b, block in zip(starts, ends, blocks)]


def _between(line: str) -> bool:
    return line.startswith("#") or not line.rstrip("\r\n")


def _in_pieces(text: str, tree: ast.Module, piece_lines: int) -> cst.Module | None:
    cuts = _cuts(text, tree, piece_lines)
    if cuts is None:
        return None
    try:
        parts = [cst.parse_module(piece) for piece, _ in cuts]
    except Exception:  # noqa: BLE001 - a piece that parses only in context: the whole parse decides
        return None
    if any(not part.body for part in parts):
        return None
    # Nodes without their own indent or newline use the module's; every piece must agree with
    # the first (a piece with no indented block never uses the indent).
    newline = parts[0].default_newline
    indents = {part.default_indent for part, (_, block) in zip(parts, cuts) if block}
    if len(indents) > 1 or any(part.default_newline != newline for part in parts):
        return None
    indent = indents.pop() if indents else parts[0].default_indent
    body = list(parts[0].body)
    for before, part in zip(parts, parts[1:]):
        first = part.body[0]
        # Lines after a piece's last statement (its footer) and before the next piece's first
        # (its header) are, in a whole parse, that first statement's leading lines.
        lead = [*before.footer, *part.header, *first.leading_lines]  # type: ignore[attr-defined]
        body.append(first.with_changes(leading_lines=lead) if lead != list(first.leading_lines) else first)  # type: ignore[attr-defined]
        body.extend(part.body[1:])
    return parts[0].with_changes(body=body, footer=parts[-1].footer, default_indent=indent,
                                 has_trailing_newline=parts[-1].has_trailing_newline)

