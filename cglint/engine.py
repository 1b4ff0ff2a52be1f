"""File -> prefilter -> parse -> model -> rules -> noqa -> diagnostics."""

from __future__ import annotations

import contextlib
import gc
import re
from typing import TYPE_CHECKING, Any, Callable, Iterable, Union

from cglint import files, noqa, quickscan, reach
from cglint import source as pysource
from cglint.diagnostics import Diagnostic, FileResult
from cglint.memory import under_limit

if TYPE_CHECKING:
    import ast

    import libcst as cst

    from cglint.diagnostics import Finding
    from cglint.notebook import Notebook
    from cglint.rules import Rule

# Rules are given as classes or as codes; codes cost nothing until a file needs parsing, so a
# run over files that never mention `custom_gradient` imports neither libcst nor any rule.
Rules = Iterable[Union["type[Rule]", str]]


class InternalError(RuntimeError):
    """A bug in cglint while checking one file; the CLI reports it and exits 2."""


class OutOfMemory(InternalError):
    """Not a bug: the file was not checked for want of memory (a limit set outside cglint)."""


def out_of_memory(exc: BaseException) -> str:
    """A MemoryError as the end of a one-line message, naming the limit when there is one."""
    return f"not enough memory{under_limit()} ({type(exc).__name__}{': ' + str(exc) if str(exc) else ''})"


# Objects that survived paused lints and went straight to the collector's oldest generation;
# past this many, a full collection runs before the next lint (what earlier lints left).
RETAINED_LIMIT = 1_000_000
_retained = 0
_full_collections = -1  # how many full collections Python had made when `_retained` was counted


@contextlib.contextmanager
def paused_gc():
    """Python's cyclic collector off while libcst builds and the model reads a tree: a parse
    allocates millions of nodes, none of them garbage yet, and each allocation burst triggers a
    collection that walks them all again (40 % of a 1,000-site module's lint). Reference
    counting still frees everything acyclic.

    Afterwards the objects the lint allocated go straight to the oldest generation
    (`gc.freeze()` + `gc.unfreeze()`, which moves them without a scan): re-enabling the
    collector as it was would scan them all at the next allocation (0.8 s after a 72,000-line
    module, in a command that is about to exit). Their cycles are collected by a full
    collection before the first lint that finds more than RETAINED_LIMIT of them waiting, so a
    run over many files keeps its memory bounded. Nothing of this is done when someone else
    has frozen objects (their freeze is theirs to undo)."""
    global _retained, _full_collections
    enabled = gc.isenabled()
    if enabled:
        full = gc.get_stats()[-1]["collections"]
        if full != _full_collections:  # a full collection since the count: nothing waits
            _retained, _full_collections = 0, full
        if _retained > RETAINED_LIMIT:
            gc.collect()
            _retained, _full_collections = 0, gc.get_stats()[-1]["collections"]
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_freeze_count() == 0:
                _retained += gc.get_count()[0]  # tracked objects the lint left (allocated - freed)
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def lint_source(
    source: str, path: str, rules: Rules | None = None, prefilter: bool = True,
    apply_noqa: bool = True, tensorflow_aliases: tuple[str, ...] | None = None,
) -> FileResult:
    with paused_gc():
        return _lint_source(source, path, rules, prefilter, apply_noqa, tensorflow_aliases)


def _lint_source(
    source: str, path: str, rules: Rules | None, prefilter: bool,
    apply_noqa: bool, tensorflow_aliases: tuple[str, ...] | None,
) -> FileResult:
    """Lint one module. `prefilter` skips modules no rule can fire on (text test, then Python's
    fast parser). Every way of asking (any output format, the cache, workers, the language
    server, flake8, notebooks) lints the whole module, so the answer cannot depend on how it
    is asked. `apply_noqa=False` keeps what line `# noqa` comments suppress, for hosts that apply their
    own (flake8)."""
    # --report-unused-noqa judges every `# noqa` comment: such files are parsed in full.
    unused_noqa = apply_noqa and rules is not None and any(
        getattr(r, "code", r) == "CG100" for r in rules) and noqa.mentions_noqa(source)
    if unused_noqa:
        prefilter = False
    # A file that mentions no custom gradient may still call one another project module
    # defines (`clip_grad(x=t)`): decided from the files it imports, which then go with the result.
    reaches: tuple[bool, dict[str, str]] | None = None
    if prefilter and not files.may_hold_site(source):
        reaches = quickscan.calls_project_site(source, path)
        if not reaches[0]:
            return FileResult(path, source, [], parsed=False, dependencies=reaches[1])
    # Python's parser decides what is a syntax error, and guards libcst against nesting that
    # crashes it (cglint.source).
    tree, python_error = pysource.parse(source)
    from cglint.rules import CODES, rules as rule_classes

    # Python's parser says where the error is and what it is, as `python file.py` would (an
    # unclosed `(` on the line of the `(`). It is the judge: a file the running Python refuses
    # (a NUL, a second BOM, 3.12 f-strings on 3.11) gets this CG000 and no rule, no fix.
    if python_error is not None:
        return _syntax_error(path, source, rule_classes(CODES if rules is None else rules), python_error.line,
                             python_error.column, f"cannot parse: {python_error.message}", apply_noqa)
    text = pysource.analysis_text(source, tree) if tree is not None else source
    aliases = reach.tensorflow_aliases(path) if tensorflow_aliases is None else tensorflow_aliases
    if prefilter:
        scan = quickscan.scan(text, aliases, tree) if tree is not None else None
        if scan is not None and not scan.relevant:
            reaches = reaches or quickscan.calls_project_site(source, path)
            if not reaches[0]:
                return FileResult(path, source, [], parsed=False, dependencies=reaches[1])
    rules = rule_classes(CODES if rules is None else rules)
    parsed = text
    module, problem, text = _parse_libcst(text, tree)
    if module is None:
        # Python compiles the file but libcst cannot parse it: not the user's syntax error.
        reason = problem[2] if problem is not None else "libcst cannot parse it"
        return FileResult(path, source, [], parsed=False,
                          warnings=[f"not analysed: Python accepts this file but {reason.removeprefix('cannot parse: ')}"])

    if (text != source or "\x0c" in source or source.startswith("\ufeff")):
        # libcst drops a leading BOM and form feeds in indentation: fixes map back (cglint.fix)
        pysource.remember(module, source, text)
    result = analyse(module, source, path, rules, apply_noqa=apply_noqa,
                     unused_noqa=unused_noqa, aliases=aliases,
                     statement_lines=pysource.statement_lines(tree, text) if tree is not None else None)
    if "\x0c" in source and text is not parsed and "\x0c" in parsed:
        pysource.unlift_columns(result.diagnostics, parsed, text)
    return result


def analyse(module, source: str, path: str, rules: list, *, apply_noqa: bool = True, full_tree: bool = True,
            positions: Callable[[list], Any] | None = None, unused_noqa: bool = False,
            aliases: tuple[str, ...] = (), statement_lines: list[tuple[int, int]] | None = None) -> FileResult:
    """A parsed module -> model -> rules -> positions -> noqa. `positions(nodes)` gives each
    finding node its CodeRange (by default the model's position pass over `module`, paid only
    when there are findings; the language server passes positions it computed per statement).
    `full_tree`: `module` is all of `source` (fixes can be applied to it); `aliases`: modules
    configured as re-exports of TensorFlow; `statement_lines`: where each of `module`'s top-level
    statements starts and ends (Python's parse), so positions cost a pass over only the
    statements holding findings."""
    from cglint.model import ModuleModel
    from cglint.model.project import project_for
    from cglint.rules.cg000_syntax_error import SyntaxErrorRule

    try:
        # The project modules it imports are read from disk next to `path` (cglint.model.project).
        model = ModuleModel(module, aliases, project=project_for(aliases), path=None if path.startswith("<") else path)
        findings: list[tuple[type[Rule], Finding]] = []
        for rule in rules:
            findings.extend((rule, f) for f in rule().check(model))
        for _, f in findings:  # a grad fn defined in another module: point at where it is used here
            here = model.local_anchor(f.node, f.site)
            if here is not f.node:
                f.node, f.fix = here, None  # a fix would edit the other file
        where_is: Any = {}
        if findings:
            # Positions cost a codegen pass over the module: only paid when there is something to say.
            where_is = (model.positions_of([f for _, f in findings], statement_lines) if positions is None
                        else positions([f.node for _, f in findings]))
    except RecursionError:
        # Pathological nesting (thousands of operators) exhausts the walk: say so for this file
        # and go on with the others.
        diags = [_diagnostic(path, SyntaxErrorRule, 1, 1, 1, 1, "cannot analyse: nesting too deep")]
        return FileResult(path, source, diags if SyntaxErrorRule in rules else [], parsed=False)
    except Exception as exc:  # a cglint bug must not end the run without saying where
        raise InternalError(f"{path}: {type(exc).__name__}: {exc}") from exc

    diags = []
    if findings:
        seen = set()
        for rule, finding in findings:
            where = where_is[finding.node]
            key = (rule.code, where.start.line, where.start.column, finding.message)
            if key in seen:
                continue
            seen.add(key)
            diag = _diagnostic(path, rule, where.start.line, where.start.column + 1, where.end.line,
                               where.end.column + 1, finding.message)
            diag.fix = finding.fix
            diags.append(diag)
    kept, warnings = suppressed(diags, source) if apply_noqa else (_sorted(diags), [])
    if unused_noqa:
        from cglint.rules import cg100_unused_noqa

        kept = _sorted(kept + cg100_unused_noqa.diagnostics(path, source, module, diags, rules))
    return FileResult(path, source, kept, parsed=True, module=module if full_tree else None, model=model,
                      warnings=warnings, dependencies=model.all_dependencies())


def _parse_libcst(text: str, tree: ast.Module | None) -> tuple[cst.Module | None, tuple[int, int, str] | None, str]:
    """libcst's parse, or (None, (line, column, message)), and the text parsed. `tree`: Python's
    parse of a text with `text`'s lines (None: Python rejects it), which lets a long module be
    parsed in pieces (cglint.cstparse). A file Python accepts may still trip
    libcst's tokenizer on tab/space indentation that Python accepts (it compares indentation
    with tabs as 8 columns and as 1): retried with each indenting tab as one space, which keeps
    both the block structure and every position."""
    import libcst as cst

    from cglint import cstparse

    python_accepts = tree is not None
    try:
        return cstparse.parse_module(text, tree), None, text
    except cst.ParserSyntaxError as exc:
        problem = (exc.raw_line, exc.raw_column + 1, f"cannot parse: {exc.message}")
    except RecursionError:
        problem = (1, 1, "cannot parse: nesting too deep")
    except MemoryError as exc:  # a memory limit: not the file's fault, nor cglint's
        raise OutOfMemory(f"not checked: {out_of_memory(exc)}") from None
    except ImportError as exc:  # libcst cannot run here
        raise InternalError(f"libcst cannot run in this process: {type(exc).__name__}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - e.g. CSTValidationError on a newer Unicode identifier
        problem = None if not str(exc) else (1, 1, f"cannot parse: {type(exc).__name__}: {exc}")
    if python_accepts and "\t" in text:
        untabbed = _INDENT_TABS.sub(lambda m: m.group(0).replace("\t", " "), text)
        try:
            return cstparse.parse_module(untabbed), None, untabbed
        except Exception:  # noqa: BLE001
            pass
    if python_accepts and "\x0c" in text:  # a form feed opening a nested block (cglint.source)
        lifted, shifts = pysource.lift_form_feeds(text)
        if shifts:
            try:
                return cstparse.parse_module(lifted), None, lifted
            except Exception:  # noqa: BLE001
                pass
    return None, problem, text


_INDENT_TABS = re.compile(r"(?m)^[ \t\f]*\t[ \t\f]*")


def _syntax_error(path: str, source: str, rules: list[type[Rule]], line: int, column: int, message: str,
                  apply_noqa: bool) -> FileResult:
    from cglint.rules.cg000_syntax_error import SyntaxErrorRule

    diags = []
    if SyntaxErrorRule in rules:
        diags.append(_diagnostic(path, SyntaxErrorRule, line, column, line, column + 1, message))
    kept, warnings = suppressed(diags, source) if apply_noqa else (_sorted(diags), [])
    return FileResult(path, source, kept, parsed=False, warnings=warnings)


def lint_file(path: str, rules: Rules | None = None) -> FileResult:
    """Lint a file on disk. Raises files.ReadError (naming the path) when it cannot be read as a
    file; content cglint cannot take (undecodable, too large) is a CG000 "cannot read"."""
    if path.endswith(".ipynb"):  # a notebook: its code cells as one module (cglint.notebook)
        from cglint.rules import CODES, rules as rule_classes

        return _lint_notebook_file(path, rule_classes(CODES if rules is None else rules))
    try:
        source = files.read_source(path)
    except files.UndecodableError as exc:
        return unreadable(path, rules, str(exc))
    return lint_source(source, path, rules)


def unreadable(path: str, rules: Rules | None, reason: str) -> FileResult:
    """A file (or stdin) whose bytes cglint cannot take: one CG000 "cannot read", no findings."""
    from cglint.rules import CODES, rules as rule_classes
    from cglint.rules.cg000_syntax_error import SyntaxErrorRule

    rules = rule_classes(CODES if rules is None else rules)
    diags = [_diagnostic(path, SyntaxErrorRule, 1, 1, 1, 1, f"cannot read: {reason}")] if SyntaxErrorRule in rules else []
    return FileResult(path, "", diags, parsed=False)


# ---- notebooks ------------------------------------------------------------------------------


def lint_notebook_text(raw: str, path: str, rules, prefilter: bool = True) -> FileResult:
    """Lint a notebook's file text. The result's `source` is the concatenated module, its
    diagnostics are in cells (`cell`, lines within the cell) and `notebook` maps back."""
    from cglint import notebook

    rules = list(rules)
    if prefilter and not files.may_hold_site(raw):
        return FileResult(path, "", [], parsed=False)
    try:
        nb = notebook.read(raw)
    except notebook.NotebookError as exc:
        return _unreadable_notebook(path, rules, str(exc))
    return lint_notebook(nb, path, rules, prefilter=prefilter)


def _lint_notebook_file(path: str, rules) -> FileResult:
    from cglint import notebook

    rules = list(rules)
    try:
        raw = notebook.read_text(path)
    except files.UndecodableError as exc:
        return _unreadable_notebook(path, rules, str(exc))
    return lint_notebook_text(raw, path, rules)


def lint_notebook(nb: Notebook, path: str, rules, prefilter: bool = True) -> FileResult:
    """A notebook is linted as its code cells joined into one module; findings map back to cells."""
    from cglint.rules import RULES_BY_CODE
    from cglint.rules.cg000_syntax_error import SyntaxErrorRule

    rules = list(rules)
    result = lint_source(nb.code, path, rules, prefilter=prefilter)
    diags = list(result.diagnostics)
    if SyntaxErrorRule in rules and (not prefilter or files.may_hold_site(nb.code)
                                     or any(files.may_hold_site(c.source) for c in nb.cells if c.error)):
        broken = []
        for cell in nb.cells:
            if cell.error is None:
                continue
            line = cell.start + max(1, cell.error.lineno or 1) - 1
            column = max(1, cell.error.offset or 1)
            broken.append(Diagnostic(path=path, line=line, column=column, end_line=line, end_column=column + 1,
                                     code=SyntaxErrorRule.code, name=SyntaxErrorRule.name,
                                     severity=SyntaxErrorRule.severity,
                                     message=f"cannot parse: {cell.error.msg}"))
        kept, _ = noqa.apply(broken, nb.code, RULES_BY_CODE)
        diags += kept
    diags.sort(key=lambda d: (d.line, d.column, d.code))
    result.diagnostics = [nb.to_cell(d) for d in diags]
    result.warnings = [_cell_warning(nb, w) for w in result.warnings]
    result.notebook = nb
    return result


def _cell_warning(nb: Notebook, warning: str) -> str:
    head, sep, rest = warning.partition(": ")
    if sep and head.isdigit():
        cell, line = nb.position(int(head))
        return f"cell {cell}:{line}: {rest}" if cell is not None else warning
    return warning


def _unreadable_notebook(path: str, rules, message: str) -> FileResult:
    from cglint.rules.cg000_syntax_error import SyntaxErrorRule

    diags = []
    if SyntaxErrorRule in rules:
        diags.append(Diagnostic(path=path, line=1, column=1, end_line=1, end_column=1, code=SyntaxErrorRule.code,
                                name=SyntaxErrorRule.name, severity=SyntaxErrorRule.severity,
                                message=f"cannot read notebook: {message}"))
    return FileResult(path, "", diags, parsed=False)



def _diagnostic(path: str, rule: type[Rule], line: int, col: int, end_line: int, end_col: int, message: str) -> Diagnostic:
    return Diagnostic(path=path, line=line, column=col, end_line=end_line, end_column=end_col, code=rule.code,
                      name=rule.name, severity=rule.severity, message=message)


def suppressed(diags: list[Diagnostic], source: str) -> tuple[list[Diagnostic], list[str]]:
    from cglint.rules import CODES, OPT_IN

    return noqa.apply(diags, source, {*CODES, *OPT_IN})


def _sorted(diags: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(diags, key=lambda d: (d.line, d.column, d.code))
