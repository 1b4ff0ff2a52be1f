"""Tables and registries of functions: which functions a structure indexed in code may hold.

A dict or list of functions indexed by a constant (`GRADS["gelu"]`) or by anything else
(`ACTS[cfg.act]`: any entry); a `dict(...)` call, a comprehension keyed by `fn.__name__`,
`.update(...)`, `.get(key)`; a registry filled by `TABLE[key] = fn` or by a decorator that
stores what it decorates (`@register("swish")`, `@REGISTRY.register("swish")`), searched in the
table's module and the modules of its directory. Bounded by `MAX_ENTRIES` and `MAX_SIBLINGS`.
A mixin of `ModuleModel`, asked through `boundaries.BoundaryQueries`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import libcst as cst

from cglint.model.boundaries import MAX_CALLEES, MAX_DEPTH, param_of
from cglint.model.scopes import Scope, is_self, is_staticmethod, argument

if TYPE_CHECKING:
    from cglint.model.module import ModuleModel

MAX_ENTRIES = 64  # entries of one table (literal, comprehension, registry) read
MAX_SIBLINGS = 32  # modules of a registry's directory searched for what fills it

Key = str | int | None  # a table's key; None: not known statically
# (key, the model the value belongs to, the value: an expression or a registered def, its scope)
Entry = tuple[Key, "ModuleModel", "cst.BaseExpression | cst.FunctionDef", Scope]


class TableQueries:
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
        if isinstance(expr, cst.Attribute) and is_self(expr.value):
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
                param = param_of(value, scope)
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
        if cls is not None and isinstance(cls.node, cst.ClassDef) and not is_staticmethod(factory.node):
            position -= 1  # `self` / `cls` of a registry's method
        arg = argument(decorator, position, key.value)
        return self._constant(arg, scope) if arg is not None else None

    def _may_be_project_decorator(self, decorator: cst.BaseExpression, scope: Scope) -> bool:
        """Cheap: whether a decorator may be a function of the project (not `@tf.function`,
        `@property`, `@functools.wraps(f)`)."""
        func = decorator.func if isinstance(decorator, cst.Call) else decorator
        if isinstance(func, cst.Name):
            return scope.lookup(func.value) is not None or self.import_spec(func.value) is not None
        if isinstance(func, cst.Attribute):
            return self.qualname(func) is None or self.module_of(func.value, scope) is not None
        return False

    def _is_builtin(self, func: cst.BaseExpression, name: str, scope: Scope) -> bool:
        return isinstance(func, cst.Name) and func.value == name and scope.lookup(name) is None and name not in self.imports

