"""Jupyter notebooks (`.ipynb`, nbformat 4): linted as one module, reported per cell.

A notebook is a module run cell by cell, so cglint reads it as one: the code cells' sources,
in order, concatenated, each ending with a line break. IPython syntax that is not Python is
masked line for line so every position stays where it is in its cell:

- a line magic or shell escape (`%time f()`, `!pip install x`, `files = !ls`, `obj?`) becomes
  `pass` at the same indentation (a line continued with `\\` masks its continuation lines too);
- a cell magic whose body is Python (`%%time`, `%%timeit`, `%%capture`, `%%prun`, `%%debug`)
  masks its first line; any other cell magic (`%%bash`, `%%writefile`, ...) masks the cell.

A cell that still does not parse is reported once (CG000, at the error in that cell) and left
out (as blank lines), so the other cells are linted. Diagnostics carry `cell`, the cell's
1-based position among all the notebook's cells (as editors show them and ruff counts them),
and lines within that cell; `# noqa` works per line, `# cglint: noqa` in any cell covers the
notebook.

Reading and validating is nbformat's (the reference implementation of the format). Writing
never re-serialises the notebook: a fix replaces only the JSON text of the changed cells'
`source` values, in the layout those values had, so outputs, metadata, cell ids, key order,
indentation and the trailing newline stay byte for byte; the result is validated with
nbformat before anything is written.
"""

from __future__ import annotations

import ast
import contextlib
import bisect
import difflib
import io
import json
import re
import tokenize
import warnings
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from cglint.diagnostics import Diagnostic, FileResult
from cglint.source import python_ast

SUFFIX = ".ipynb"
# Cell magics that run their body as Python: only the `%%` line is masked.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_INDENT = re.compile(r"[ \t]*")
# `x = %magic`, `a, b = !cmd`: IPython assigns the magic's result.
_ASSIGNED_MAGIC = re.compile(r"[ \t]*[A-Za-z_][\w.]*(?:[ \t]*,[ \t]*[A-Za-z_][\w.]*)*[ \t]*=[ \t]*[%!]")
_HELP = re.compile(r"[ \t]*(?:\?\??[\w.]+|[\w.]+\?\??)[ \t]*(?:#.*)?\Z")


def is_notebook(path: str) -> bool:
    return path.endswith(SUFFIX)


class NotebookError(ValueError):
    """Not a notebook cglint can read (invalid JSON, not nbformat 4, fails validation)."""


def lines(text: str) -> list[str]:
    """Lines with their breaks, split where Python and libcst split (`\\n`, `\\r\\n`, `\\r`)."""
    return _LINE.findall(text)


# ---- cells and masking -------------------------------------------------------------------------


@dataclass
class Cell:
    number: int  # 1-based position among all the notebook's cells
    index: int  # position in the notebook's `cells` list
    source: str  # as in the notebook
    code: str  # what is parsed: magics masked, ending with a line break (blank if it does not parse)
    start: int  # its first line in the concatenated module (1-based)
    masked: frozenset[int]  # 1-based lines of the cell that were masked
    error: SyntaxError | None = None

    @property
    def line_count(self) -> int:
        return len(lines(self.code))

    @property
    def source_lines(self) -> list[str]:
        return lines(self.source)


def mask(source: str) -> tuple[str, frozenset[int]]:
    """The cell's text with IPython-only lines replaced, line for line, by Python. As in
    IPython, a `%` or `!` line is a magic only where a statement starts: not inside brackets
    (`("%s" ...\n     % args)`), a multi-line string or a backslash continuation."""
    skip: set[int] = set()
    original = lines(source)
    while True:
        code, masked, heads = _mask(source, skip)
        starts = _statement_starts(code) if heads else set()
        wrong = sorted(n for n in heads if n not in starts)
        if not wrong:
            return code, masked
        # That line continues Python; the lines after it are decided again. A head with no
        # bracket, quote, comment or backslash, given back, cannot end a bracket or a string:
        # every later line keeps its place, so the wrong heads up to the first other one go in
        # the same round (one round per line was quadratic: 3,000 lines took 138 s).
        for n in wrong:
            skip.add(n)
            if not _NEUTRAL.fullmatch(original[n - 1].rstrip("\r\n")):
                break


_NEUTRAL = re.compile(r"[^()\[\]{}'\"#\\`$]*")


def _mask(source: str, skip: set[int]) -> tuple[str, frozenset[int], list[int]]:
    out = lines(source)
    masked: set[int] = set()
    heads: list[int] = []  # first lines of line magics (their continuation lines follow)
    if not out:
        return "", frozenset(), heads
    first = out[0].strip()
    if first.startswith("%%"):
        name = first[2:].split(maxsplit=1)[0] if first[2:].strip() else ""
        whole = name not in PYTHON_CELL_MAGICS
        for i in range(len(out) if whole else 1):
            out[i] = _blank(out[i])
            masked.add(i + 1)
        if whole:
            return "".join(out), frozenset(masked), heads
    continued = False
    for i, text in enumerate(out):
        if i + 1 in masked or (i + 1 in skip and not continued):
            continue
        body = text.rstrip("\r\n")
        stripped = body.lstrip(" \t")
        if continued or stripped[:1] in ("%", "!") or _ASSIGNED_MAGIC.match(body) or (
                "?" in body and _HELP.match(body)):
            if not continued:
                heads.append(i + 1)
            indent = _INDENT.match(body).group() if not continued else ""  # type: ignore[union-attr]
            out[i] = (indent + "pass" if not continued else "") + text[len(body):]
            masked.add(i + 1)
            continued = body.endswith("\\")
    return "".join(out), frozenset(masked), heads


def _statement_starts(code: str) -> set[int]:
    """Lines of `code` on which a statement can start (not inside brackets, strings or a
    backslash continuation). Past a point where the code stops tokenizing, every line counts."""
    starts, depth, last = {1}, 0, 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            last = tok.start[0]
            if tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth = max(0, depth - 1)
            elif tok.type in (tokenize.NEWLINE, tokenize.NL) and depth == 0:
                starts.add(tok.end[0] + 1)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        starts.update(range(last + 1, code.count("\n") + 2))
    return starts


def _blank(line: str) -> str:
    return line[len(line.rstrip("\r\n")):]


def _syntax_error(code: str) -> SyntaxError | None:
    try:
        python_ast(code, flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, filename="<cell>")  # SyntaxWarnings silenced
    except SyntaxError as exc:
        return exc
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        err = SyntaxError(str(exc))
        err.lineno, err.offset = 1, 1
        return err
    return None


@dataclass
class Notebook:
    """A notebook's code cells as one module, with the way back to cells and to the file."""

    cells: list[Cell]
    code: str
    raw: str = ""  # the file's text (empty for a notebook from an editor's cells)
    _spans: list[tuple[int, int] | None] | None = field(default=None, repr=False)

    @classmethod
    def from_cells(cls, sources: Iterable[tuple[int, int, str]], raw: str = "") -> "Notebook":
        """`sources`: (number, index, source) of each code cell, in order."""
        cells, parts, line = [], [], 1
        for number, index, source in sources:
            code, masked = mask(source)
            if code and not code.endswith(("\n", "\r")):
                code += "\n"
            error = _syntax_error(code) if code.strip() else None
            if error is not None:
                code = "".join(_blank(text) or "\n" for text in lines(code))
            cell = Cell(number, index, source, code, line, masked, error)
            cells.append(cell)
            parts.append(code)
            line += cell.line_count
        return cls(cells, "".join(parts), raw)

    # -- positions ------------------------------------------------------------------------

    def cell_at(self, line: int) -> Cell | None:
        """The cell holding line `line` of the concatenated module."""
        starts = [c.start for c in self.cells if c.line_count]
        live = [c for c in self.cells if c.line_count]
        i = bisect.bisect_right(starts, line) - 1
        if i < 0:
            return None
        cell = live[i]
        return cell if line < cell.start + cell.line_count else None

    def cell(self, number: int) -> Cell | None:
        return next((c for c in self.cells if c.number == number), None)

    def to_cell(self, d: Diagnostic) -> Diagnostic:
        """`d` (positions in the concatenated module) moved into its cell, in place."""
        cell = self.cell_at(d.line) or (self.cells[-1] if self.cells else None)
        if cell is None:
            return d
        last = cell.start + cell.line_count - 1
        d.cell = cell.number
        if d.end_line > last:  # a span cannot leave its cell; clamp it to the cell's end
            d.end_line, d.end_column = last, len(lines(cell.code)[-1].rstrip("\r\n")) + 1
        d.line, d.end_line = d.line - cell.start + 1, d.end_line - cell.start + 1
        return d

    def module_line(self, d: Diagnostic) -> int:
        """The line of the concatenated module that `d` (moved into its cell) points at."""
        cell = self.cell(d.cell) if d.cell is not None else None
        return d.line if cell is None else cell.start + d.line - 1

    def position(self, line: int) -> tuple[int | None, int]:
        """(cell number, line in cell) for a line of the concatenated module."""
        cell = self.cell_at(line)
        return (None, line) if cell is None else (cell.number, line - cell.start + 1)

    # -- the file -------------------------------------------------------------------------

    def spans(self) -> list[tuple[int, int] | None]:
        """Offsets of each cell's `source` value in `raw`, by index in `cells` (lazily)."""
        if self._spans is None:
            self._spans = _source_spans(self.raw)
        return self._spans

    def file_line(self, cell_number: int, line: int) -> int | None:
        """The line of the `.ipynb` file that holds line `line` of a cell (where an annotation
        on the file belongs); None when it cannot be told."""
        cell = self.cell(cell_number)
        if cell is None or not self.raw:
            return None
        spans = self.spans()
        span = spans[cell.index] if cell.index < len(spans) else None
        if span is None:
            return None
        if self.raw[span[0]] == "[":
            elements = list(_array(self.raw, span[0]))
            if 1 <= line <= len(elements):
                return self.raw.count("\n", 0, elements[line - 1][0]) + 1
        return self.raw.count("\n", 0, span[0]) + 1

    def rewrite(self, new_code: str) -> tuple[str, dict[int, str]]:
        """The file's text with the code cells changed to match `new_code` (this notebook's
        `code`, edited: fixes, noqa comments), and the new source of each changed cell by number.
        Lines that did not change keep their original text (masked magics included); raises
        NotebookError when an edit touches a masked line or a cell that did not parse."""
        new_sources = self._split(new_code)
        changed = {n: s for n, s in new_sources.items() if s != self.cell(n).source}  # type: ignore[union-attr]
        if not changed:
            return self.raw, {}
        spans = self.spans()
        ascii_only = self.raw.isascii()
        edits = []
        for number, source in changed.items():
            cell = self.cell(number)
            span = spans[cell.index] if cell is not None and cell.index < len(spans) else None
            if span is None:
                raise NotebookError(f"cell {number}: cannot find its source in the file")
            edits.append((span, _encode_source(self.raw, span, source, ascii_only)))
        out, last = [], 0
        for (start, end), text in sorted(edits):
            out += [self.raw[last:start], text]
            last = end
        out.append(self.raw[last:])
        new_raw = "".join(out)
        validate(new_raw)
        return new_raw, changed

    def _split(self, new_code: str) -> dict[int, str]:
        old = lines(self.code)
        new = lines(new_code)
        owner: list[Cell] = []  # cell of each old line
        originals: list[str] = []  # each old line's text in the notebook
        masked: list[bool] = []
        for cell in self.cells:
            source_lines = cell.source_lines
            for i in range(cell.line_count):
                owner.append(cell)
                text = source_lines[i] if i < len(source_lines) else ""
                if i == len(source_lines) - 1 and not text.endswith(("\n", "\r")):
                    text += "\n"  # the break the concatenation added; dropped again below
                originals.append(text)
                masked.append(i + 1 in cell.masked or cell.error is not None)
        parts: dict[int, list[str]] = {c.number: [] for c in self.cells}
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                for k in range(i2 - i1):
                    parts[owner[i1 + k].number].append(originals[i1 + k])
                continue
            if any(masked[i1:i2]):
                raise NotebookError(f"cell {owner[i1].number}: an edit would change an IPython magic or a cell "
                                    "that does not parse")
            if i2 > i1:
                cell = owner[i1]
                if owner[i2 - 1] is not cell:
                    raise NotebookError(f"cells {cell.number}-{owner[i2 - 1].number}: an edit spans two cells")
            elif i1 > 0:
                cell = owner[i1 - 1]  # an insertion belongs with the line before it
            elif owner:
                cell = owner[0]
            else:
                raise NotebookError("the notebook has no code cell to change")
            parts[cell.number].extend(new[j1:j2])
        out = {}
        for cell in self.cells:
            text = "".join(parts[cell.number])
            if not cell.source.endswith(("\n", "\r")) and text.endswith("\n"):
                text = text[:-2] if text.endswith("\r\n") else text[:-1]
            out[cell.number] = text
        return out


# ---- reading and validating --------------------------------------------------------------------


def read(raw: str, validated: bool = False) -> Notebook:
    """The notebook in `raw` (the file's text). Raises NotebookError. `validated`: this very
    text passed `validate` before (a cache entry keyed by its hash says so), so JSON is enough
    and nbformat, most of a warm run's cost, is not even imported."""
    node = json.loads(raw) if validated else validate(raw)
    metadata = node.get("metadata", {})
    language = (metadata.get("language_info") or {}).get("name") or (metadata.get("kernelspec") or {}).get("language")
    if language and language.lower() != "python":
        return Notebook([], "", raw)  # an R or Julia notebook has no Python to lint
    sources = ((i + 1, i, _joined(cell.get("source", ""))) for i, cell in enumerate(node["cells"])
               if cell.get("cell_type") == "code")
    return Notebook.from_cells(sources, raw)


def _joined(source) -> str:
    return "".join(source) if isinstance(source, list) else source  # nbformat stores lines or one string


def _unique(pairs: list) -> dict:
    # Python keeps the last of two equal keys, the writer would edit the first: such a
    # notebook means different things to different readers and is never linted or written.
    out = dict(pairs)
    if len(out) != len(pairs):
        seen = set()
        duplicate = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"the key {duplicate!r} appears twice in one object")
    return out


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def validate(raw: str):
    """Parse and validate `raw` with nbformat (nbformat 4 only); the notebook node, or
    NotebookError with nbformat's reason in one line."""
    import nbformat

    try:
        data = json.loads(raw, object_pairs_hook=_unique, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:  # ValueError: a number of more than 4,300 digits too
        raise NotebookError(f"not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict) or data.get("nbformat") != 4:
        version = data.get("nbformat") if isinstance(data, dict) else None
        raise NotebookError(f"not an nbformat 4 notebook (nbformat: {version!r})")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # missing cell ids and the like: nbformat repairs its copy
        try:
            node = nbformat.from_dict(data)
            nbformat.validate(node)
        except nbformat.ValidationError as exc:
            message = " ".join(str(exc.message).split())
            where = "/".join(str(p) for p in exc.absolute_path)
            raise NotebookError(f"invalid notebook: {message[:200]}" + (f" (at {where})" if where else "")) from None
        except Exception as exc:  # noqa: BLE001 - nbformat's own failures are the file's problem
            raise NotebookError(f"invalid notebook: {type(exc).__name__}: {exc}") from None
    return node


# ---- linting -----------------------------------------------------------------------------------


def read_text(path: str) -> str:
    """The file's text (UTF-8; JSON allows no other encoding). Raises OSError, UndecodableError."""
    from cglint import files

    return files.read_source(path)


def frame_lines(result: FileResult, d: Diagnostic) -> list[str]:
    """The lines a code frame for `d` shows: its cell's for a notebook, else the file's."""
    nb = getattr(result, "notebook", None)
    if nb is not None and d.cell is not None:
        cell = nb.cell(d.cell)
        return [t.rstrip("\r\n") for t in cell.source_lines] if cell is not None else []
    return result.source.splitlines()


# ---- the JSON text: where each cell's source is ------------------------------------------------

_decoder = json.JSONDecoder()
_WS = re.compile(r"[ \t\n\r]*")


def _skip(raw: str, pos: int) -> int:
    return _WS.match(raw, pos).end()  # type: ignore[union-attr]


def _members(raw: str, pos: int) -> Iterator[tuple[str, int, int]]:
    """(key, value start, value end) of the JSON object starting at `pos`."""
    pos = _skip(raw, pos + 1)
    if raw[pos] == "}":
        return
    while True:
        key, pos = json.decoder.scanstring(raw, pos + 1)  # type: ignore[attr-defined]
        pos = _skip(raw, _skip(raw, pos) + 1)  # past the colon
        _, end = _decoder.raw_decode(raw, pos)
        yield key, pos, end
        pos = _skip(raw, end)
        if raw[pos] != ",":
            return
        pos = _skip(raw, pos + 1)


def _array(raw: str, pos: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each element of the JSON array starting at `pos`."""
    pos = _skip(raw, pos + 1)
    if raw[pos] == "]":
        return
    while True:
        _, end = _decoder.raw_decode(raw, pos)
        yield pos, end
        pos = _skip(raw, end)
        if raw[pos] != ",":
            return
        pos = _skip(raw, pos + 1)


def _source_spans(raw: str) -> list[tuple[int, int] | None]:
    start = _skip(raw, 0)
    for key, value, _ in _members(raw, start):
        if key == "cells":
            spans: list[tuple[int, int] | None] = []
            for cell_start, _ in _array(raw, value):
                spans.append(next(((s, e) for k, s, e in _members(raw, cell_start) if k == "source"), None))
            return spans
    return []


def _encode_source(raw: str, span: tuple[int, int], source: str, ascii_only: bool) -> str:
    """`source` as JSON in the layout of the value at `span`: a string stays a string; a list
    of lines keeps its line breaks and indentation, and lines that did not change keep their
    exact text (escapes included)."""
    start, end = span
    if raw[start] == '"':
        return json.dumps(source, ensure_ascii=ascii_only)
    elements = list(_array(raw, start))
    known = {}
    for a, b in elements:
        known.setdefault(json.loads(raw[a:b]), raw[a:b])
    new_lines = source.splitlines(True)  # as nbformat splits a source
    if not new_lines:
        return "[]"
    if elements:
        lead = raw[start + 1:elements[0][0]]
        sep = raw[elements[0][1]:elements[1][0]] if len(elements) > 1 else "," + lead
        tail = raw[elements[-1][1]:end - 1]
    else:
        indent = _INDENT.match(raw, raw.rfind("\n", 0, start) + 1).group()  # type: ignore[union-attr]
        lead, sep, tail = "\n" + indent + " ", ",\n" + indent + " ", "\n" + indent
    encoded = [known.get(text) or json.dumps(text, ensure_ascii=ascii_only) for text in new_lines]
    return "[" + lead + sep.join(encoded) + tail + "]"


# ---- fixing ------------------------------------------------------------------------------------


def cell_diff(path: str, old: dict[int, str], new: dict[int, str]) -> str:
    """A unified diff per changed cell, headed `a/nb.ipynb:cell 3` / `b/nb.ipynb:cell 3`."""
    out = []
    for number in sorted(new):
        a, b = old.get(number, ""), new[number]
        if a == b:
            continue
        for line in difflib.unified_diff(a.splitlines(True), b.splitlines(True), fromfile=f"a/{path}:cell {number}",
                                         tofile=f"b/{path}:cell {number}"):
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def diff(path: str, old_raw: str, new_raw: str) -> str:
    """--diff for a notebook: the changed cells' sources, not the JSON."""
    try:
        old, new = read(old_raw), read(new_raw)
    except NotebookError:
        return ""
    return cell_diff(path, {c.number: c.source for c in old.cells}, {c.number: c.source for c in new.cells})


# ---- --runtime -------------------------------------------------------------------------------


@contextlib.contextmanager
def as_module(result: FileResult) -> Iterator[tuple[str, str]]:
    """The notebook of `result` as a module file the runtime child can import: its code
    cells in order (magics masked, cells that do not parse left out), in a temporary
    directory; and the directory to run in (the notebook's, as Jupyter runs a notebook there,
    so its relative paths and sibling modules resolve). Yields (module path, cwd)."""
    import os
    import tempfile

    nb: Notebook = result.notebook
    stem = re.sub(r"\W", "_", os.path.basename(result.path)[: -len(SUFFIX)]) or "notebook"
    with tempfile.TemporaryDirectory(prefix="cglint-nb-") as tmp:
        module = os.path.join(tmp, f"{stem}.py")
        with open(module, "w", encoding="utf-8") as fh:
            fh.write(nb.code)
        yield module, os.path.dirname(os.path.abspath(result.path))


# ---- --add-noqa ------------------------------------------------------------------------------


def add_noqa(path: str, result: FileResult) -> tuple[str | None, int, list[str]]:
    """`noqa.add_noqa` for a notebook: the comments go on the cells' lines. Returns the new
    file text (None when nothing changes or it cannot be written back), the number of lines
    changed and the `cell N:line` places that could not take a comment."""
    from dataclasses import replace

    from cglint import noqa

    nb: Notebook | None = result.notebook
    if nb is None:
        return None, 0, []
    moved = [replace(d, line=nb.module_line(d), end_line=nb.module_line(d), cell=None) for d in result.diagnostics]
    new_code, changed, skipped = noqa.add_noqa(nb.code, moved)
    places = ["cell {}:{}".format(*nb.position(line)) for line in skipped]
    if not changed:
        return None, 0, places
    new_raw, _ = nb.rewrite(new_code)
    return new_raw, changed, places
