"""Applying fixes: rounds of lint -> apply the non-overlapping fixes -> check the result parses
and compiles -> lint again, until nothing changes (bounded), then an atomic write.

Library entry points (the CLI and the language server use them):

- `fix_source(source, path, rules, unsafe=False) -> FixResult(new_source, applied, dropped, result)`
- `fix_file(path, rules, unsafe=False, write=True) -> FixResult` (keeps BOM, line endings, mode)
- `text_edits(source, module, fix) -> list[TextEdit]`: a fix as replacements of the source text
- `validated(module, fix, path) -> str | None`: one fix applied alone, or None when the result
  would not parse or compile (the check `--fix` makes; the language server's quick fixes use it)
- `applicable(diagnostic, unsafe)`: whether `--fix` applies a finding's fix (`Fix.applies`)
- `write_atomic(path, data)`: files.write, the one guarded writer
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from cglint import cstwalk, source as pysource
from cglint.diagnostics import UNSAFE, Diagnostic, FileResult, Fix
from cglint.rules import ALL_RULES, Rule

if TYPE_CHECKING:
    from cglint.notebook import Notebook

MAX_ROUNDS = 10


@dataclass
class AppliedFix:
    code: str
    line: int  # where the finding was, in the source of the round that fixed it
    description: str
    safe: bool
    applicability: str = "safe"
    name: str = ""  # the rule's name, for --show-fixes


@dataclass
class DroppedFix:
    code: str
    line: int
    description: str
    reason: str


@dataclass
class FixResult:
    path: str
    source: str  # as given
    new_source: str
    applied: list[AppliedFix]
    dropped: list[DroppedFix]
    result: FileResult  # the lint of `new_source`: what remains
    converged: bool = True  # False when MAX_ROUNDS ended the loop with fixes still applicable
    not_written: str | None = None  # why fix_file wrote nothing though fixes applied

    @property
    def changed(self) -> bool:
        return self.new_source != self.source

    @property
    def remaining(self) -> list[Diagnostic]:
        return self.result.diagnostics

    def hidden_unsafe(self) -> int:
        """Remaining findings with an unsafe fix that `--unsafe-fixes` would apply."""
        return sum(1 for d in self.result.diagnostics if d.fix is not None and d.fix.applicability == UNSAFE)


@dataclass(frozen=True)
class TextEdit:
    """Replace source[start:end] by `text`; positions 1-based (line, column), end exclusive.
    Columns count characters (code points)."""

    start_line: int
    start_column: int
    end_line: int
    end_column: int
    text: str
    start: int  # offsets into the source
    end: int


def applicable(d: Diagnostic, unsafe: bool) -> bool:
    return d.is_fixable(unsafe)


def fix_source(
    source: str,
    path: str,
    rules: Iterable[type[Rule]] = ALL_RULES,
    unsafe: bool = False,
    max_rounds: int = MAX_ROUNDS,
    exempt: Callable[[FileResult], set[int]] | None = None,
) -> FixResult:
    """Apply every applicable fix (safe ones; unsafe ones too with `unsafe`), to a fixpoint.

    Each round lints the current source, takes the fixes whose edits do not overlap (later ones
    wait for the next round, when they are recomputed on the new tree), drops any fix whose
    result does not parse or compile, and applies the rest together. The returned
    `new_source` is such that running again changes nothing (unless `converged` is False).
    `exempt(result)`: the ids of findings whose fixes are left alone (those a baseline records)."""
    from cglint import engine

    rules = list(rules)
    current = source
    applied: list[AppliedFix] = []
    dropped: dict[tuple[str, int, str], DroppedFix] = {}
    result = engine.lint_source(current, path, rules)
    converged = True
    for round_number in range(max_rounds + 1):
        kept = exempt(result) if exempt is not None else set()
        candidates = [d for d in result.diagnostics if applicable(d, unsafe) and id(d) not in kept]
        if not candidates or result.module is None:
            break
        if round_number == max_rounds:
            converged = False
            break
        chosen, new_code = _one_round(result.module, candidates, path, dropped, result.model)
        if not chosen:
            break
        try:
            new_source = to_source(current, result.module, new_code)
        except pysource.Unsafe as exc:
            for d in chosen:
                dropped.setdefault((d.code, d.line, d.fix.description),  # type: ignore[union-attr]
                                   DroppedFix(d.code, d.line, d.fix.description, f"not applied: {exc}"))  # type: ignore[union-attr]
            break
        if new_source == current:
            break
        applied += [AppliedFix(d.code, d.line, d.fix.description, d.fix.safe, d.fix.applicability, d.name)  # type: ignore[union-attr]
                    for d in chosen]
        current = new_source
        result = engine.lint_source(current, path, rules)
    return FixResult(path, source, current, applied, list(dropped.values()), result, converged)


def _one_round(
    module: cst.Module, candidates: list[Diagnostic], path: str, dropped: dict[tuple[str, int, str], DroppedFix],
    model=None,
) -> tuple[list[Diagnostic], str]:
    # The engine's positions for this parse, when it computed them (one codegen pass per parse).
    positions = model.positions if model is not None and model.module is module else (
        MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider))
    statements = [(positions[stmt].start.line, positions[stmt].end.line, i, stmt) for i, stmt in enumerate(module.body)]
    taken: list[CodeRange] = []
    chosen: list[Diagnostic] = []
    outcomes: dict[str, Diagnostic] = {}  # result of one fix alone -> the finding it fixed
    for d in sorted(candidates, key=lambda d: (d.line, d.column, d.code)):
        fix = d.fix
        assert fix is not None
        spans = [positions.get(old) for old, _ in fix.edits]
        if not spans or any(s is None for s in spans):
            continue
        alone, problem = _validated_locally(module, fix, path, spans, statements)  # type: ignore[arg-type]
        if alone is None:
            dropped.setdefault((d.code, d.line, fix.description), DroppedFix(d.code, d.line, fix.description, problem or ""))
            continue
        if alone in outcomes:
            # Two findings, one identical fix (e.g. CG002 and CG006 on the same return): applied
            # once, and both count as fixed, as in ruff.
            chosen.append(d)
            continue
        if any(_overlap(a, b) for a in spans for b in taken):  # type: ignore[arg-type]
            continue  # recomputed next round, on the tree this round produces
        outcomes[alone] = d
        chosen.append(d)
        taken += spans  # type: ignore[arg-type]
    if not chosen:
        return [], module.code
    distinct = list(outcomes.values())
    combined = _apply(module, [d.fix for d in distinct])  # type: ignore[misc]
    if check_source(combined, path) is not None:  # fixes that are fine alone but not together: one per round
        first = _apply(module, [distinct[0].fix])  # type: ignore[list-item]
        return [d for d in chosen if d is distinct[0] or _apply(module, [d.fix]) == first], first  # type: ignore[list-item]
    return chosen, combined


def _validated_locally(module: cst.Module, fix: Fix, path: str, spans: list[CodeRange],
                       statements: list[tuple[int, int, int, cst.CSTNode]]) -> tuple[object | None, str | None]:
    """`validated`, on the one top-level statement holding every edit of `fix`: what compiles
    depends only on it (its defs, loops and scopes are inside it), and checking it alone keeps a
    round linear in the module's size instead of quadratic in its sites. Returns (a key unique
    to the fix's outcome, None) or (None, why not). Fixes spanning statements, or touching the
    module itself, are checked on the whole module."""
    first, last = min(s.start.line for s in spans), max(s.end.line for s in spans)
    holder = next((entry for entry in statements if entry[0] <= first and last <= entry[1]), None)
    if holder is None or any(old is module for old, _ in fix.edits):
        return validated(module, fix, path)
    mini = module.with_changes(body=[holder[3]])
    code = Fix(list(fix.edits), applicability=fix.applicability, description=fix.description).apply(mini).code
    if check_source(code, path) is not None:
        # Rare: re-check on the whole module so the reason names the module's line, not the
        # statement's.
        return validated(module, fix, path)
    return (holder[2], code), None


def _overlap(a: CodeRange, b: CodeRange) -> bool:
    start_a, end_a = (a.start.line, a.start.column), (a.end.line, a.end.column)
    start_b, end_b = (b.start.line, b.start.column), (b.end.line, b.end.column)
    return start_a < end_b and start_b < end_a


def _apply(module: cst.Module, fixes: list[Fix]) -> str:
    edits = [edit for fix in fixes for edit in fix.edits]
    return Fix(edits, True, "").apply(module).code


def validated(module: cst.Module, fix: Fix, path: str = "<fixed>") -> tuple[str | None, str | None]:
    """`fix` applied alone to `module`: (new code, None), or (None, why not) when the result would
    not parse or compile. The check every fix passes before anyone applies it."""
    code = _apply(module, [fix])
    problem = check_source(code, path)
    if problem is None and (known := pysource.registered(module)) is not None:
        try:
            code = to_source(known[0], module, code)
        except pysource.Unsafe as exc:
            return None, str(exc)
    return (None, problem) if problem is not None else (code, None)


def check_source(code: str, path: str = "<fixed>") -> str | None:
    """None when `code` parses (libcst) and compiles (CPython: also catches duplicate
    parameters and the like); else why not, in one line."""
    try:
        cst.parse_module(code)
    except cst.ParserSyntaxError as exc:
        return f"the fixed code would not parse: {exc.message} (line {exc.raw_line})"
    except Exception as exc:  # noqa: BLE001 - any failure means "do not apply"
        return f"the fixed code would not parse: {type(exc).__name__}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the user's own SyntaxWarnings are not ours to print
            compile(code, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"the fixed code would not compile: {exc.msg} (line {exc.lineno})"
    except Exception as exc:  # noqa: BLE001
        return f"the fixed code would not compile: {type(exc).__name__}: {exc}"
    return None


# ---- a fix as text edits (SARIF, editors) --------------------------------------------------


def text_edits(source: str, module: cst.Module, fix: Fix) -> list[TextEdit]:
    """The fix as non-overlapping replacements of `source` (which `module` was parsed from),
    one per edit, in source order. Each is the smallest span where the text changes. Empty
    when the fix would write over text libcst did not see as it is (`source.splice`)."""
    known = pysource.registered(module)
    analysis = known[1] if known is not None else None
    statements = _statements(module, source if known is None else None)
    base = statements.base
    starts = statements.starts(source)
    out = []
    for edit in fix.edits:
        new = statements.with_edit(edit)
        if new is None:  # not inside one top-level statement: the whole module, the slow way
            new = Fix([edit], applicability=fix.applicability, description=fix.description).apply(module).code
        if new == base:
            continue
        try:
            start, end, text = pysource.splice(source, base, new, analysis)
        except pysource.Unsafe:
            return []
        sl, sc = pysource.line_col(source, start, starts)
        el, ec = pysource.line_col(source, end, starts)
        out.append(TextEdit(sl, sc, el, ec, text, start, end))
    return sorted(out, key=lambda e: e.start)


# The module whose statements were indexed last: JSON and SARIF ask for the edits of every
# finding of a file in turn, and each must not cost a pass over the whole module (quadratic).
_LAST_STATEMENTS: list = [None, None]


def _statements(module: cst.Module, base: str | None) -> _StatementCode:
    cached_module, cached = _LAST_STATEMENTS
    if cached_module is module and (base is None or cached.base == base):
        return cached
    statements = _StatementCode(module, base)
    _LAST_STATEMENTS[:] = [module, statements]
    return statements


class _StatementCode:
    """`module.code` with one edit applied, from the code of the top-level statement the edit
    is in: the findings of a module (hundreds of call sites, in a long one) cost one pass over
    it, not one transform and code generation of the whole module per edit. `base` is the
    module's code (None: libcst's, generated here once)."""

    def __init__(self, module: cst.Module, base: str | None) -> None:
        self.module = module
        self.where: dict[int, int] = {}
        self.spans: list[tuple[int, int]] = []
        self._starts: tuple[str | None, list[int]] = (None, [])
        parts = [module.code_for_node(node) for node in (*module.header, *module.body, *module.footer)]
        code = "".join(parts)
        self.base = code if base is None else base
        if code != self.base or not module.body:  # e.g. no newline at the end of the file
            return
        offset = sum(map(len, parts[:len(module.header)]))
        for i, (stmt, part) in enumerate(zip(module.body, parts[len(module.header):])):
            self.spans.append((offset, offset + len(part)))
            offset += len(part)
            for node in cstwalk.nodes(stmt):
                self.where[id(node)] = i

    def starts(self, source: str) -> list[int]:
        """source.line_starts(source), once per module."""
        if self._starts[0] is not source:
            self._starts = (source, pysource.line_starts(source))
        return self._starts[1]

    def with_edit(self, edit: tuple[cst.CSTNode, cst.CSTNode]) -> str | None:
        i = self.where.get(id(edit[0]))
        if i is None:
            return None
        stmt = self.module.body[i]
        new = stmt.visit(_replace_one(edit))
        if not isinstance(new, cst.BaseStatement):  # removed or flattened: not one statement
            return None
        start, end = self.spans[i]
        return self.base[:start] + self.module.code_for_node(new) + self.base[end:]


def _replace_one(edit: tuple[cst.CSTNode, cst.CSTNode]) -> cst.CSTTransformer:
    old, replacement = edit

    class _Replace(cst.CSTTransformer):
        def on_leave(self, original, updated):  # type: ignore[override]
            return replacement if original is old else updated

    return _Replace()


def to_source(source: str, module: cst.Module, code: str) -> str:
    """`code` (libcst's code for `module`, parsed from `source`, after edits) as the new
    source: only the changed span is taken from it, so no byte libcst does not keep is lost.
    Raises source.Unsafe when that span is not the source as it is on disk."""
    known = pysource.registered(module)
    base = module.code
    if known is None:
        if base == source:
            return code
        # libcst misprints a few layouts of the untouched module (an empty line between an
        # indented and a dedented comment at the end of the file is dropped): only the span
        # the fix changed is taken, as from an analysis text.
        known = (source, source)
    start, end, text = pysource.splice(source, base, code, known[1])
    return source[:start] + text + source[end:]


def json_edits(source: str, module: cst.Module | None, fix: Fix) -> list[dict]:
    """The fix's edits for JSON output, as ruff writes them: `{"content", "location": {"row",
    "column"}, "end_location": {"row", "column"}}`, 1-based, end exclusive (empty without the
    full tree)."""
    if module is None:
        return []
    return [{"content": e.text, "location": {"row": e.start_line, "column": e.start_column},
             "end_location": {"row": e.end_line, "column": e.end_column}} for e in text_edits(source, module, fix)]


# ---- files ---------------------------------------------------------------------------------


def fix_file(path: str, rules: Iterable[type[Rule]] = ALL_RULES, unsafe: bool = False, write: bool = True,
             exempt: Callable[[FileResult], set[int]] | None = None, root: str | None = None) -> FixResult:
    """Fix a file in place (atomically), keeping its encoding, BOM, line endings and mode.
    With `write=False` nothing is written (for --diff); never through a link leaving `root`.
    Raises files.ReadError when the path cannot be read. When the fixes cannot be written (the
    file is read-only, or changed or vanished since it was read), nothing is written: `not_written` says why and `result` is
    the lint of the file as it is."""
    from cglint import engine, files

    if path.endswith(".ipynb"):  # a notebook: fixed as one module, written back cell by cell
        return _fix_notebook_file(path, rules, unsafe, write, exempt, root)
    rules = list(rules)
    try:
        read = files.read(path)
    except files.UndecodableError:
        result = engine.lint_file(path, rules)
        return FixResult(path, result.source, result.source, [], [], result)
    fixed = fix_source(read.text, path, rules, unsafe, exempt=exempt)
    if write and fixed.changed:
        try:
            write_back(read, fixed.new_source, root)
        except OSError as exc:
            original = engine.lint_source(read.text, path, rules)
            return FixResult(path, read.text, read.text, [], fixed.dropped, original, not_written=_why(exc))
    return fixed


def _why(exc: OSError) -> str:
    from cglint import files

    return files.why(exc)


def write_back(read, text: str, root: str | None = None) -> None:
    """Write `text` over the file `read` (a files.Read) came from, in its encoding and BOM,
    only if the file is still what was read. Raises files.ReadError (naming the path) when the
    file is read-only, changed or gone, or the text does not fit the file's encoding."""
    from cglint import files

    if not read.mode & 0o222:
        raise files.ReadError(read.path, "read-only; fixes not written")
    if not pysource.round_trips(read.raw, read.decoded):
        raise files.ReadError(read.path, cannot_round_trip(read.decoded.encoding))
    try:
        data = pysource.encode(text, read.decoded)
    except UnicodeEncodeError:
        raise files.ReadError(read.path, f"the fixed text does not fit the file's {read.decoded.encoding} "
                                         "encoding; not written") from None
    files.write(read.path, data, expect=read.identity, root=root)


def cannot_round_trip(encoding: str) -> str:
    """Why a file (or buffer) in `encoding` is not fixed: one line."""
    return (f"cannot fix a file in the {encoding} encoding: writing it back would change bytes the fixes "
            "did not touch; not written")


# The one guarded writer (files.write), under the name the CLI and the language server know.
def write_atomic(path, data, expect=None, root=None) -> None:
    from cglint import files

    files.write(path, data, expect=expect, root=root)


__all__ = ["AppliedFix", "DroppedFix", "FixResult", "TextEdit", "applicable", "fix_file", "fix_source",
           "json_edits", "text_edits", "to_source", "validated", "write_atomic", "write_back", "MAX_ROUNDS"]


# ---- notebooks: fixed as one module, written back cell by cell ---------------------------------


def notebook_json_edits(result: FileResult, d: Diagnostic) -> list[dict]:
    """`json_edits` for a finding in a notebook: rows of its cell, and the cell."""
    if result.module is None or d.fix is None:
        return []
    return [{"content": e.text, "location": {"row": e.start_line, "column": e.start_column},
             "end_location": {"row": e.end_line, "column": e.end_column}, "cell": e.cell}
            for e in cell_edits(result, text_edits(result.source, result.module, d.fix))]


def cell_edits(result: FileResult, edits: list) -> list:
    """Text edits of the concatenated module (`text_edits`) moved into their cells
    (`.cell` set, lines within it); none when one would cross a cell boundary."""
    @dataclass(frozen=True)
    class CellTextEdit(TextEdit):
        cell: int = 0

    nb: Notebook | None = result.notebook
    if nb is None:
        return edits
    out = []
    for e in edits:
        start_cell, start_line = nb.position(e.start_line)
        end_cell, end_line = nb.position(e.end_line)
        if start_cell is None or start_cell != end_cell:
            return []
        out.append(CellTextEdit(start_line, e.start_column, end_line, e.end_column, e.text, e.start, e.end,
                                cell=start_cell))
    return out


def fix_notebook_text(raw: str, path: str, rules, unsafe: bool = False, exempt=None):
    """`fix_source` for a notebook's file text: the same rounds of fixes on the
    concatenated module, written back into the changed cells only. Returns a FixResult whose
    `source`/`new_source` are the file's text before and after and whose `result` is the lint
    of the fixed notebook; a notebook that cannot be read or rewritten is left as it is (the
    reason is a DroppedFix)."""
    from dataclasses import replace

    from cglint import engine, notebook

    rules = list(rules)
    before = engine.lint_notebook_text(raw, path, rules)
    nb = before.notebook
    if nb is None or not before.diagnostics:
        return FixResult(path, raw, raw, [], [], before)
    fixed = fix_source(nb.code, path, rules, unsafe, exempt=exempt)
    if not fixed.changed:
        return FixResult(path, raw, raw, [], _moved(nb, fixed.dropped), before, fixed.converged)
    try:
        new_raw, _ = nb.rewrite(fixed.new_source)
    except notebook.NotebookError as exc:
        dropped = [DroppedFix(a.code, a.line, a.description, f"cannot write the notebook back: {exc}")
                   for a in fixed.applied]
        return FixResult(path, raw, raw, [], _moved(nb, dropped), before)
    applied = [replace(a, line=nb.position(a.line)[1]) for a in fixed.applied]
    return FixResult(path, raw, new_raw, applied, _moved(nb, fixed.dropped), engine.lint_notebook_text(new_raw, path, rules),
                         fixed.converged)


def _moved(nb: Notebook, dropped: list) -> list:
    for d in dropped:
        if not isinstance(d.line, str):
            cell, line = nb.position(d.line)
            if cell is not None:
                d.line = f"cell {cell}:{line}"  # printed as `nb.ipynb:cell 3:4: CG005 fix not applied`
    return dropped


def _fix_notebook_file(path: str, rules, unsafe: bool = False, write: bool = True, exempt=None,
                       root: str | None = None):
    """Fix a notebook in place (atomically); `write=False` for --diff."""
    from cglint import engine, files

    rules = list(rules)
    try:
        read = files.read(path)
    except files.UndecodableError:
        result = engine.lint_file(path, rules)
        return FixResult(path, "", "", [], [], result)
    outcome = fix_notebook_text(read.text, path, rules, unsafe, exempt)
    if write and outcome.changed:
        write_back(read, outcome.new_source, root)  # only if the file is still what was read
    return outcome
