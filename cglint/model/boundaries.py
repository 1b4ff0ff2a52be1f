"""Across the boundaries real code crosses: which function an expression that names a callable
is, when it is not a plain name bound to a def in this module.

Grad fns, forwards and decorators are reached through a class hierarchy (`self._grad`,
`cls._fwd`, `super()._grad`, bases in other project modules; a base that passes
`self.forward` to `tf.custom_gradient` makes each subclass's `forward` a forward), through structures (a dict or list
of functions indexed by a constant, `GRADS["gelu"]`, or by anything else, `ACTS[cfg.act]`, then
any of its entries; a `dict(...)` call, a comprehension keyed by `fn.__name__`, `.update(...)`,
`.get(key)`; a registry filled by `TABLE[key] = fn` or by a decorator that stores what it
decorates, `@register("swish")` or a registry class's `@REGISTRY.register("swish")`, in the
table's module and the modules of its directory; a field of a config object, namedtuple or
dataclass built in the source, `cfg.grad_fn`), through project modules named by attribute
(`ops.swish`, `mypkg.ops.Layer`, a package `__init__`'s re-exports), through factories (a call of a function that
returns a nested def or lambda, `make_grad(x)`, in this module or another), through
`functools.partial`, and through user decorators that apply `tf.custom_gradient` (`def
cg_op(f): return tf.custom_gradient(f)`, a `functools.wraps` wrapper around it, or a decorator
factory returning one). Every step is bounded (`MAX_DEPTH`, `MAX_CALLEES`); another module is
read through the project index, which models each file once per content hash. Tables and
registries are read by `tables.TableQueries`, decorators by `decorators.DecoratorQueries`.

`sites_reached` answers "which custom-gradient function is this callee" across the same
boundaries: a call is a site's call only when every function the callee may be is one.

A function found in another module is *adopted*: the names it reads are answered by its own
module (`qualname`, `resolve`, `helper`), so rules asking the site's model about a grad fn
defined elsewhere get the defining module's answers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from cglint.model.scopes import FunctionNode, Param, Scope, is_self, is_staticmethod

if TYPE_CHECKING:
    from cglint.model.module import ModuleModel
    from cglint.model.sites import GradientSite

MAX_DEPTH = 6  # steps followed (a factory's return, a base class, a table entry, ...)
MAX_CALLEES = 8  # functions one expression may stand for before it is "unknown"

# Reading these of a tensor gives static metadata, which NumPy may use under tf.function.
STATIC_ATTRS = frozenset({"shape", "dtype", "ndim", "name"})

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
        if isinstance(expr, cst.Attribute):  # `ops.swish` with `from mypkg import ops`
            module = self.module_of(expr.value, scope)
            if module is not None:
                return module._exported(expr.attr.value)
        return [(self, v, scope) for v in self.resolve(expr, scope)]

    # -- project modules named in code: `ops.swish`, `mypkg.ops.Layer`

    def module_of(self, expr: cst.BaseExpression, scope: Scope) -> ModuleModel | None:
        """The project module a name or dotted chain is (`ops` after `from mypkg import ops` or
        `import mypkg.ops as ops`, `mypkg.ops` after `import mypkg`), else None."""
        if isinstance(expr, cst.Name):
            return self._module_named(expr.value) if self._is_imported_name(expr, scope) else None
        if isinstance(expr, cst.Attribute):
            parent = self.module_of(expr.value, scope)
            return parent._submodule(expr.attr.value) if parent is not None else None
        return None

    def _module_named(self, name: str) -> ModuleModel | None:
        memo = self.memo("_modules_memo")
        if name not in memo:
            spec = self.import_spec(name)
            found = None
            # a name the module defines (`from mypkg import swish`) is a binding, not a module
            if spec is not None and self.project is not None and self.path is not None and not self.imported(name):
                found = self.project.module_named(self.path, spec, self.dependencies)
                self._touch(found)
            memo[name] = found
        return memo[name]

    def _submodule(self, name: str) -> ModuleModel | None:
        """`pkg.name` on this package: the module its `__init__` imports as `name`, or its
        submodule `name`."""
        if any(v is not None for v in self.root.bindings.get(name, ())):
            return None
        if name in self.project_imports:
            return self._module_named(name)
        if self.project is None or self.path is None or os.path.basename(self.path) != "__init__.py":
            return None
        path = self.project.module_path(self.path, 1, name)
        loaded = self.project.model(path) if path is not None else None
        if loaded is None:
            return None
        self.dependencies[path] = loaded[1]  # type: ignore[index]
        self._touch(loaded[0])
        return loaded[0]

    def _exported(self, name: str) -> list[tuple[ModuleModel, object, Scope]]:
        """What `module.name` is: the module's own top-level bindings, or what it re-exports."""
        values = [v for v in self.root.visible(name, None) if v is not None]
        if values:
            return [(self, v, self.root) for v in values]
        return [(m, v, m.root) for m, v in self.imported(name)]

    def _touch(self, model: ModuleModel | None) -> None:
        """`model`'s files are dependencies of this module's answers (`all_dependencies`)."""
        if model is not None and model is not self:
            self.memo("_touched_memo")[id(model)] = model  # followed in this lint (see `memo`)

    def _is_imported_name(self, name: cst.Name, scope: Scope) -> bool:
        found = scope.lookup(name.value)
        return self.import_spec(name.value) is not None and (found is None or all(v is None for v in found[1]))

    def _callables_of(self, value: object, scope: Scope, depth: int) -> list[Callee]:
        if isinstance(value, (cst.FunctionDef, cst.Lambda)):
            if value not in self.scope_of:
                return []
            cls = self.scope_of[value].parent
            bound = 1 if isinstance(value, cst.FunctionDef) and cls is not None and isinstance(cls.node, cst.ClassDef) \
                and not is_staticmethod(value) else 0
            return [Callee(value, self, bound)]
        if depth >= MAX_DEPTH:
            return []
        if isinstance(value, cst.Call):
            return self._called(value, scope, depth + 1)
        if isinstance(value, cst.Attribute):
            return self._attribute(value, scope, depth + 1)
        if isinstance(value, cst.Subscript):
            return [c for model, entry, where in self._entries(value, scope, depth + 1)
                    for c in model.callables(entry, where, depth + 1)]  # type: ignore[arg-type]
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
        looked_up = self._got(call, scope, depth)
        if looked_up:
            return [c for model, entry, where in looked_up for c in model.callables(entry, where, depth + 1)]  # type: ignore[arg-type]
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
        if is_self(base) or _is_super(base):
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
                else:  # `registry.register` with `registry = Registry(...)`: the class's method
                    out += [c for m, cls, _ in model.values(value.func, where) if isinstance(cls, cst.ClassDef)
                            and cls in m.scope_of for c in m.method(m.scope_of[cls], name, depth + 1)]
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
            else:  # a class here, or `ops.Layer` of a project module
                found = [(m, v) for m, v, _ in self.values(expr, cls.parent or self.root)]  # type: ignore[misc]
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
                if isinstance(target, cst.Attribute) and is_self(target.value) and self._is_custom_gradient(call.func):
                    cls = scope.enclosing_class()
                    if cls is not None:
                        memo.setdefault(id(cls), []).append((target.attr.value, call))
        return memo

    # -- which custom-gradient functions a callee expression is

    def sites_reached(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> list[GradientSite | None]:
        """The custom-gradient functions a callee (`ops.swish`, `ACTIVATIONS[name]`,
        `get_activation(name)`, `ACTS.get(name)`) may be: each candidate's site, or None for a
        candidate that is a plain function; empty when nothing is known."""
        if depth > MAX_DEPTH:
            return []
        out: list[GradientSite | None] = []
        for model, value, where in self.values(expr, scope):
            out += model._sites_of(value, where, depth)
        return out[:MAX_CALLEES]

    def _sites_of(self, value: object, scope: Scope, depth: int) -> list[GradientSite | None]:
        if isinstance(value, cst.FunctionDef):
            return [next((s for s in self.module_sites() if s.forward is value and isinstance(s.wrapper, cst.Decorator)),
                         None)]
        if isinstance(value, cst.Lambda):
            return [None]
        if isinstance(value, cst.Attribute):  # `Ops.op` (a staticmethod), `self.op`, a record's field
            return [next((s for s in c.model.module_sites() if s.forward is c.node), None)
                    for c in self.callables(value, scope, depth + 1)]
        if isinstance(value, cst.Subscript):
            return [s for m, v, w in self._entries(value, scope, depth + 1) for s in m.sites_reached(v, w, depth + 1)]  # type: ignore[arg-type]
        if not isinstance(value, cst.Call) or depth >= MAX_DEPTH:
            return []
        if self._is_custom_gradient(value.func):
            return [next((s for s in self.module_sites() if s.wrapper is value), None)]
        looked_up = self._got(value, scope, depth + 1)
        if looked_up:
            return [s for m, v, w in looked_up for s in m.sites_reached(v, w, depth + 1)]  # type: ignore[arg-type]
        out: list[GradientSite | None] = []
        for factory in self.callables(value.func, scope, depth + 1):  # `get_activation(name)`: what it returns
            if isinstance(factory.node, cst.FunctionDef):
                for ret in factory.scope.returns:
                    if ret.value is not None:
                        out += factory.model.sites_reached(ret.value, factory.scope, depth + 1)
        return out

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


def param_of(value: cst.BaseExpression, scope: Scope) -> int | None:
    """The position of the parameter of `scope`'s def that `value` is (`fn` in `def deco(fn)`)."""
    node = scope.node
    if not isinstance(value, cst.Name) or not isinstance(node, cst.FunctionDef):
        return None
    params = [*node.params.posonly_params, *node.params.params]
    for i, p in enumerate(params):
        if p.name.value == value.value and all(isinstance(v, Param) for v in scope.bindings.get(value.value, [])):
            return i
    return None


def calls_in(value: object) -> list[cst.Call]:
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
