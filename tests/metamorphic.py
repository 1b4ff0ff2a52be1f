"""Refactorings that must not change a finding: each rule's INVALID and VALID examples rewritten
the ways real code is written, as a small package on disk (`pkg/main.py` and its siblings).

A refactoring is a function `code -> {relative path: text}` or None where it does not apply
(no helper to move, no module-level custom-gradient def, ...). Each keeps what the program does:
names, import forms, decorators and classes change; no expression that computes a value does.

    python -m tests.metamorphic         print the matrix (rules x refactorings)
"""

from __future__ import annotations

import tempfile
import textwrap
from collections import defaultdict
from pathlib import Path
from collections.abc import Callable

import libcst as cst
from libcst.metadata import MetadataWrapper, ScopeProvider
from libcst.metadata.scope_provider import FunctionScope

Files = dict[str, str]

CG_DECORATORS = ("tf.custom_gradient", "tensorflow.custom_gradient")


def _dotted(node: cst.CSTNode) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


def _is_cg(decorator: cst.Decorator) -> bool:
    return _dotted(decorator.decorator) in CG_DECORATORS


def _single(code: str) -> Files:
    return {"pkg/__init__.py": "", "pkg/main.py": code}


# -- rename every local -------------------------------------------------------------------------


class _Rename(cst.CSTTransformer):
    def __init__(self, targets: set[int]) -> None:
        self.targets = targets

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=f"{updated.value}_r") if id(original) in self.targets else updated


def rename_locals(code: str) -> Files | None:
    """Every name a function binds (not its parameters: callers may pass them by keyword) gets
    another spelling, with every read of it (nested functions' included)."""
    wrapper = MetadataWrapper(cst.parse_module(code))
    scopes = wrapper.resolve(ScopeProvider)
    targets: set[int] = set()
    for scope in set(scopes.values()):
        if not isinstance(scope, FunctionScope):
            continue
        for assignment in scope.assignments:
            node = getattr(assignment, "node", None)
            if isinstance(node, cst.Param):
                continue
            if isinstance(node, (cst.Import, cst.ImportFrom)):
                return None
            if isinstance(node, cst.Name):
                targets.add(id(node))
            elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                targets.add(id(node.name))
            else:
                continue
            for ref in assignment.references:
                if isinstance(ref.node, cst.Name):
                    targets.add(id(ref.node))
    if not targets:
        return None
    new = wrapper.module.visit(_Rename(targets))
    return _single(new.code)


# -- decorators: alias, call form, a functools.wraps wrapper, a staticmethod --------------------


def _top_cg_defs(module: cst.Module) -> list[cst.FunctionDef]:
    return [s for s in module.body if isinstance(s, cst.FunctionDef) and len(s.decorators) == 1
            and _is_cg(s.decorators[0])]


def _after_imports(module: cst.Module, extra: list[cst.BaseStatement]) -> cst.Module:
    body = list(module.body)
    at = 0
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], (cst.Import, cst.ImportFrom)):
            at = i + 1
    return module.with_changes(body=body[:at] + extra + body[at:])


def alias_decorator(code: str) -> Files | None:
    """`custom_grad = tf.custom_gradient` once; `@custom_grad` on every def."""
    module = cst.parse_module(code)
    if "@tf.custom_gradient" not in code or "import tensorflow as tf" not in code:
        return None

    class T(cst.CSTTransformer):
        def leave_Decorator(self, original, updated):
            return updated.with_changes(decorator=cst.Name("custom_grad")) if _is_cg(original) else updated

    new = module.visit(T())
    new = _after_imports(new, [cst.parse_statement("custom_grad = tf.custom_gradient\n")])
    return _single(new.code)


def call_form(code: str) -> Files | None:
    """`@tf.custom_gradient def f` -> `def f` then `f = tf.custom_gradient(f)`."""
    module = cst.parse_module(code)
    defs = _top_cg_defs(module)
    if not defs:
        return None
    body: list[cst.BaseStatement] = []
    for stmt in module.body:
        if stmt in defs:
            body.append(stmt.with_changes(decorators=[]))
            body.append(cst.parse_statement(f"{stmt.name.value} = {_dotted(stmt.decorators[0].decorator)}"
                                            f"({stmt.name.value})\n"))
        else:
            body.append(stmt)
    return _single(module.with_changes(body=body).code)


WRAPPER = '''
def traced(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper
'''


def wraps_wrapper(code: str) -> Files | None:
    """A `functools.wraps` decorator over every module-level custom-gradient def."""
    module = cst.parse_module(code)
    defs = _top_cg_defs(module)
    if not defs:
        return None
    body = [s.with_changes(decorators=[cst.Decorator(cst.Name("traced")), *s.decorators]) if s in defs else s
            for s in module.body]
    new = _after_imports(module.with_changes(body=body), [*cst.parse_module(WRAPPER).body])
    new = new.with_changes(body=[cst.parse_statement("import functools\n"), *new.body])
    return _single(new.code)


def static_method(code: str) -> Files | None:
    """Every module-level custom-gradient def becomes a staticmethod of a class; the module
    name is bound to it (`f = Ops.f`), so callers are unchanged."""
    module = cst.parse_module(code)
    defs = _top_cg_defs(module)
    if not defs:
        return None
    body: list[cst.BaseStatement] = []
    for stmt in module.body:
        if stmt in defs:
            name = stmt.name.value
            # comments above the def (`# cglint: intentional`) stay with it
            method = stmt.with_changes(decorators=[cst.Decorator(cst.Name("staticmethod")), *stmt.decorators])
            cls = cst.ClassDef(name=cst.Name(f"_{name.strip('_')}_ops"), body=cst.IndentedBlock([method]),
                               leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
            body += [cls, cst.parse_statement(f"{name} = _{name.strip('_')}_ops.{name}\n")]
        else:
            body.append(stmt)
    return _single(module.with_changes(body=body).code)


# -- split into a sibling module under each import form -----------------------------------------


def _top_names(stmt: cst.BaseStatement) -> set[str]:
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return {stmt.name.value}
    if isinstance(stmt, cst.SimpleStatementLine):
        out = set()
        for small in stmt.body:
            if isinstance(small, cst.Assign):
                for t in small.targets:
                    if isinstance(t.target, cst.Name):
                        out.add(t.target.value)
            elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                out.add(small.target.value)
        return out
    return set()


def _is_import(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)


class _Reads(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False


def _reads(node: cst.CSTNode) -> set[str]:
    v = _Reads()
    node.visit(v)
    return v.names


def _moved(module: cst.Module, what: str) -> tuple[list[cst.BaseStatement], set[str]] | None:
    """The top-level statements to move (and the names they define): `helpers`, the
    undecorated module-level defs other top-level code reads; `ops`, the custom-gradient defs.
    The module constants they alone read go with them. None when the move would need the
    sibling to import from the main module (a cycle)."""
    stmts = [s for s in module.body if not _is_import(s)]
    defined = {n: s for s in stmts for n in _top_names(s)}
    if what == "helpers":
        chosen = [s for s in stmts if isinstance(s, cst.FunctionDef) and not s.decorators
                  and any(s.name.value in _reads(o) for o in stmts if o is not s)]
    else:
        chosen = [s for s in stmts if isinstance(s, cst.FunctionDef) and any(_is_cg(d) for d in s.decorators)]
    if not chosen:
        return None
    moved = list(chosen)
    changed = True
    while changed:  # the constants and defs the moved code reads move along
        changed = False
        for s in list(moved):
            for name in _reads(s):
                dep = defined.get(name)
                if dep is not None and dep not in moved:
                    if isinstance(dep, cst.ClassDef):
                        return None
                    moved.append(dep)
                    changed = True
    order = [s for s in module.body if s in moved]
    return order, {n for s in order for n in _top_names(s)}


def _qualify(module: cst.Module, names: set[str], prefix: str) -> cst.Module | None:
    """Reads of the module-level `names` become `prefix.name` (None where one is not a plain read)."""
    wrapper = MetadataWrapper(module)
    scopes = wrapper.resolve(ScopeProvider)
    top = scopes[wrapper.module]
    targets: set[int] = set()
    for name in names:
        for assignment in top.assignments[name]:
            for ref in assignment.references:
                if not isinstance(ref.node, cst.Name):
                    return None
                targets.add(id(ref.node))
    if not targets:
        return None

    class T(cst.CSTTransformer):
        def leave_Name(self, original, updated):
            if id(original) in targets:
                return cst.Attribute(value=cst.parse_expression(prefix), attr=cst.Name(original.value))
            return updated

    return wrapper.module.visit(T())


FORMS = {
    "from_import": "from .{sib} import {names}",
    "star_import": "from .{sib} import *",
    "relative_module": "from . import {sib} as H",
    "absolute_module": "import pkg.{sib} as H",
    "from_pkg_module": "from pkg import {sib}",
    "reexport": "from pkg import {names}",  # through pkg/__init__.py
}


def split(what: str, form: str) -> Callable[[str], Files | None]:
    def refactor(code: str) -> Files | None:
        module = cst.parse_module(code)
        found = _moved(module, what)
        if found is None:
            return None
        moved, names = found
        imports = [s for s in module.body if _is_import(s)]
        sib = "helpers" if what == "helpers" else "ops"
        sibling = module.with_changes(body=[*imports, *moved]).code
        rest = module.with_changes(body=[s for s in module.body if s not in moved])
        if form in ("relative_module", "absolute_module", "from_pkg_module"):
            prefix = sib if form == "from_pkg_module" else "H"
            # the names still bound in the main module once the definitions are gone
            probe = rest.with_changes(body=[*rest.body, *[cst.parse_statement(f"{n} = None\n") for n in sorted(names)]])
            qualified = _qualify(probe, names, prefix)
            if qualified is None:
                return None
            rest = qualified.with_changes(body=qualified.body[:len(rest.body)])
        line = FORMS[form].format(sib=sib, names=", ".join(sorted(names)))
        main = _after_imports(rest, [cst.parse_statement(line + "\n")]).code
        files = {"pkg/__init__.py": "", "pkg/main.py": main, f"pkg/{sib}.py": sibling}
        if form == "reexport":
            files["pkg/__init__.py"] = f"from .{sib} import {', '.join(sorted(names))}\n"
        return files

    refactor.__name__ = f"split_{what}_{form}"
    return refactor


REFACTORINGS: dict[str, Callable[[str], Files | None]] = {
    "rename_locals": rename_locals,
    "alias_decorator": alias_decorator,
    "call_form": call_form,
    "wraps_wrapper": wraps_wrapper,
    "staticmethod": static_method,
    **{f"helpers:{form}": split("helpers", form) for form in FORMS},
    **{f"ops:{form}": split("ops", form) for form in FORMS},
}


# -- running ------------------------------------------------------------------------------------


def findings(files: Files, code: str) -> list[tuple[str, int]]:
    """(file, line) of every finding of rule `code` in the package."""
    from cglint.engine import lint_file
    from cglint.rules import ALL_RULES

    rules = [r for r in ALL_RULES if r.code == code]
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        for rel in files:
            result = lint_file(str(root / rel), rules)
            out += [(rel, d.line) for d in result.diagnostics if d.code == code]
    return out


def variants():
    """(rule code, "invalid"/"valid", example index, refactoring, files) for every example and
    every refactoring that applies to it."""
    from cglint.rules import ALL_RULES

    for rule in ALL_RULES:
        if rule.code in ("CG000", "CG100"):
            continue
        for kind, examples in (("invalid", rule.INVALID), ("valid", rule.VALID)):
            for i, example in enumerate(examples):
                code = textwrap.dedent(str(example)).lstrip("\n")
                for name, refactor in REFACTORINGS.items():
                    try:
                        files = refactor(code)
                    except cst.ParserSyntaxError:
                        files = None
                    if files is not None:
                        yield rule.code, kind, i, name, code, files


def matrix() -> tuple[dict, list]:
    """{(rule, refactoring): [invalid kept, invalid applicable, valid flagged, valid applicable]}
    and the failures."""
    table: dict = defaultdict(lambda: [0, 0, 0, 0])
    failures = []
    baseline: dict = {}
    for code, kind, i, name, original, files in variants():
        key = (code, kind, i)
        if key not in baseline:
            baseline[key] = bool(findings(_single(original), code))
        before = baseline[key]
        if kind == "invalid" and not before or kind == "valid" and before:
            continue  # the example itself is not what it says in a package: not a refactoring question
        after = bool(findings(files, code))
        cell = table[(code, name)]
        if kind == "invalid":
            cell[1] += 1
            cell[0] += after
            if not after:
                failures.append((code, kind, i, name))
        else:
            cell[3] += 1
            cell[2] += after
            if after:
                failures.append((code, kind, i, name))
    return table, failures


def render(table: dict) -> str:
    rules = sorted({r for r, _ in table})
    names = list(REFACTORINGS)
    lines = ["rule   " + " ".join(f"{n.split(':')[0][:4] + ':' + n.split(':')[-1][:6] if ':' in n else n[:11]:>11}"
                                  for n in names) + "   invalid kept   valid flagged"]
    totals = [0, 0, 0, 0]
    for r in rules:
        row, sums = [], [0, 0, 0, 0]
        for n in names:
            c = table.get((r, n))
            if c is None or not (c[1] or c[3]):
                row.append(f"{'-':>11}")
                continue
            sums = [a + b for a, b in zip(sums, c)]
            row.append(f"{f'{c[0]}/{c[1]} {c[2]}/{c[3]}':>11}")
        totals = [a + b for a, b in zip(totals, sums)]
        lines.append(f"{r:6} " + " ".join(row) + f"   {sums[0]:>4}/{sums[1]:<4}       {sums[2]:>3}/{sums[3]}")
    lines.append(f"total: INVALID variants keeping their finding {totals[0]}/{totals[1]} = "
                 f"{totals[0] / max(1, totals[1]):.3f}; VALID variants flagged {totals[2]}/{totals[3]}")
    lines.append("(each cell: INVALID kept/applicable, VALID flagged/applicable)")
    return "\n".join(lines)


if __name__ == "__main__":
    t, fails = matrix()
    print(render(t))
    for f in fails:
        print("FAIL", *f)
