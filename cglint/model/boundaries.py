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
read through the project index, which models each file once per content hash.

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

from cglint.model.ops import TF_FUNCTION
from cglint.model.scopes import FunctionNode, Param, Scope, _is_self, _is_staticmethod, argument

if TYPE_CHECKING:
    from cglint.model.module import ModuleModel
    from cglint.model.sites import GradientSite

MAX_DEPTH = 6  # steps followed (a factory's return, a base class, a table entry, ...)
MAX_CALLEES = 8  # functions one expression may stand for before it is "unknown"
MAX_ENTRIES = 64  # entries of one table (literal, comprehension, registry) read
MAX_SIBLINGS = 32  # modules of a registry's directory searched for what fills it

Key = str | int | None  # a table's key; None: not known statically
# (key, the model the value belongs to, the value: an expression or a registered def, its scope)
Entry = tuple[Key, "ModuleModel", "cst.BaseExpression | cst.FunctionDef", Scope]

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
            spec = self.project_imports.get(name)
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
                if isinstance(target, cst.Attribute) and _is_self(target.value) and self._is_custom_gradient(call.func):
                    cls = scope.enclosing_class()
                    if cls is not None:
                        memo.setdefault(id(cls), []).append((target.attr.value, call))
        return memo

    # -- structures: tables and registries of functions

    def _entries(self, sub: cst.Subscript, scope: Scope, depth: int) -> list[tuple[ModuleModel, object, Scope]]:
        """`TABLE["key"]` / `FNS[0]` / `ACTIVATIONS[cfg.act]`: the entries the key may select in
        the tables the container may be (a non-constant key: any of them), each with the model
        and scope to read it in."""
        if len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index):
            return []
        return self._lookup(sub.value, self._constant(sub.slice[0].slice.value, scope), scope, depth)

    def _got(self, call: cst.Call, scope: Scope, depth: int) -> list[tuple[ModuleModel, object, Scope]]:
        """`TABLE.get(key)` / `TABLE.get(key, default)`: as `TABLE[key]`."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "get" and call.args
                and not call.args[0].keyword and not call.args[0].star):
            return []
        return self._lookup(func.value, self._constant(call.args[0].value, scope), scope, depth)

    def _lookup(self, container: cst.BaseExpression, key: Key, scope: Scope,
                depth: int) -> list[tuple[ModuleModel, object, Scope]]:
        out: list[tuple[ModuleModel, object, Scope]] = []
        for model, table, where in self._tables(container, scope, depth):
            wanted = key
            if isinstance(key, int) and key < 0 and isinstance(table, (cst.List, cst.Tuple)):
                wanted = key + len(table.elements)
            entries = model._table_entries(table, where, depth)
            exact = [e for e in entries if wanted is None or e[0] == wanted]
            # a constant key none of the known keys is: an entry whose key is not known
            out += [(m, v, w) for _, m, v, w in (exact or [e for e in entries if e[0] is None])]
        return out[:MAX_CALLEES]

    def _tables(self, expr: cst.BaseExpression, scope: Scope,
                depth: int) -> list[tuple[ModuleModel, cst.CSTNode, Scope]]:
        """The tables a container expression may be: literal dicts, lists and tuples, `dict(...)`
        calls and dict comprehensions, bound to a name (imported or not, `ops.TABLE`), to
        `self.table`, or an entry of another table (`TABLE["gelu"][1]`)."""
        if isinstance(expr, cst.Attribute) and _is_self(expr.value):
            cls = scope.enclosing_class()
            values = cls.attributes.get(expr.attr.value, []) + cls.bindings.get(expr.attr.value, []) if cls else []
            found = [(self, v, self._scope_of_expr(v, cls)) for v in values]  # type: ignore[arg-type]
        elif isinstance(expr, cst.Subscript) and depth < MAX_DEPTH:
            found = [f for m, e, w in self._entries(expr, scope, depth + 1) for f in m.values(e, w)]  # type: ignore[arg-type]
        else:
            found = self.values(expr, scope)
        return [(m, v, w) for m, v, w in found if isinstance(v, (cst.Dict, cst.List, cst.Tuple, cst.Set, cst.DictComp))
                or isinstance(v, cst.Call) and m._is_builtin(v.func, "dict", w)]  # type: ignore[misc]

    def _table_entries(self, table: cst.CSTNode, scope: Scope, depth: int) -> list[Entry]:
        """Every entry of a table of this module, with its key: the display's own, what a
        `dict(...)` call or a comprehension makes, and for a dict, what is stored in it later
        (`_fills`). Bounded by `MAX_ENTRIES`."""
        out: list[Entry] = []
        if isinstance(table, (cst.List, cst.Tuple, cst.Set)):
            if not any(isinstance(el, cst.StarredElement) for el in table.elements):
                out = [(i if not isinstance(table, cst.Set) else None, self, el.value, scope)
                       for i, el in enumerate(table.elements)]
            return out[:MAX_ENTRIES]
        if depth >= MAX_DEPTH:
            return out
        if isinstance(table, cst.Dict):
            for el in table.elements:
                if isinstance(el, cst.DictElement):
                    out.append((self._constant(el.key, scope), self, el.value, scope))
                else:  # `{**BASE, "gelu": gelu}`
                    out += self._merged(el.value, scope, depth)
        elif isinstance(table, cst.Call):  # `dict(relu=relu, swish=swish_cg)`, `dict(BASE, gelu=gelu)`
            for arg in table.args:
                if arg.keyword is not None:
                    out.append((arg.keyword.value, self, arg.value, scope))
                else:
                    out += self._merged(arg.value, scope, depth)
        elif isinstance(table, cst.DictComp):
            out += self._comprehended(table, scope, depth)
        if isinstance(table, (cst.Dict, cst.Call, cst.DictComp)):
            out += self._fills(table, depth)
        return out[:MAX_ENTRIES]

    def _merged(self, expr: cst.BaseExpression, scope: Scope, depth: int) -> list[Entry]:
        """The entries of the tables `expr` may be (merged into another: `**BASE`, `update(BASE)`)."""
        return [e for m, t, w in self._tables(expr, scope, depth + 1) for e in m._table_entries(t, w, depth + 1)]

    def _comprehended(self, comp: cst.DictComp, scope: Scope, depth: int) -> list[Entry]:
        """`{fn.__name__: fn for fn in ALL_OBJECTS}` (Keras's activations): one entry per element
        of the iterated table, keyed by the element's def name where the key is `__name__`."""
        loop = comp.for_in
        if loop.inner_for_in is not None or loop.ifs or not isinstance(loop.target, cst.Name) \
                or not (isinstance(comp.value, cst.Name) and comp.value.value == loop.target.value):
            return []
        by_name = isinstance(comp.key, cst.Attribute) and comp.key.attr.value == "__name__" \
            and isinstance(comp.key.value, cst.Name) and comp.key.value.value == loop.target.value
        out: list[Entry] = []
        own = self.scope_of.get(comp)  # the comprehension's own scope, when it has one
        outer = own.parent if own is not None and own.parent is not None else scope
        for model, value, where in self._merged_values(loop.iter, outer, depth):
            key: Key = None
            if by_name:
                defs = [v for _, v, _ in model.values(value, where) if isinstance(v, cst.FunctionDef)]  # type: ignore[arg-type]
                key = defs[0].name.value if len(defs) == 1 else None
            out.append((key, model, value, where))  # type: ignore[arg-type]
        return out

    def _merged_values(self, expr: cst.BaseExpression, scope: Scope, depth: int) -> list[tuple[ModuleModel, object, Scope]]:
        return [(m, v, w) for _, m, v, w in self._merged(expr, scope, depth)]

    def _fills(self, table: cst.CSTNode, depth: int) -> list[Entry]:
        """What a registry gets after it is made, in its module and the modules of its
        directory that mention it: `TABLE[key] = fn`, `TABLE.update(...)`, and the defs a
        decorator stores there (`@register("swish")` with `def register(name): def deco(fn):
        TABLE[name] = fn; return fn; return deco`, a registry class's `register` method alike)."""
        memo = self.memo("_fills_memo")
        if id(table) in memo:
            return memo[id(table)][1]
        memo[id(table)] = (table, [])  # a registry filled from itself finds nothing more
        # Only a registry other modules can reach (bound at module level, or an attribute of a
        # class) is looked for in the modules of its directory.
        words = {n for scope, n in self._bound_names.get(id(table), ())
                 if scope is self.root or isinstance(scope.node, cst.ClassDef)} | self._attribute_names(table)
        models: list[ModuleModel] = [self]
        if self.project is not None and self.path is not None and words:
            words.add(os.path.splitext(os.path.basename(self.path))[0])
            models += [m for m in self.project.sibling_models(self.path, tuple(sorted(words)), self.memo("_scanned_memo"),
                                                                   MAX_SIBLINGS) if m is not self and m.path != self.path]
        for m in models[1:]:
            self._touch(m)
        out: list[Entry] = []
        for model in models:
            for target, value, scope in model._stores():
                if not any(t is table for _, t, _ in model._tables(target.value, scope, depth + 1)):
                    continue
                key = target.slice[0].slice.value if len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index) \
                    else None
                param = _param_of(value, scope)
                if param is not None:  # a decorator storing what it decorates
                    out += model._registered(scope, param, key, models)
                else:
                    out.append((model._constant(key, scope) if key is not None else None, model, value, scope))
            for call, scope in model._updates():
                if any(t is table for _, t, _ in model._tables(call.func.value, scope, depth + 1)):  # type: ignore[attr-defined]
                    for arg in call.args:
                        if arg.keyword is not None:
                            out.append((arg.keyword.value, model, arg.value, scope))
                        elif not arg.star:
                            out += model._merged(arg.value, scope, depth + 1)
            if len(out) >= MAX_ENTRIES:
                break
        memo[id(table)] = (table, out[:MAX_ENTRIES])
        return memo[id(table)][1]

    def _attribute_names(self, table: cst.CSTNode) -> set[str]:
        """The `self.<name>` attributes of a class bound to `table`."""
        return {name for scope in self.root.walk() for name, values in scope.attributes.items()
                if any(v is table for v in values)}

    def _stores(self) -> list[tuple[cst.Subscript, cst.BaseExpression, Scope]]:
        memo = self.__dict__.setdefault("_stores_memo", [])
        if not memo:
            memo.append([(t, v, scope) for scope in self.root.walk() for t, v in scope.stores])
        return memo[0]

    def _updates(self) -> list[tuple[cst.Call, Scope]]:
        return [(c, s) for c, s in self.all_calls if isinstance(c.func, cst.Attribute) and c.func.attr.value == "update"]

    def _registered(self, deco: Scope, param: int, key: cst.BaseExpression | None,
                    models: list[ModuleModel]) -> list[Entry]:
        """The defs of `models` decorated with a decorator that reaches `deco` (a def of this
        module storing its parameter `param` in a registry under `key`). A def registered
        before `tf.custom_gradient` wraps it (`@tf.custom_gradient` above the registering
        decorator) is registered as the plain function: it is not an entry here."""
        out: list[Entry] = []
        for model in models:
            for fn, scope in model.decorated:
                for i, dec in enumerate(fn.decorators):
                    if not model._may_be_project_decorator(dec.decorator, scope):
                        continue
                    if not any(c.node is deco.node for c in model.callables(dec.decorator, scope, 1)):
                        continue
                    if not any(model._is_custom_gradient(d.decorator.func if isinstance(d.decorator, cst.Call)
                                                         else d.decorator) for d in fn.decorators[:i]):
                        out.append((model._registered_key(fn, dec.decorator, deco, param, key, scope), model, fn, scope))
                    break
        return out

    def _registered_key(self, fn: cst.FunctionDef, decorator: cst.BaseExpression, deco: Scope, param: int,
                        key: cst.BaseExpression | None, scope: Scope) -> Key:
        """The key a registering decorator stores `fn` under: a constant, `fn.__name__`, or the
        argument the decorator call passes for the factory's parameter (`@register("swish")`)."""
        if key is None:
            return None
        if isinstance(key, cst.Attribute) and key.attr.value == "__name__":
            return fn.name.value
        if isinstance(key, (cst.SimpleString, cst.Integer)):
            return key.evaluated_value  # type: ignore[return-value]
        factory = deco.parent
        if not (isinstance(key, cst.Name) and isinstance(decorator, cst.Call) and factory is not None
                and isinstance(factory.node, cst.FunctionDef)):
            return None
        params = [*factory.node.params.posonly_params, *factory.node.params.params]
        names = [p.name.value for p in params]
        if key.value not in names or key.value in deco.bindings:
            return None
        position = names.index(key.value)
        cls = factory.parent
        if cls is not None and isinstance(cls.node, cst.ClassDef) and not _is_staticmethod(factory.node):
            position -= 1  # `self` / `cls` of a registry's method
        arg = argument(decorator, position, key.value)
        return self._constant(arg, scope) if arg is not None else None

    def _may_be_project_decorator(self, decorator: cst.BaseExpression, scope: Scope) -> bool:
        """Cheap: whether a decorator may be a function of the project (not `@tf.function`,
        `@property`, `@functools.wraps(f)`)."""
        func = decorator.func if isinstance(decorator, cst.Call) else decorator
        if isinstance(func, cst.Name):
            return scope.lookup(func.value) is not None or func.value in self.project_imports
        if isinstance(func, cst.Attribute):
            return self.qualname(func) is None or self.module_of(func.value, scope) is not None
        return False

    def _is_builtin(self, func: cst.BaseExpression, name: str, scope: Scope) -> bool:
        return isinstance(func, cst.Name) and func.value == name and scope.lookup(name) is None and name not in self.imports

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
                and self.qualname(decorator) is not None and self.module_of(decorator.value, scope) is None:
            return False  # `@tf.function`, `@functools.wraps(...)`: an import's own attribute
        return any(c.model._wraps(c, what, 0) for c in self.callables(decorator, scope))

    def compiles_under_custom_gradient(self, decorator: cst.BaseExpression, scope: Scope) -> bool:
        """Whether a user decorator (or what a decorator factory's call returns, `@fused_op()`)
        applies `tf.custom_gradient` to `tf.function(...)` of what it decorates: the compiled
        forward must return tensors, not `(y, grad_fn)`."""
        if not self._may_be_project_decorator(decorator, scope):
            return False
        return any(isinstance(c.node, cst.FunctionDef) and c.model._custom_gradient_of_compiled(c)
                   for c in self.callables(decorator, scope))

    def _custom_gradient_of_compiled(self, fn: Callee) -> bool:
        for ret in fn.scope.returns:
            for call in _calls_in(ret.value) if ret.value is not None else []:
                if self._is_custom_gradient(call.func) and call.args and any(
                        isinstance(v, cst.Call) and self.qualname(v.func) in TF_FUNCTION
                        for v in self.resolve(call.args[0].value, fn.scope)):
                    return True
        return False

    def eager_only_params(self, fn: Callee) -> dict[str, str]:
        """The parameters a project helper (here or in another module) turns into NumPy, which
        works on eager tensors only: `t.numpy()` or a `numpy` function reading `t` directly
        (not its static `.shape`/`.dtype`), each with the operation's name. A helper that
        checks `tf.executing_eagerly()` says nothing."""
        if not isinstance(fn.node, cst.FunctionDef):
            return {}
        model, params = fn.model, {p.name.value for p in [*fn.node.params.posonly_params, *fn.node.params.params]}
        out: dict[str, str] = {}
        for scope in fn.scope.walk():
            for call in scope.calls:
                func = call.func
                qualname = model.qualname(func) or ""
                if qualname.endswith("executing_eagerly"):
                    return {}
                if isinstance(func, cst.Attribute) and func.attr.value == "numpy" and not call.args:
                    read, what = [func.value] if isinstance(func.value, cst.Name) else [], "`.numpy()`"
                elif qualname.startswith("numpy."):
                    read = [n for a in call.args for n in model.reads_in(a.value, STATIC_ATTRS)]
                    what = f"`{qualname}`"
                else:
                    continue
                for name in read:
                    if name.value in params and scope.lookup(name.value) is not None \
                            and scope.lookup(name.value)[0] is fn.scope:  # type: ignore[index]
                        out.setdefault(name.value, what)
        return out

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


def _param_of(value: cst.BaseExpression, scope: Scope) -> int | None:
    """The position of the parameter of `scope`'s def that `value` is (`fn` in `def deco(fn)`)."""
    node = scope.node
    if not isinstance(value, cst.Name) or not isinstance(node, cst.FunctionDef):
        return None
    params = [*node.params.posonly_params, *node.params.params]
    for i, p in enumerate(params):
        if p.name.value == value.value and all(isinstance(v, Param) for v in scope.bindings.get(value.value, [])):
            return i
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
