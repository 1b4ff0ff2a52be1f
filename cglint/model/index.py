"""Module-wide indexes, built once on first use in one pass over the collector's tables, so that
no question about a site has to scan the whole module (with N sites a per-site scan is O(N^2):
CG012 once computed millions of qualified names on a 1,000-site file)."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Iterator

import libcst as cst

from cglint.model.scopes import Scope, is_self

if TYPE_CHECKING:
    from cglint.model.sites import GradientSite


class ModuleIndex:
    """Module-wide indexes, built once on first use."""


    # ---- module-wide indexes -------------------------------------------------------------
    # Built once, on first use, in one pass over the collector's tables, so that no question
    # about a site has to scan the whole module: with N sites in a module a per-site scan is
    # O(N^2) work (CG012 once computed millions of qualified names on a 1,000-site file).

    @cached_property
    def calls_by_qualname(self) -> dict[str, list[tuple[cst.Call, Scope]]]:
        """Calls keyed by the qualified name of what they call (`tensorflow.py_function`), for
        callees the imports resolve; every call's name is computed once."""
        index: dict[str, list[tuple[cst.Call, Scope]]] = {}
        for call, scope in self.all_calls:
            name = self.qualname(call.func)
            if name is not None:
                index.setdefault(name, []).append((call, scope))
        return index

    def calls_to(self, qualnames: frozenset[str] | set[str]) -> Iterator[tuple[cst.Call, Scope]]:
        """Calls to any of `qualnames`, in source order within each name."""
        index = self.calls_by_qualname
        for name in qualnames:
            yield from index.get(name, ())

    @cached_property
    def call_of_func(self) -> dict[int, cst.Call]:
        """id(call.func) -> the call: whether a name read is the callee of a call."""
        return {id(call.func): call for call, _ in self.all_calls}

    @cached_property
    def reads_by_name(self) -> dict[str, list[tuple[cst.Name, Scope]]]:
        index: dict[str, list[tuple[cst.Name, Scope]]] = {}
        for scope in self.root.walk():
            for name in scope.reads:
                index.setdefault(name.value, []).append((name, scope))
        return index

    @cached_property
    def attribute_reads_by_name(self) -> dict[str, list[tuple[cst.Attribute, Scope]]]:
        """`self.x` / `cls.x` reads keyed by `x`."""
        index: dict[str, list[tuple[cst.Attribute, Scope]]] = {}
        for scope in self.root.walk():
            for attr in scope.attribute_reads:
                index.setdefault(attr.attr.value, []).append((attr, scope))
        return index

    @cached_property
    def scopes_binding(self) -> dict[str, list[Scope]]:
        """name -> the scopes that bind it."""
        index: dict[str, list[Scope]] = {}
        for scope in self.root.walk():
            for name in scope.bindings:
                index.setdefault(name, []).append(scope)
        return index

    @cached_property
    def _bound_names(self) -> dict[int, list[tuple[Scope, str]]]:
        """id(value) -> (scope, name) of every binding `name = value`."""
        index: dict[int, list[tuple[Scope, str]]] = {}
        for scope in self.root.walk():
            for name, values in scope.bindings.items():
                for value in values:
                    if value is not None:
                        index.setdefault(id(value), []).append((scope, name))
        return index

    def names_bound_to(self, value: cst.CSTNode, scope: Scope) -> set[str]:
        """The names `scope` binds to exactly this node (`op = tf.custom_gradient(fwd)` -> {op})."""
        return {name for owner, name in self._bound_names.get(id(value), ()) if owner is scope}

    @cached_property
    def _site_by_forward(self) -> dict[int, GradientSite]:
        index: dict[int, GradientSite] = {}
        for site in self.sites:
            index.setdefault(id(site.forward), site)
        return index

    @cached_property
    def sites_by_call_name(self) -> dict[str, list[GradientSite]]:
        """Sites keyed by every name a call can reach them by (the def's name, the names the
        call form's result is bound to): a call `f(...)` / `self.f(...)` can only be a call of
        the sites under `f`."""
        index: dict[str, list[GradientSite]] = {}
        for site in self.sites:
            names = set(site.call_names)
            if isinstance(site.forward, cst.FunctionDef):
                names.add(site.forward.name.value)
            for name in names:
                index.setdefault(name, []).append(site)
        return index

    @cached_property
    def _sites_by_callee(self) -> dict[tuple[str, int], tuple[int, GradientSite]]:
        """What `GradientSite.is_reached_by` asks, as a lookup: (name, id of what the name must
        be bound to: the decorated def or the `tf.custom_gradient(...)` call) and, for
        `self.name(...)`, ("self." + name, id of the class scope) -> the first such site in
        `sites_by_call_name[name]` order. Asking every site under a name is quadratic in a
        module of Keras layers that each call their own nested `forward`."""
        index: dict[tuple[str, int], tuple[int, GradientSite]] = {}
        for name, sites in self.sites_by_call_name.items():
            for pos, site in enumerate(sites):
                target = site.forward if isinstance(site.wrapper, cst.Decorator) else site.wrapper
                index.setdefault((name, id(target)), (pos, site))
                if site.is_method:
                    own = site.forward.name.value if isinstance(site.forward, cst.FunctionDef) else None
                    if name == own or name in site.call_names:
                        index.setdefault(("self." + name, id(site.outer)), (pos, site))
        return index

    def calls_of_other_modules_sites(self) -> list[tuple[cst.Call, Scope, GradientSite]]:
        """Each call this module makes of a custom-gradient function another project module
        defines, with its scope and the site. The module that defines the function does not see
        what its callers pass, so the rules whose evidence is at the call (CG004, CG007, CG008,
        CG010, CG015, CG016) judge these here; resolved once for all of them."""
        memo = self.memo("_foreign_calls_memo")  # type: ignore[attr-defined]
        if "calls" not in memo:
            found = []
            if self.project_imports or self.star_imports:  # type: ignore[attr-defined]
                for call, scope in self.all_calls:  # type: ignore[attr-defined]
                    site = self.site_called_by(call, scope)
                    if site is not None and site.model is not self:
                        found.append((call, scope, site))
            memo["calls"] = found
        return memo["calls"]

    def site_called_by(self, call: cst.Call, scope: Scope, imported: bool = True) -> GradientSite | None:
        """The custom-gradient function `call` (made in `scope`) calls, if any (the first of
        `sites_by_call_name` under the callee's name that `is_reached_by` the call), or with
        `imported`, the one a project module defines under the imported name it calls."""
        func, index = call.func, self._sites_by_callee
        if isinstance(func, cst.Name) and self._is_imported_name(func, scope):
            return self.imported_site(func.value) if imported else None
        if isinstance(func, cst.Name):
            found = scope.lookup(func.value)
            hits = [index[k] for k in ((func.value, id(v)) for v in found[1]) if k in index] if found else []
            if hits:
                return min(hits, key=lambda hit: hit[0])[1]
            if not found or not any(isinstance(v, (cst.Attribute, cst.Subscript, cst.Call)) for v in found[1]):
                return None
            # `op = Ops.op`, `op = ops.op`, `op = TABLE["op"]`: the name denotes a site elsewhere
            reached = self.sites_reached(func, scope)
            if reached and all(s is not None and (imported or s.model is self) for s in reached):
                return reached[0]
            return None
        if isinstance(func, cst.Attribute) and is_self(func.value):
            owner = scope.enclosing_class()
            hit = index.get(("self." + func.attr.value, id(owner))) if owner is not None else None
            return hit[1] if hit else None
        # `ops.swish(...)`, `ACTIVATIONS[name](...)`, `get_activation(name)(...)`: a site when
        # every function the callee may be is one (a registry mixing plain functions says nothing).
        if isinstance(func, cst.Attribute) and not imported:
            return None
        if isinstance(func, cst.Call) and not imported and self._is_custom_gradient(func.func):
            return None  # `tf.custom_gradient(f)(x)`: the call form, not a call of a named site
        if isinstance(func, (cst.Attribute, cst.Subscript, cst.Call)):
            found = self.sites_reached(func, scope)
            if found and all(s is not None and (imported or s.model is self) for s in found):
                return found[0]
        return None

    def site_bound_by_partial(self, call: cst.Call, scope: Scope) -> GradientSite | None:
        """The custom-gradient function `functools.partial(op, ...)` binds arguments of: calling
        the partial calls `op` with those arguments (a bound keyword is a keyword call)."""
        if self.qualname(call.func) != "functools.partial" or not call.args or call.args[0].keyword or call.args[0].star:
            return None
        return self.site_called_by(cst.Call(func=call.args[0].value, args=call.args[1:]), scope)

    @cached_property
    def _names_in_use(self) -> frozenset[str]:
        names = set(self.imports)
        for scope in self.root.walk():
            names.update(scope.bindings)
            names.update(n.value for n in scope.reads)
        return frozenset(names)


    @cached_property
    def _calls_by_site(self) -> dict[int, list[tuple[cst.Call, Scope]]]:
        index: dict[int, list[tuple[cst.Call, Scope]]] = {}
        for call, scope in self.all_calls:
            site = self.site_called_by(call, scope, imported=False)
            if site is not None:
                index.setdefault(id(site), []).append((call, scope))
        return index

    def calls_reaching(self, site: GradientSite) -> list[tuple[cst.Call, Scope]]:
        """The calls of the module that call `site` (by its name, the call form's result, or
        `self.method(...)`), in source order."""
        return self._calls_by_site.get(id(site), [])
