"""File -> prefilter -> parse -> model -> rules -> noqa -> diagnostics."""

from __future__ import annotations

import ast
import warnings
from typing import TYPE_CHECKING, Any, Callable, Iterable, Union

from cglint import files, noqa, quickscan, reach
from cglint.diagnostics import Diagnostic, FileResult

if TYPE_CHECKING:
    from cglint.diagnostics import Finding
    from cglint.rules import Rule

# Rules are given as classes or as codes; codes cost nothing until a file needs parsing, so a
# run over files that never mention `custom_gradient` imports neither libcst nor any rule.
Rules = Iterable[Union["type[Rule]", str]]


class InternalError(RuntimeError):
    """A bug in cglint while checking one file; the CLI reports it and exits 2."""


def lint_source(
    source: str, path: str, rules: Rules | None = None, prefilter: bool = True, reduce: bool = False,
    apply_noqa: bool = True, tensorflow_aliases: tuple[str, ...] | None = None,
) -> FileResult:
    """Lint one module. `prefilter` skips modules no rule can fire on (text test, then Python's
    fast parser); `reduce` lets libcst parse only the statements that matter (same findings,
    same positions) and then leaves `FileResult.module` unset, since fixes need the full tree.
    `apply_noqa=False` keeps what line `# noqa` comments suppress, for hosts that apply their
    own (flake8)."""
    text = source
    scan = None
    # --report-unused-noqa judges every `# noqa` comment: such files are parsed in full.
    unused_noqa = apply_noqa and rules is not None and any(
        getattr(r, "code", r) == "CG100" for r in rules) and noqa.mentions_noqa(source)
    if unused_noqa:
        prefilter = reduce = False
    if prefilter:
        if not files.may_hold_site(source):
            return FileResult(path, source, [], parsed=False)
    aliases = reach.tensorflow_aliases(path) if tensorflow_aliases is None else tensorflow_aliases
    if prefilter:
        scan = quickscan.scan(source, aliases)
        if scan is not None and not scan.relevant:
            return FileResult(path, source, [], parsed=False)
        if reduce and scan is not None:
            text = scan.reduced
    import libcst as cst

    from cglint.rules import CODES, rules as rule_classes
    from cglint.rules.cg000_syntax_error import SyntaxErrorRule

    rules = rule_classes(CODES if rules is None else rules)
    error = _python_syntax_error(source) if scan is None else None
    if error is not None:
        # Python's own parser says where the error is and what it is (as `python file.py`
        # would); libcst's message names a position of its own tokenizer.
        diags = [error] if SyntaxErrorRule in rules else []
        for d in diags:
            d.path = path
        kept, notes = _unsuppressed(diags, source) if apply_noqa else (_sorted(diags), [])
        return FileResult(path, source, kept, parsed=False, warnings=notes)
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        diags = []
        if any(r is SyntaxErrorRule for r in rules):
            message = f"cannot parse: {exc.message.splitlines()[0] if exc.message else 'invalid syntax'}"
            diags.append(_diagnostic(path, SyntaxErrorRule, exc.raw_line, exc.raw_column + 1, exc.raw_line,
                                     exc.raw_column + 2, message))
        kept, notes = _unsuppressed(diags, source) if apply_noqa else (_sorted(diags), [])
        return FileResult(path, source, kept, parsed=False, warnings=notes)
    except RecursionError:
        diags = [_diagnostic(path, SyntaxErrorRule, 1, 1, 1, 1, "cannot parse: nesting too deep")]
        return FileResult(path, source, diags if SyntaxErrorRule in rules else [], parsed=False)

    result = analyse(module, source, path, rules, apply_noqa=apply_noqa, full_tree=text is source,
                     unused_noqa=unused_noqa, aliases=aliases)
    return result


def analyse(module, source: str, path: str, rules: list, *, apply_noqa: bool = True, full_tree: bool = True,
            positions: Callable[[list], Any] | None = None, unused_noqa: bool = False,
            aliases: tuple[str, ...] = ()) -> FileResult:
    """A parsed module -> model -> rules -> positions -> noqa. `positions(nodes)` gives each
    finding node its CodeRange (by default libcst's position pass over `module`, paid only when
    there are findings; the language server passes positions it computed per statement).
    `full_tree`: `module` is all of `source` (fixes can be applied to it); `aliases`: modules
    configured as re-exports of TensorFlow."""
    from cglint.model import ModuleModel
    from cglint.rules.cg000_syntax_error import SyntaxErrorRule

    try:
        model = ModuleModel(module, aliases)
        findings: list[tuple[type[Rule], Finding]] = []
        for rule in rules:
            findings.extend((rule, f) for f in rule().check(model))
        where_is: Any = {}
        if findings:
            # Positions cost a codegen pass over the module: only paid when there is something to say.
            where_is = model.positions if positions is None else positions([f.node for _, f in findings])
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
    kept, notes = _unsuppressed(diags, source) if apply_noqa else (_sorted(diags), [])
    if unused_noqa:
        from cglint.rules import cg100_unused_noqa

        kept = _sorted(kept + cg100_unused_noqa.diagnostics(path, source, module, diags, rules))
    return FileResult(path, source, kept, parsed=True, module=module if full_tree else None, model=model,
                      warnings=notes)


def lint_file(path: str, rules: Rules | None = None, reduce: bool = False) -> FileResult:
    if path.endswith(".ipynb"):  # a notebook: its code cells as one module (cglint.notebook)
        from cglint import notebook
        from cglint.rules import CODES, rules as rule_classes

        return notebook.lint_file(path, rule_classes(CODES if rules is None else rules), reduce=reduce)
    try:
        source = files.read_source(path)
    except files.UndecodableError as exc:
        wanted = list(rules) if rules is not None else ["CG000"]
        if not any(r == "CG000" or getattr(r, "code", None) == "CG000" for r in wanted):
            return FileResult(path, "", [], parsed=False)
        from cglint.rules.cg000_syntax_error import SyntaxErrorRule

        return FileResult(path, "", [_diagnostic(path, SyntaxErrorRule, 1, 1, 1, 1, f"cannot read: {exc}")], parsed=False)
    return lint_source(source, path, rules, reduce=reduce)


def _python_syntax_error(source: str) -> Diagnostic | None:
    """CG000 where Python's parser puts the error (None when it parses), with its message:
    an unclosed `(` is reported on the line of the `(`, as Python reports it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(source)
    except SyntaxError as exc:
        from cglint.rules.cg000_syntax_error import SyntaxErrorRule

        lines = source.splitlines() or [""]
        line = min(max(exc.lineno or 1, 1), len(lines))
        text = lines[line - 1]
        # `offset` is 1-based; Python counts it in code points of the line (bytes before 3.10).
        column = min(max(exc.offset or 1, 1), len(text) + 1)
        end_line, end_column = line, column + 1
        if exc.end_lineno == exc.lineno and exc.end_offset and exc.end_offset > column:
            end_column = min(exc.end_offset, len(text) + 1)
        return _diagnostic("", SyntaxErrorRule, line, column, end_line, end_column, f"cannot parse: {exc.msg}")
    except (ValueError, RecursionError, MemoryError):
        return None  # null bytes, deep nesting: libcst's parse reports what it can
    return None


def _diagnostic(path: str, rule: type[Rule], line: int, col: int, end_line: int, end_col: int, message: str) -> Diagnostic:
    return Diagnostic(path=path, line=line, column=col, end_line=end_line, end_column=end_col, code=rule.code,
                      name=rule.name, severity=rule.severity, message=message)


def _unsuppressed(diags: list[Diagnostic], source: str) -> tuple[list[Diagnostic], list[str]]:
    from cglint.rules import CODES, OPT_IN

    return noqa.apply(diags, source, {*CODES, *OPT_IN})


def _sorted(diags: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(diags, key=lambda d: (d.line, d.column, d.code))
