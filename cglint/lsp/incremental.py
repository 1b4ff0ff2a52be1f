"""Incremental analysis for the language server: an edit re-parses only the statement it touched.

A lint of a buffer is, as in `cglint FILE`, the prefilter, Python's quick scan, and the libcst
analysis of the whole module. What makes it cheap on every keystroke:

- the text is split at its top-level statements (Python's parse gives their line spans), and
  libcst parses each statement alone, keyed by its text: an edit
  changes one statement's text, so one statement is parsed again and the rest comes from the
  cache;
- the module the model sees is assembled from the cached statement nodes
  (`libcst.Module(body=...)`), so the model and the rules run exactly as on a whole parse;
- positions, libcst's most expensive pass over a module, are computed per statement and only
  for statements that hold a finding (and then cached with the statement, shifted by its first
  line), since a statement parsed alone starts at column 0 of its first line.

A statement's text is the same in the analysed text and the buffer, so a quick fix is applied
to the statement's own tree and spliced into the buffer at its lines, after the check
`cglint --fix` makes of every fix (the result must parse and compile: `cglint.fix.check_source`
on each changed statement; top-level statements compile independently).

Whatever this cannot split (a syntax error, a statement that does not parse alone, a fix that
edits the module itself) goes the whole-file way (`engine.lint_source`), so the findings are
always those of a full lint (tests/test_lsp_incremental.py checks that after random edits).
"""

from __future__ import annotations

import ast
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from cglint import cstparse, engine, files, quickscan, reach
from cglint import source as pysource
from cglint.diagnostics import Diagnostic, FileResult


@dataclass(eq=False)
class _Statement:
    """One top-level statement's text, parsed alone (the cache's value)."""

    text: str
    module: cst.Module
    _ids: frozenset[int] | None = None
    _positions: Any = None

    @property
    def ids(self) -> frozenset[int]:
        """Every node in the statement, by identity (to find which statement a node is in)."""
        if self._ids is None:
            seen: set[int] = set()
            stack: list[cst.CSTNode] = list(self.module.body)
            while stack:
                node = stack.pop()
                seen.add(id(node))
                stack.extend(node.children)
            self._ids = frozenset(seen)
        return self._ids

    @property
    def positions(self) -> Any:
        if self._positions is None:
            self._positions = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
        return self._positions


@dataclass(eq=False)
class _Chunk:
    """A run of whole lines of the buffer holding one top-level statement (or none: blank and
    comment lines at the end), with Python's parse of it. Line numbers in `statements` are
    absolute for `first_line` and are shifted when an edit above moves the chunk."""

    text: str
    first_line: int
    lines: int
    statements: list[ast.stmt]


def _chunks(text: str, tree: ast.Module, first_line: int = 1) -> list[_Chunk]:
    """`text` (starting at line `first_line` of the buffer; `tree` is its parse, numbered from
    there) cut before each top-level statement (decorators included)."""
    lines = _lines(text)
    starts: list[int] = []
    groups: list[list[ast.stmt]] = []
    last_end = 0
    for stmt in tree.body:
        first = pysource.first_line(stmt) - first_line + 1
        if groups and first <= last_end:  # `a = 1; b = 2`: one line, one chunk
            groups[-1].append(stmt)
        else:
            starts.append(first)
            groups.append([stmt])
        last_end = max(last_end, (stmt.end_lineno or stmt.lineno) - first_line + 1)
    if not starts:
        return [_Chunk(text, first_line, len(lines), [])]
    starts[0] = 1  # leading comments and blank lines go with the first statement
    out = []
    for k, (start, group) in enumerate(zip(starts, groups)):
        end = starts[k + 1] - 1 if k + 1 < len(starts) else len(lines)
        out.append(_Chunk("".join(lines[start - 1 : end]), first_line + start - 1, end - start + 1, group))
    return out


def _parse(text: str) -> ast.Module | None:
    try:
        return pysource.python_ast(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def python_parse(source: str, previous: Lint | None) -> tuple[ast.Module | None, list[_Chunk] | None]:
    """Python's parse of `source`, reusing the previous version's chunks outside the edit.

    The edit is where the texts differ (common prefix and suffix); the chunks it touches are
    parsed again, alone. Chunks begin at the start of a top-level statement, where the tokenizer
    holds no state (no open bracket, string or continuation, indentation 0), so a run of chunks
    that parses alone and ends at a line end parses the same inside the module; anything else
    (the run does not parse alone, or leaves a line open) is parsed whole."""
    old = previous.source if previous is not None else None
    chunks = previous.chunks if previous is not None else None
    if old is not None and chunks and old != source:
        prefix, suffix = pysource.common_ends(old, source)
        offsets, at = [], 0
        for c in chunks:
            offsets.append(at)
            at += len(c.text)
        first = max([k for k, start in enumerate(offsets) if start <= prefix] or [0])
        if prefix == offsets[first] and first > 0:
            first -= 1  # an edit at a chunk's very start may join the line before it
        old_end = len(old) - suffix
        last = max(k for k, start in enumerate(offsets) if start < max(old_end, offsets[first] + 1))
        while True:
            start, end = offsets[first], offsets[last] + len(chunks[last].text)
            dirty = source[start : len(source) - (len(old) - end)]
            if last + 1 >= len(chunks) or dirty.endswith(("\n", "\r")):
                break
            last += 1  # the edit left its last line open: it runs into the next chunk
        first_line = chunks[first].first_line
        # An edit that adds or removes lines moves every chunk below it: parsed whole (the
        # chunks' trees are shared with the previous lint and are never renumbered in place).
        same_lines = len(_lines(dirty)) == sum(c.lines for c in chunks[first : last + 1])
        tree = _parse(dirty) if same_lines else None
        if tree is not None:
            if first_line > 1:
                ast.increment_lineno(tree, first_line - 1)
            middle = _chunks(dirty, tree, first_line)
            new_chunks = chunks[:first] + middle + chunks[last + 1 :]
            return ast.Module(body=[s for c in new_chunks for s in c.statements], type_ignores=[]), new_chunks
    tree = _parse(source)
    if tree is None:
        return None, None
    return tree, _chunks(source, tree)


@dataclass(eq=False)
class _Placed:
    statement: _Statement
    first_line: int  # 1-based line of the buffer where the statement's text starts


class Analysis:
    """The statement cache of one server (shared by its buffers: equal text, equal parse)."""

    def __init__(self, limit: int = 20000) -> None:
        self._cache: OrderedDict[Any, _Statement | None] = OrderedDict()
        self.limit = limit
        self.parsed = 0  # statements parsed (for tests and benchmarks)

    def _statement(self, text: str, copy: int = 0, opening: bool = False) -> _Statement | None:
        key: Any = (text, copy, opening) if copy or opening else text
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        self.parsed += 1
        try:
            module = cstparse.parse_module(text)
            if module.header and module.body and not opening:
                # Comment lines above a statement are, in a whole parse, its leading lines (the
                # module's header only above the file's first statement).
                first = module.body[0]
                lead = [*module.header, *first.leading_lines]  # type: ignore[attr-defined]
                module = module.with_changes(header=[], body=[first.with_changes(leading_lines=lead), *module.body[1:]])
            stmt: _Statement | None = _Statement(text, module) if module.body else None
        except (cst.ParserSyntaxError, RecursionError):
            stmt = None  # parses only in context (or not at all): the whole-file way
        self._cache[key] = stmt
        while len(self._cache) > self.limit:
            self._cache.popitem(last=False)
        return stmt

    # -- lint ---------------------------------------------------------------------------

    def lint(self, source: str, path: str, rules: list, superseded: Callable[[], bool] = lambda: False,
             previous: Lint | None = None) -> Lint | None:
        """What `engine.lint_source(source, path, rules)` returns, incrementally
        (`previous`: the lint of the buffer's previous text); None as soon as `superseded()`
        says a newer text makes this lint useless."""
        with engine.paused_gc():
            return self._lint(source, path, rules, superseded, previous)

    def _lint(self, source: str, path: str, rules: list, superseded: Callable[[], bool],
              previous: Lint | None) -> Lint | None:
        reaches = None  # as engine.lint_source: a keyword call of another project module's site
        if not files.may_hold_site(source):
            reaches = quickscan.calls_project_site(source, path)
            if not reaches[0]:
                return Lint(FileResult(path, source, [], parsed=False), [])
        tree, chunks = python_parse(source, previous)
        aliases = reach.tensorflow_aliases(path)
        # The text the engine analyses (lone CRs as newlines, pathological expressions stubbed;
        # same lines and columns): cglint.source.analysis_text.
        text = pysource.analysis_text(source, tree) if tree is not None else None
        scan = quickscan.scan(text, aliases, tree) if text is not None else None
        if scan is not None and not scan.relevant and not (reaches or quickscan.calls_project_site(source, path))[0]:
            return Lint(FileResult(path, source, [], parsed=False), [], chunks)
        if superseded():
            return None
        placed = self._split(text, tree, superseded) if scan is not None and tree is not None else None
        if placed is _SUPERSEDED:
            return None
        if placed is None:
            return Lint(engine.lint_source(source, path, rules), None, chunks)
        if superseded():
            return None
        # The file's opening comments stay the module's header, as in a whole parse.
        module = cst.Module(body=[node for p in placed for node in p.statement.module.body],
                            header=placed[0].statement.module.header if placed else ())
        unsuppressed = engine.analyse(module, source, path, rules, full_tree=False, apply_noqa=False,
                                      positions=lambda nodes: self._positions(placed, nodes), aliases=aliases)
        if not unsuppressed.parsed:  # "nesting too deep"
            return Lint(unsuppressed, None, chunks)
        kept, notes = engine.suppressed(list(unsuppressed.diagnostics), source)
        result = FileResult(path, source, kept, parsed=True, model=unsuppressed.model, warnings=notes)
        return Lint(result, placed, chunks)

    def _split(self, text: str, tree: ast.Module, superseded: Callable[[], bool] = lambda: False):
        """The text's statements, parsed (cached by text); None when one parses only in
        context; _SUPERSEDED when a newer text arrived meanwhile (parsing is most of a lint's
        time, so it is checked between statements)."""
        lines = _lines(text)
        placed = []
        copies: dict[str, int] = {}
        # One span per libcst statement (`a = 1; b = 2` is one), with the comment lines directly
        # above it: a whole parse gives them to the statement (`# cglint: intentional` over a def).
        previous = 0
        for first, last in pysource.statement_lines(tree, text):
            while first - 1 > previous and lines[first - 2].startswith("#"):
                first -= 1
            previous = last
            text = "".join(lines[first - 1 : last])
            # A statement repeated word for word gets its own nodes (its own cache entry): the
            # model tells statements apart by node identity, as in a whole parse.
            copy = copies[text] = copies.get(text, -1) + 1
            opening = not placed
            if ((text, copy, opening) if copy or opening else text) not in self._cache and superseded():
                return _SUPERSEDED
            stmt = self._statement(text, copy, opening)
            if stmt is None:
                return None
            placed.append(_Placed(stmt, first))
        return placed

    def _positions(self, placed: list[_Placed], nodes: list[cst.CSTNode]) -> dict[cst.CSTNode, CodeRange]:
        out: dict[cst.CSTNode, CodeRange] = {}
        for node in nodes:
            if node in out:
                continue
            for p in placed:
                if id(node) in p.statement.ids:
                    where = p.statement.positions[node]
                    shift = p.first_line - 1
                    out[node] = CodeRange(CodePosition(where.start.line + shift, where.start.column),
                                          CodePosition(where.end.line + shift, where.end.column))
                    break
            else:
                raise LookupError("a finding points outside the module's statements")
        return out


_SUPERSEDED: Any = object()


@dataclass(eq=False)
class Lint:
    result: FileResult
    placed: list[_Placed] | None  # None: linted the whole-file way (no statements to splice)
    chunks: list[_Chunk] | None = None  # Python's parse, by statement, for the next edit

    @property
    def source(self) -> str:
        return self.result.source

    def fixed_text(self, d: Diagnostic, rules: list) -> str | None:
        """The buffer with `d`'s fix applied, or None when `cglint --fix` would not apply it
        (display-only, or the result would not parse or compile)."""
        from cglint import fix as fixing

        fix = d.fix
        if fix is None or not d.is_fixable(unsafe=True):
            return None
        source = self.result.source
        if self.placed is None or not fix.edits:
            return self._whole_file(d, rules)
        wanted = {id(old) for old, _ in fix.edits}
        touched = [p for p in self.placed if wanted & p.statement.ids]
        if sum(len(wanted & p.statement.ids) for p in touched) != len(wanted):
            return self._whole_file(d, rules)  # an edit of the module itself
        lines = _lines(source)
        new_lines = list(lines)
        for p in sorted(touched, key=lambda p: p.first_line, reverse=True):
            new = fix.apply(p.statement.module).code
            if fixing.check_source(new) is not None:
                return None
            count = len(_lines(p.statement.text))
            old = "".join(lines[p.first_line - 1 : p.first_line - 1 + count])
            if old.rstrip("\r\n") != p.statement.text.rstrip("\r\n"):
                return self._whole_file(d, rules)  # line endings libcst normalised: be exact
            if not new.endswith(("\n", "\r")) and old.endswith(("\n", "\r")):
                new += old[len(old.rstrip("\r\n")):]
            new_lines[p.first_line - 1 : p.first_line - 1 + count] = [new]
        # Each changed statement was checked alone (libcst parse, CPython compile); top-level
        # statements compile independently, so the module compiles as it did before the fix.
        return "".join(new_lines)

    def _whole_file(self, d: Diagnostic, rules: list) -> str | None:
        from cglint import fix as fixing

        full = engine.lint_source(self.result.source, self.result.path, rules)
        same = [f for f in full.diagnostics if f.is_fixable(unsafe=True) and _where(f) == _where(d)]
        if not same or full.module is None:
            return None
        return fixing.validated(full.module, same[0].fix, self.result.path)[0]  # type: ignore[arg-type]


# Lines as Python numbers them (`\n`, `\r\n`, `\r`; str.splitlines also breaks at form feeds).
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def _lines(text: str) -> list[str]:
    return _LINE.findall(text)


def _where(d: Diagnostic) -> tuple:
    return (d.code, d.line, d.column, d.end_line, d.end_column, d.message)
