"""What does this expression denote? The one resolution query of the model.

`denote(expr, scope)` answers for any expression a rule, the evaluator or a fix meets: the
functions it may be (`Denotation.kind == "function"`), a class, a project module, a
`tf.Variable`, a constant, a table (dict / list / tuple display), another value, or nothing
(unknown). It reads code the way Python binds it, through the same steps whatever the spelling:

- names and aliases, followed through assignments (`scopes`, `ModuleModel.resolve`);
- module attributes for every import form: `from . import m; m.f`, `import pkg.m as m; m.f`,
  `from pkg import m; m.f`, `import pkg; pkg.m.f`, re-exports through `__init__`
  (`boundaries.module_of`, `Project.symbol`);
- `self.f` / `cls.f` / `super().f` through the class and its bases, `Class.f`, staticmethods;
- tables: `TABLE["k"]`, `TABLE[i]`, `TABLE.get("k")`, `getattr(obj, "name")`, registries;
- `functools.partial`, `functools.wraps` wrappers, decorator factories, functions returned by
  project functions (factories), lambdas and closures.

Every step is bounded (`boundaries.MAX_DEPTH`, `MAX_CALLEES`); beyond a bound, or where the code
does not say, the answer is empty: unknown stays unknown, and no rule may guess past it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from cglint.model.scopes import Param, Scope

if TYPE_CHECKING:
    from cglint.model.boundaries import Callee
    from cglint.model.module import ModuleModel

KINDS = ("function", "class", "module", "variable", "constant", "table", "parameter", "value")

_VARIABLE_CONSTRUCTORS = frozenset({"tensorflow.Variable", "keras.Variable", "tensorflow.compat.v1.get_variable",
                                    "tensorflow.get_variable"})


@dataclass(frozen=True, eq=False)
class Denotation:
    """One thing an expression may denote: `kind` (one of KINDS), the node that defines it (a
    def or lambda, a class, the bound expression; None for a module), the model of the module
    defining it and the scope to read it in. `callee` is set for functions (what is bound
    already: a method's `self`, a partial's arguments)."""

    kind: str
    node: cst.CSTNode | None
    model: ModuleModel
    scope: Scope | None = None
    callee: Callee | None = None


class ResolveQueries:
    """`denote`, and `helper` (the one def a callee denotes) on top of it."""

    def denote(self, expr: cst.BaseExpression | None, scope: Scope) -> list[Denotation]:
        """Everything `expr`, read in `scope`, may denote; empty when the code does not say."""
        if expr is None:
            return []
        model: ModuleModel = self  # type: ignore[assignment]
        module = model.module_of(expr, scope) if isinstance(expr, (cst.Name, cst.Attribute)) else None
        if module is not None:
            return [Denotation("module", None, module)]
        callees = model.callables(expr, scope)
        if callees:
            return [Denotation("function", c.node, c.model, c.scope, c) for c in callees]
        out: list[Denotation] = []
        try:
            values = model.values(expr, scope)
        except RecursionError:  # pragma: no cover - bounded above; never let resolution crash a lint
            return []
        for owner, value, where in values:
            kind = owner._kind_of_value(value, where)
            if kind is None:
                return []  # one unknown possibility makes the whole answer unknown
            out.append(Denotation(kind, value if isinstance(value, cst.CSTNode) else None, owner, where))
        return out

    def _kind_of_value(self, value: object, scope: Scope) -> str | None:
        model: ModuleModel = self  # type: ignore[assignment]
        if isinstance(value, cst.ClassDef):
            return "class"
        if isinstance(value, Param):
            return "parameter"
        if isinstance(value, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString)):
            return "constant"
        if isinstance(value, cst.Name) and value.value in ("None", "True", "False"):
            return "constant"
        if isinstance(value, (cst.Dict, cst.List, cst.Tuple, cst.DictComp, cst.ListComp)):
            return "table"
        if isinstance(value, cst.Call):
            qualname = model.qualname(value.func) or ""
            if qualname in _VARIABLE_CONSTRUCTORS:
                return "variable"
            return "value"
        if isinstance(value, cst.Name):  # an unbound name (a builtin, a global never assigned here)
            return None
        if isinstance(value, cst.BaseExpression):
            return "value"
        return None

    def helper_from_denotation(self, expr: cst.BaseExpression | None, scope: Scope):
        """The one def (not a lambda, not a bound method or partial) `expr` denotes, as a
        `Helper`, or None when it may be several things or is unknown."""
        from cglint.model.sites import Helper

        found = self.denote(expr, scope)
        defs = {id(d.node): d for d in found if d.kind == "function"}
        if not found or len(defs) != 1 or len(found) != len([d for d in found if d.kind == "function"]):
            return None
        d = next(iter(defs.values()))
        c = d.callee
        if not isinstance(d.node, cst.FunctionDef) or c is None or c.bound or c.keywords or d.scope is None:
            return None
        return Helper(d.node, d.scope, d.model)
