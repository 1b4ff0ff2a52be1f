"""File -> prefilter -> parse -> model -> rules -> noqa -> diagnostics."""

from __future__ import annotations

from typing import Iterable

import libcst as cst

from cglint import files, noqa, quickscan, reach
from cglint.diagnostics import Diagnostic, FileResult, Finding
from cglint.model import ModuleModel
from cglint.rules import ALL_RULES, Rule
from cglint.rules.cg000_syntax_error import SyntaxErrorRule
from cglint.rules.cg100_unused_noqa import UnusedNoqa


class InternalError(RuntimeError):
    """A bug in cglint while checking one file; the CLI reports it and exits 2."""


def lint_source(
    source: str, path: str, rules: Iterable[type[Rule]] = ALL_RULES, prefilter: bool = True, reduce: bool = False,
    apply_noqa: bool = True, tensorflow_aliases: tuple[str, ...] | None = None,
) -> FileResult:
    """Lint one module. `prefilter` skips modules no rule can fire on (text test, then Python's
    fast parser); `reduce` lets libcst parse only the statements that matter (same findings,
    same positions) and then leaves `FileResult.module` unset, since fixes need the full tree.
    `apply_noqa=False` keeps what line `# noqa` comments suppress, for hosts that apply their
    own (flake8)."""
    rules = list(rules)
    text = source
    # --report-unused-noqa judges every `# noqa` comment: such files are parsed in full.
    unused_noqa = apply_noqa and UnusedNoqa in rules and noqa.mentions_noqa(source)
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
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        diags = []
        if any(r is SyntaxErrorRule for r in rules):
            message = f"cannot parse: {exc.message}"
            diags.append(_diagnostic(path, SyntaxErrorRule, exc.raw_line, exc.raw_column + 1, exc.raw_line,
                                     exc.raw_column + 2, message))
        kept, warnings = _unsuppressed(diags, source) if apply_noqa else (_sorted(diags), [])
        return FileResult(path, source, kept, parsed=False, warnings=warnings)
    except RecursionError:
        diags = [_diagnostic(path, SyntaxErrorRule, 1, 1, 1, 1, "cannot parse: nesting too deep")]
        return FileResult(path, source, diags if SyntaxErrorRule in rules else [], parsed=False)

    try:
        model = ModuleModel(module, aliases)
        findings: list[tuple[type[Rule], Finding]] = []
        for rule in rules:
            findings.extend((rule, f) for f in rule().check(model))
        # Positions cost a codegen pass over the module: only paid when there is something to say.
        positions = model.positions if findings else {}
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
            where = positions[finding.node]
            key = (rule.code, where.start.line, where.start.column, finding.message)
            if key in seen:
                continue
            seen.add(key)
            diag = _diagnostic(path, rule, where.start.line, where.start.column + 1, where.end.line,
                               where.end.column + 1, finding.message)
            diag.fix = finding.fix
            diags.append(diag)
    kept, warnings = _unsuppressed(diags, source) if apply_noqa else (_sorted(diags), [])
    if unused_noqa:
        from cglint.rules import cg100_unused_noqa

        kept = _sorted(kept + cg100_unused_noqa.diagnostics(path, source, module, diags, rules))
    full = text is source
    return FileResult(path, source, kept, parsed=True, module=module if full else None, model=model,
                      warnings=warnings)


def lint_file(path: str, rules: Iterable[type[Rule]] = ALL_RULES, reduce: bool = False) -> FileResult:
    if path.endswith(".ipynb"):  # a notebook: its code cells as one module (cglint.notebook)
        from cglint import notebook

        return notebook.lint_file(path, rules, reduce=reduce)
    try:
        source = files.read_source(path)
    except files.UndecodableError as exc:
        rules = list(rules)
        diags = [_diagnostic(path, SyntaxErrorRule, 1, 1, 1, 1, f"cannot read: {exc}")] if SyntaxErrorRule in rules else []
        return FileResult(path, "", diags, parsed=False)
    return lint_source(source, path, rules, reduce=reduce)


def _diagnostic(path: str, rule: type[Rule], line: int, col: int, end_line: int, end_col: int, message: str) -> Diagnostic:
    return Diagnostic(path=path, line=line, column=col, end_line=end_line, end_column=end_col, code=rule.code,
                      name=rule.name, severity=rule.severity, message=message)


def _unsuppressed(diags: list[Diagnostic], source: str) -> tuple[list[Diagnostic], list[str]]:
    from cglint.rules import RULES_BY_CODE

    return noqa.apply(diags, source, {*RULES_BY_CODE, UnusedNoqa.code})


def _sorted(diags: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(diags, key=lambda d: (d.line, d.column, d.code))
