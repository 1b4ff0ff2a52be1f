"""Across the boundaries real code crosses: which function an expression that names a callable
is, when it is not a plain name bound to a def in this module.

Grad fns, forwards and decorators are reached through a class hierarchy (`self._grad`,
`cls._fwd`, `super()._grad`, bases in other project modules; a base that passes
`self.forward` to `tf.custom_gradient` makes each subclass's `forward` a forward), through structures (a dict or list
of functions indexed by a constant, `GRADS["gelu"]`; a field of a config object, namedtuple or
dataclass built in the source, `cfg.grad_fn`), through factories (a call of a function that
returns a nested def or lambda, `make_grad(x)`, in this module or another), through
`functools.partial`, and through user decorators that apply `tf.custom_gradient` (`def
cg_op(f): return tf.custom_gradient(f)`, a `functools.wraps` wrapper around it, or a decorator
factory returning one). Every step is bounded (`MAX_DEPTH`, `MAX_CALLEES`); another module is
read through the project index, which models each file once per content hash.

A function found in another module is *adopted*: the names it reads are answered by its own
module (`qualname`, `resolve`, `helper`), so rules asking the site's model about a grad fn
defined elsewhere get the defining module's answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from cglint.model.ops import TF_FUNCTION
from cglint.model.scopes import FunctionNode, Scope, _is_self, _is_staticmethod

if TYPE_CHECKING:
    from cglint.model.module import ModuleModel
    from cglint.model.sites import GradientSite

MAX_DEPTH = 6  # steps followed (a factory's return, a base class, a table entry, ...)
MAX_CALLEES = 8  # functions one expression may stand for before it is "unknown"


@dataclass(frozen=True, eq=False)
class Callee:
    """A function an expression may be: its def or lambda, the module defining it, and what is
    bound already (a method's `self`, a partial's arguments)."""

    node: FunctionNode
    model: ModuleModel
    bound: int = 0
    keywords: frozenset[str] = frozenset()

    @property
    def scope(self) -> Scope:
        return self.model.scope_of[self.node]


class BoundaryQueries:
    """`callables`, `applies_custom_gradient` and adoption of functions of other modules."""

    def callables(self, expr: cst.BaseExpression | None, scope: Scope, depth: int = 0) -> list[Callee]:
        """The functions `expr` (read in `scope` of this module) may be; empty when unknown."""
        if expr is None or depth > MAX_DEPTH:
            return []
        owner = self._owner_of(expr)
        if owner is not None:
            return owner.callables(expr, scope, depth)
        out: list[Callee] = []
        for model, value, where in self.values(expr, scope):
            out += model._callables_of(value, where, depth + 1 if model is not self else depth)
        return out[:MAX_CALLEES]

    def values(self, expr: cst.BaseExpression, scope: Scope) -> list[tuple[ModuleModel, object, Scope]]:
        """`resolve`, and for a name imported from a project module, its bindings there: each
        value with the model and scope to read it in."""
        if isinstance(expr, cst.Name) and self._is_imported_name(expr, scope):
            return [(m, v, m.root) for m, v in self.imported(expr.value)]
        return [(self, v, scope) for v in self.resolve(expr, scope)]

    def _is_imported_name(self, name: cst.Name, scope: Scope) -> bool:
        found = scope.lookup(name.value)
        return name.value in self.project_imports and (found is None or all(v is None for v in found[1]))

    def _callables_of(self, value: object, scope: Scope, depth: int) -> list[Callee]:
        if isinstance(value, (cst.FunctionDef, cst.Lambda)):
            if value not in self.scope_of:
                return []
            cls = self.scope_of[value].parent
            bound = 1 if isinstance(value, cst.FunctionDef) and cls is not None and isinstance(cls.node, cst.ClassDef) \
                and not _is_staticmethod(value) else 0
            return [Callee(value, self, bound)]
        if depth >= MAX_DEPTH:
            return []
        if isinstance(value, cst.Call):
            return self._called(value, scope, depth + 1)
        if isinstance(value, cst.Attribute):
            return self._attribute(value, scope, depth + 1)
        if isinstance(value, cst.Subscript):
            return [c for entry, where in self._entries(value, scope, depth + 1)
                    for c in self.callables(entry, where, depth + 1)]
        return []

    # -- calls: functools.partial and factories

    def _called(self, call: cst.Call, scope: Scope, depth: int) -> list[Callee]:
        if self.qualname(call.func) == "functools.partial":
            if not call.args or any(a.star for a in call.args[1:]):
                return []
            rest = call.args[1:]
            keywords = frozenset(a.keyword.value for a in rest if a.keyword is not None)
            return [Callee(c.node, c.model, c.bound + sum(1 for a in rest if a.keyword is None), c.keywords | keywords)
                    for c in self.callables(call.args[0].value, scope, depth)]
        out: list[Callee] = []
        for factory in self.callables(call.func, scope, depth):  # what the factory returns
            if isinstance(factory.node, cst.FunctionDef):
                for ret in factory.scope.returns:
                    if ret.value is not None:
                        out += factory.model.callables(ret.value, factory.scope, depth + 1)
        return out

    # -- attributes: methods through the class hierarchy, fields of built objects

    def _attribute(self, attr: cst.Attribute, scope: Scope, depth: int) -> list[Callee]:
        name, base = attr.attr.value, attr.value
        if _is_self(base) or _is_super(base):
            cls = scope.enclosing_class()
            if cls is None:
                return []
            if _is_super(base):
                return [c for model, parent in self.bases(cls) for c in model.method(parent, name, depth + 1)]
            return self.method(cls, name, depth)
        out: list[Callee] = []
        for model, value, where in self.values(base, scope):
            if isinstance(value, cst.Call):
                field = model._field(value, name, where, depth)
                if field is not None:
                    out += model.callables(field[0], field[1], depth + 1)
            elif isinstance(value, cst.ClassDef) and value in model.scope_of:
                # `Ops.backward` on the class: only a classmethod comes with its first argument bound.
                out += [c if isinstance(c.node, cst.FunctionDef) and _is_classmethod(c.node)
                        else Callee(c.node, c.model, c.bound - 1 if c.bound else 0, c.keywords)
                        for c in model.method(model.scope_of[value], name, depth)]
        return out

    def method(self, cls: Scope, name: str, depth: int = 0) -> list[Callee]:
        """`name` looked up on instances of the class `cls`: its own defs and `self.name = ...`
        in its methods, then its bases (in this module or imported from the project)."""
        if depth > MAX_DEPTH:
            return []
        defs = [v for v in cls.bindings.get(name, []) if isinstance(v, (cst.FunctionDef, cst.Lambda))]
        if defs:
            return [c for d in defs for c in self._callables_of(d, cls, depth)]
        if name in cls.attributes:  # `self._grad = make_grad(...)` in `__init__`
            out: list[Callee] = []
            for value in cls.attributes[name]:
                where = self._scope_of_expr(value, cls)
                out += self._callables_of(value, where, depth + 1) if not isinstance(value, cst.Name) \
                    else self.callables(value, where, depth + 1)
            return out
        for model, parent in self.bases(cls):
            found = model.method(parent, name, depth + 1)
            if found:
                return found
        return []

    def bases(self, cls: Scope) -> list[tuple[ModuleModel, Scope]]:
        """The class scopes `cls`'s bases name, here or in another project module."""
        out: list[tuple[ModuleModel, Scope]] = []
        if not isinstance(cls.node, cst.ClassDef):
            return out
        for base in cls.node.bases:
            expr = base.value
            if isinstance(expr, cst.Name) and self._is_imported_name(expr, self.root):
                found = self.imported(expr.value)
            else:
                found = [(self, v) for v in self.resolve(expr, cls.parent or self.root)]
            out += [(model, model.scope_of[v]) for model, v in found
                    if isinstance(v, cst.ClassDef) and v is not cls.node and v in model.scope_of]
        return out

    def _field(self, call: cst.Call, name: str, scope: Scope, depth: int) -> tuple[cst.BaseExpression, Scope] | None:
        """`Config(grad_fn=g).grad_fn` -> `g`: the argument a constructor call of a class (a
        dataclass, a `NamedTuple`, a `namedtuple(...)` made in the source) passes for field `name`."""
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == name:
                return arg.value, scope
        fields = self._fields(call.func, scope, depth)
        if fields is None or name not in fields:
            return None
        index = fields.index(name)
        for i, arg in enumerate(call.args):
            if arg.keyword is not None or arg.star:
                return None
            if i == index:
                return arg.value, scope
        return None

    def _fields(self, func: cst.BaseExpression, scope: Scope, depth: int) -> list[str] | None:
        """The positional fields of a record class: a class body's annotated names (dataclass,
        NamedTuple) or `namedtuple("P", ["a", "b"])` / `namedtuple("P", "a b")`."""
        for value in self.resolve(func, scope):
            if isinstance(value, cst.ClassDef):
                return [s.body[0].target.value for s in value.body.body  # type: ignore[union-attr]
                        if isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.AnnAssign)
                        and isinstance(s.body[0].target, cst.Name)]
            if isinstance(value, cst.Call) and (self.qualname(value.func) or "").endswith("namedtuple") \
                    and len(value.args) >= 2:
                names = value.args[1].value
                if isinstance(names, cst.SimpleString):
                    return str(names.evaluated_value).replace(",", " ").split()
                if isinstance(names, (cst.List, cst.Tuple)):
                    out = [el.value.evaluated_value for el in names.elements if isinstance(el.value, cst.SimpleString)]
                    return out if len(out) == len(names.elements) else None  # type: ignore[return-value]
        return None

    # -- custom-gradient functions of other modules

    def imported_site(self, name: str) -> GradientSite | None:
        """The custom-gradient function an imported name is (`from .ops import scale`, with
        `@tf.custom_gradient def scale` or `scale = tf.custom_gradient(_scale)` in ops.py)."""
        for model, value in self.imported(name):
            for site in model.module_sites():
                target = site.forward if isinstance(site.wrapper, cst.Decorator) else site.wrapper
                if target is value:
                    return site
        return None

    def module_sites(self) -> list[GradientSite]:
        """This module's sites, found on first use in a module modelled for its bindings only."""
        if self.linted:
            return self.sites
        memo = self.memo("_module_sites")
        if "sites" not in memo:
            memo["sites"] = self._find_sites()
        return memo["sites"]

    # -- template methods: a base wraps `self.<name>`, a subclass here defines it

    def overriding_forwards(self) -> list[tuple[cst.FunctionDef, cst.Call, Scope]]:
        """Forwards a class of this module defines for a base that wraps them: the base (here or
        in another project module) calls `tf.custom_gradient(self._forward)`, the subclass
        overrides `_forward`, and TensorFlow runs the override. (def, the base's call, class)."""
        out: list[tuple[cst.FunctionDef, cst.Call, Scope]] = []
        for cls in self.root.walk():
            if not isinstance(cls.node, cst.ClassDef) or not cls.node.bases:
                continue
            seen: set[int] = set()
            todo, steps = self.bases(cls), 0
            while todo and steps < 16:
                model, base = todo.pop(0)
                steps += 1
                if id(base) in seen:
                    continue
                seen.add(id(base))
                for name, call in model._wrapped_methods().get(id(base), ()):
                    own = [v for v in cls.bindings.get(name, []) if isinstance(v, cst.FunctionDef)]
                    if own and all(id(own[0]) != id(d) for d, _, _ in out):
                        if model is not self:
                            self._adopt_expr(model, call)
                        out.append((own[0], call, cls))
                todo += model.bases(base)
        return out

    def _wrapped_methods(self) -> dict[int, list[tuple[str, cst.Call]]]:
        """id(class scope) -> the `self.<name>` methods its methods pass to tf.custom_gradient."""
        memo = self.__dict__.get("_wrapped_methods_memo")
        if memo is None:
            memo = self.__dict__["_wrapped_methods_memo"] = {}
            for call, scope in self.all_calls:
                target = call.args[0].value if call.args else None
                if isinstance(target, cst.Attribute) and _is_self(target.value) and self._is_custom_gradient(call.func):
                    cls = scope.enclosing_class()
                    if cls is not None:
                        memo.setdefault(id(cls), []).append((target.attr.value, call))
        return memo

    # -- structures: tables of functions indexed by a constant

    def _entries(self, sub: cst.Subscript, scope: Scope, depth: int) -> list[tuple[cst.BaseExpression, Scope]]:
        """`TABLE["key"]` / `FNS[0]`: the entry a constant key selects in a literal dict, list or
        tuple the container is bound to (here, an imported table, or `self.table`)."""
        if len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index):
            return []
        key = self._constant(sub.slice[0].slice.value, scope)
        if key is None:
            return []
        out: list[tuple[cst.BaseExpression, Scope]] = []
        for model, table, where in self._tables(sub.value, scope, depth):
            entry = _entry(table, key)
            if entry is not None:
                out.append((entry, where))
                if model is not self:
                    self._adopt_expr(model, entry)
        return out

    def _tables(self, expr: cst.BaseExpression, scope: Scope,
                depth: int) -> list[tuple[ModuleModel, cst.CSTNode, Scope]]:
        """The literal dicts, lists and tuples a container expression may be: a name (imported
        or not), `self.table`, or an entry of another table (`TABLE["gelu"][1]`)."""
        if isinstance(expr, cst.Attribute) and _is_self(expr.value):
            cls = scope.enclosing_class()
            values = cls.attributes.get(expr.attr.value, []) + cls.bindings.get(expr.attr.value, []) if cls else []
            found = [(self, v, self._scope_of_expr(v, cls)) for v in values]  # type: ignore[arg-type]
        elif isinstance(expr, cst.Subscript) and depth < MAX_DEPTH:
            found = [(self, v, w) for e, w in self._entries(expr, scope, depth + 1) for v in self.resolve(e, w)]
        else:
            found = self.values(expr, scope)
        return [(m, v, w) for m, v, w in found if isinstance(v, (cst.Dict, cst.List, cst.Tuple))]

    def _constant(self, expr: cst.BaseExpression, scope: Scope) -> str | int | None:
        values = self.resolve(expr, scope)
        if len(values) != 1:
            return None
        value = values[0]
        if isinstance(value, cst.SimpleString):
            return str(value.evaluated_value)
        if isinstance(value, cst.Integer):
            return int(value.evaluated_value)
        return None

    # -- decorators that apply tf.custom_gradient

    def applies_custom_gradient(self, decorator: cst.BaseExpression, scope: Scope) -> bool:
        """Whether a decorator that is not `tf.custom_gradient` itself applies it: a function
        (here or imported) returning `tf.custom_gradient(f)` (possibly under `tf.function(...)`)
        or a wrapper that does (`return tf.custom_gradient(f)(*args)`, a `@tf.custom_gradient`
        wrapper), or a decorator factory returning such a function."""
        return self._applies(decorator, scope, "custom_gradient")

    def applies_tf_function(self, decorator: cst.BaseExpression, scope: Scope) -> bool:
        """The same for `tf.function`: a user decorator (`def compiled(f): return
        tf.function(f, jit_compile=True)`, imported or not) that compiles what it decorates."""
        return self._applies(decorator, scope, "function")

    def _applies(self, decorator: cst.BaseExpression, scope: Scope, what: str) -> bool:
        if isinstance(decorator, cst.Name) and scope.lookup(decorator.value) is None \
                and decorator.value not in self.project_imports:
            return False  # a builtin, TensorFlow or an installed package: never project code
        if isinstance(decorator, cst.Attribute) and not _is_self(decorator.value) \
                and self.qualname(decorator) is not None:
            return False  # `@tf.function`, `@functools.wraps(...)`: an import's own attribute
        return any(c.model._wraps(c, what, 0) for c in self.callables(decorator, scope))

    def _is_wanted(self, func: cst.BaseExpression, what: str) -> bool:
        return self._is_custom_gradient(func) if what == "custom_gradient" else self.qualname(func) in TF_FUNCTION

    def _wraps(self, fn: Callee, what: str, depth: int) -> bool:
        if depth > 2 or not isinstance(fn.node, cst.FunctionDef):
            return False
        if any(self._is_wanted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator, what)
               for d in fn.node.decorators):
            return depth > 0  # a nested wrapper the decorator returns, decorated with it
        return any(self._makes(ret.value, fn.scope, what, depth) for ret in fn.scope.returns)

    def _makes(self, expr: cst.BaseExpression | None, scope: Scope, what: str, depth: int) -> bool:
        """Whether a returned value is `tf.custom_gradient(...)` (`what`), a call of or on one
        (`tf.function(op)`, `op(*args)` with `op = tf.custom_gradient(f)`), or a nested wrapper
        that returns one."""
        if expr is None or depth > 3:
            return False
        for value in self.resolve(expr, scope):
            if isinstance(value, cst.FunctionDef) and value in self.scope_of:
                if self._wraps(Callee(value, self), what, depth + 1):
                    return True
                continue
            for call in _calls_in(value):
                if self._is_wanted(call.func, what):
                    return True
                if isinstance(call.func, cst.Name) and self._makes(call.func, scope, what, depth + 1):
                    return True
                if any(isinstance(a.value, cst.Name) and self._makes(a.value, scope, what, depth + 1)
                       for a in call.args if not a.keyword):
                    return True
        return False

    # -- adoption of functions defined in other modules

    def adopt(self, callee: Callee, at: cst.CSTNode) -> None:
        """Let this model answer for a function of another module (see the module docstring);
        `at`: the expression of this module that reaches it, where findings about it point."""
        if callee.model is self:
            return
        for scope in callee.scope.walk():
            for name in scope.reads:
                self._foreign[id(name)] = (name, callee.model)
        anchors = self.__dict__.setdefault("_foreign_anchors", {})
        if id(callee.node) not in anchors:
            stack: list[cst.CSTNode] = [callee.node]
            while stack:
                node = stack.pop()
                anchors[id(node)] = (node, callee.node, at)
                stack.extend(node.children)

    def local_anchor(self, node: cst.CSTNode, site: GradientSite | None = None) -> cst.CSTNode:
        """Where a finding on `node` points in this module: `node`, or for a node of an adopted
        function of another module, the expression here that reaches it (for `site`'s grad fn,
        the one in that site's return)."""
        hit = self.__dict__.get("_foreign_anchors", {}).get(id(node))
        if hit is None or hit[0] is not node:
            return node
        ats = [g.at for g in site.grad_fns if g.node is hit[1] and g.at is not None] if site is not None else []
        return ats[0] if ats else hit[2]

    def _adopt_expr(self, model: ModuleModel, expr: cst.CSTNode) -> None:
        for name in model.reads_in(expr):  # type: ignore[arg-type]
            self._foreign[id(name)] = (name, model)

    @property
    def _foreign(self) -> dict[int, tuple[cst.Name, ModuleModel]]:
        return self.__dict__.setdefault("_foreign_names", {})

    def _owner_of(self, expr: cst.CSTNode) -> ModuleModel | None:
        """The other module whose adopted function `expr` (a name, or an attribute chain on
        one) is read in, or None for this module's own nodes."""
        foreign = self.__dict__.get("_foreign_names")
        if not foreign:
            return None
        while isinstance(expr, cst.Attribute):
            expr = expr.value
        hit = foreign.get(id(expr))
        return hit[1] if hit is not None and hit[0] is expr else None

    def _scope_of_expr(self, value: object, cls: Scope) -> Scope:
        """The scope (a method of `cls`, or `cls`) an expression bound in the class is read in."""
        names = self.reads_in(value) if isinstance(value, cst.BaseExpression) else []
        if names:
            for scope in cls.walk():
                if any(n is names[0] for n in scope.reads):
                    return scope
        return cls


def _is_classmethod(fn: cst.FunctionDef) -> bool:
    return any(isinstance(d.decorator, cst.Name) and d.decorator.value == "classmethod" for d in fn.decorators)


def _is_super(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "super"


def _entry(table: cst.CSTNode, key: str | int) -> cst.BaseExpression | None:
    if isinstance(table, cst.Dict) and isinstance(key, str):
        for el in table.elements:
            if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString) \
                    and el.key.evaluated_value == key:
                return el.value
        return None
    if isinstance(table, (cst.List, cst.Tuple)) and isinstance(key, int):
        elements = table.elements
        if any(isinstance(el, cst.StarredElement) for el in elements) or not -len(elements) <= key < len(elements):
            return None
        return elements[key].value
    return None


def _calls_in(value: object) -> list[cst.Call]:
    """The calls an expression is made of, outermost first (`tf.function(tf.custom_gradient(f))`,
    `custom_gradient(f)(*args)`): callees and positional arguments, nothing deeper."""
    out: list[cst.Call] = []
    stack = [value]
    while stack and len(out) < 8:
        node = stack.pop()
        if isinstance(node, cst.Call):
            out.append(node)
            stack.append(node.func)
            stack.extend(a.value for a in node.args)
    return out
