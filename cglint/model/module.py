"""The model of one module: one libcst parse -> scopes, sites and the questions rules ask.

`ModuleModel` is assembled from the parts of this package: the walk (`scopes`), the sites
(`sites`), variables and Keras (`variables`), data flow and values (`flow`) and the
module-wide indexes (`index`). Here: construction, qualified names, name resolution and
positions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import libcst as cst

from cglint import cstwalk
from cglint.model.boundaries import BoundaryQueries
from cglint.model.decorators import DecoratorQueries
from cglint.model.flow import FlowQueries
from cglint.model.index import ModuleIndex
from cglint.model.resolve import ResolveQueries
from cglint.model.scopes import Binding, Scope, Collector, ReadsIn, reach_imports
from cglint.model.sites import Helper, SiteDiscovery
from cglint.model.tables import TableQueries
from cglint.model.variables import VariableQueries
from cglint.names import normalize

if TYPE_CHECKING:
    from cglint.model.project import Project
    from cglint.model.sites import GradientSite


class ModuleModel(SiteDiscovery, VariableQueries, FlowQueries, BoundaryQueries, TableQueries, DecoratorQueries,
                  ResolveQueries, ModuleIndex):
    """Everything the rules may ask about one module."""

    def __init__(self, module: cst.Module, tensorflow_aliases: tuple[str, ...] = (), *, project: Project | None = None,
                 path: str | None = None, sites: bool = True) -> None:
        self.module = module
        # The project index (`project`), this module's file (`path`), and the project files it
        # read, with their content hashes (`dependencies`): see cglint.model.project.
        self.project, self.path = project, path
        self.dependencies: dict[str, str] = {}
        self.linted = sites  # the module linted (else a project module read for its bindings)
        if project is not None and sites:
            project.epoch += 1  # a new lint: what project modules remembered may be stale (`memo`)
        collector = Collector(self)
        collector.walk(module)
        self.imports: dict[str, str] = reach_imports(collector.imports, tensorflow_aliases, collector.root)
        self.project_imports = collector.project_imports
        self.star_imports = collector.star_imports
        self.root: Scope = collector.root
        self.scope_of: dict[cst.CSTNode, Scope] = collector.scope_of
        self.decorated: list[tuple[cst.FunctionDef, Scope]] = collector.defs
        self.all_calls: list[tuple[cst.Call, Scope]] = collector.calls
        # Calls whose result is passed on whole or taken apart where it is made (returned,
        # a lambda's body, unpacked `a, b = f()`, indexed `f()[0]`): the caller treats it as a
        # structure, not as one tensor.
        self.forwarded_calls: set[int] = collector.forwarded
        self.unpacked_calls = collector.unpacked
        # id(Name read) -> its position in source order, against the bindings' (`Scope.order`).
        self._read_seq: dict[int, int] = collector.read_seq
        # id(`self.x` node) -> the attribute read from it, when it is `self.x.<attr>`.
        self._attribute_of: dict[int, str] = collector.attribute_of
        # id(def, lambda, call or def name) -> index of the top-level statement holding it.
        self._top_of: dict[int, int] = collector.top_of
        # The imports are complete from here on: qualified names can be remembered per node
        # (kept with the node, so an id is never reused while its entry lives).
        self._qualnames: dict[int, tuple[cst.CSTNode, str | None]] = {}
        # Module-level aliases of imported things, bound once (`custom_grad = tf.custom_gradient`,
        # `K = keras.ops`): a name spelled so is the thing it aliases.
        self.aliases: dict[str, str] = self._module_aliases()
        self.sites: list[GradientSite] = self._find_sites() if sites else []

    @property
    def imports_tensorflow(self) -> bool:
        return any(q == "tensorflow" or q.startswith("tensorflow.") for q in self.imports.values())

    def reads_in(self, expr: cst.CSTNode, skip_attrs: frozenset[str] = frozenset()) -> list[cst.Name]:
        """Names an expression reads (attribute and keyword names are not reads). Names under
        an attribute in `skip_attrs` are left out: `x.shape` with `{"shape"}` reads nothing."""
        finder = ReadsIn(skip_attrs)
        finder.walk(expr)
        return finder.names

    def uses_of(self, root: cst.CSTNode, name: str) -> tuple[list[cst.Name], list[cst.Subscript]]:
        """Every `name` node under `root`, and the subscripts of it (`args[0]`): how a body uses
        a parameter, whole or one item at a time."""
        from cglint.cstwalk import nodes

        found = [n for n in nodes(root) if isinstance(n, (cst.Name, cst.Subscript))]
        names = [n for n in found if isinstance(n, cst.Name) and n.value == name]
        picks = [n for n in found if isinstance(n, cst.Subscript) and isinstance(n.value, cst.Name)
                 and n.value.value == name]
        return names, picks

    def mentions_attribute(self, expr: cst.CSTNode, attr: str) -> bool:
        """`expr` names the attribute `attr`: as `obj.attr`, or as the string `"attr"`
        (`hasattr(obj, "attr")`)."""
        from cglint.cstwalk import nodes

        return any((isinstance(n, cst.Attribute) and n.attr.value == attr)
                   or (isinstance(n, cst.SimpleString) and n.evaluated_value == attr) for n in nodes(expr))

    def looks_up_by_attribute(self, root: cst.CSTNode, attr: str) -> bool:
        """Something under `root` looks an entry up by an attribute of a value:
        `table[v.name]`, `table.get(v.name)` (with `attr` "name")."""
        from cglint.cstwalk import nodes

        def keyed(expr: cst.BaseExpression) -> bool:
            return isinstance(expr, cst.Attribute) and expr.attr.value == attr

        for node in nodes(root):
            if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
                if keyed(node.slice[0].slice.value):
                    return True
            elif (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "get"
                  and node.args and keyed(node.args[0].value)):
                return True
        return False

    # ---- name resolution -----------------------------------------------------------------

    def qualname(self, expr: cst.BaseExpression | None) -> str | None:
        """`tf.math.tan` -> `tensorflow.math.tan` through the module's imports (compat folded)."""
        memo = self.__dict__.get("_qualnames")
        if memo is None or expr is None:
            return self._qualname(expr)
        hit = memo.get(id(expr))
        if hit is None or hit[0] is not expr:
            hit = memo[id(expr)] = (expr, self._qualname(expr))
        return hit[1]

    def _qualname(self, expr: cst.BaseExpression | None) -> str | None:
        owner = self._owner_of(expr) if expr is not None else None
        if owner is not None:  # read in a function of another module (`BoundaryQueries.adopt`)
            return owner.qualname(expr)
        parts: list[str] = []
        while isinstance(expr, cst.Attribute):
            parts.append(expr.attr.value)
            expr = expr.value
        if not isinstance(expr, cst.Name):
            return None
        base = self.imports.get(expr.value)
        if base is None:
            base = self.__dict__.get("aliases", {}).get(expr.value)
            if base is None:
                return None
        parts.append(base)
        return normalize(".".join(reversed(parts)))

    def _module_aliases(self) -> dict[str, str]:
        """`name = <dotted import>` made once at module level, the name never imported."""
        out: dict[str, str] = {}
        for name, values in self.root.bindings.items():
            if name in self.imports or len(values) != 1 or not isinstance(values[0], (cst.Attribute, cst.Name)):
                continue
            order = self.root.order.get(name, [])
            if not order or not order[0][1]:
                continue  # bound under an if / try: not always the alias
            qualname = self._qualname(values[0])
            if qualname is not None:
                out[name] = qualname
        return out

    def resolve(self, expr: cst.BaseExpression | None, scope: Scope, depth: int = 0) -> list[Binding]:
        """What an expression may hold: names are followed through assignments (all of them,
        since control flow is not modelled); anything else stands for itself."""
        if isinstance(expr, cst.Name) and depth < 8:
            owner = self._owner_of(expr)
            if owner is not None:
                return owner.resolve(expr, scope, depth)
            found = scope.lookup(expr.value)
            if found is None:
                return [expr]
            owner, _ = found
            seq = self._read_seq.get(id(expr))
            values = owner.visible(expr.value, seq if owner is scope else None)
            out: list[Binding] = []
            for value in values:
                if isinstance(value, cst.Name):
                    out.extend(self.resolve(value, owner, depth + 1))
                else:
                    out.append(value)
            return out
        return [expr]

    def helper(self, expr: cst.BaseExpression | None, scope: Scope) -> Helper | None:
        """The function a callee denotes, when it is exactly one def (`denote`): `dtan` in
        `dtan(y)`, `deriv.dtan` after `from . import deriv`, `ops.Cls.dtan` (a staticmethod),
        `PRIMES["tan"]`, `functools.partial`-free factories' results, in this module or another
        module of the project. None when it may be several functions or is unknown."""
        if expr is None:
            return None
        owner = self._owner_of(expr)
        if owner is not None:
            return owner.helper(expr, scope)
        return self.helper_from_denotation(expr, scope)

    # ---- module-level questions ----------------------------------------------------------

    def imported(self, name: str) -> list[tuple[ModuleModel, Binding]]:
        """What a name this module imports from another module of the project is bound to
        there, with that module's model (`from .state import kernel` -> `kernel = tf.Variable(...)`
        in state.py); empty for anything else (TensorFlow, installed packages, no project)."""
        spec = self.import_spec(name)
        if self.project is None or self.path is None or spec is None or spec[2] is None:
            return []
        memo = self.memo("_imported")
        if name not in memo:
            memo[name] = self.project.symbol(self.path, spec, self.dependencies)
            for model, _ in memo[name]:
                self._touch(model)
        return memo[name]

    def import_spec(self, name: str) -> tuple[int, str, str | None] | None:
        """How this module imports `name` from a module that may be the project's: its own
        import of the name, else a star import (`from .ops import *`) of a project module that
        defines or re-exports it. None when the module does not import it."""
        spec = self.project_imports.get(name)
        if spec is not None or not self.star_imports or self.project is None or self.path is None \
                or any(v is not None for v in self.root.bindings.get(name, ())):
            return spec
        memo = self.memo("_star_memo")
        if name not in memo:
            memo[name] = None
            for level, module in reversed(self.star_imports):  # the last star import wins
                candidate = (level, module, name)
                if self.project.symbol(self.path, candidate, self.dependencies):
                    memo[name] = candidate
                    break
        return memo[name]

    def memo(self, name: str) -> dict:
        """A table of answers that depend on other modules: kept for the model's life in the
        linted module, for one lint in a project module (kept across lints, while a module it
        imports may have changed on disk)."""
        epoch = self.project.epoch if self.project is not None and not self.linted else None
        held = self.__dict__.get(name)
        if held is None or held[0] != epoch:
            held = self.__dict__[name] = (epoch, {})
        return held[1]

    def all_dependencies(self) -> dict[str, str]:
        """The project files this module's answers depend on, with their content hashes: those
        it imports from and, through them, those the modules it followed import from (a grad fn
        reached through a table in one module whose entry another defines)."""
        out: dict[str, str] = {}
        todo, seen = list(self.memo("_touched_memo").values()), {id(self)}
        while todo:
            model = todo.pop()
            if id(model) in seen:
                continue
            seen.add(id(model))
            out.update(model.dependencies)
            out.update(model.memo("_scanned_memo"))
            todo += model.memo("_touched_memo").values()
        # this lint's own reads last: a module followed in an earlier lint may hold older hashes
        out.update(self.memo("_scanned_memo"))
        out.update(self.dependencies)
        return out

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The node's parent in the module. Fixers need it (which statement holds this
        assignment?); the parent table is built on first use, so linting never pays for it."""
        parents = self.__dict__.get("_parents")
        if parents is None:
            # A call's parent from its scope's subtree alone (the same parent: the call lies
            # under its scope's node), so asking about a call in one function walks that
            # function, not the module (an editor's lint of a long module asks on every edit).
            calls = self.__dict__.get("_call_scopes")
            if calls is None:
                calls = self.__dict__["_call_scopes"] = {call: scope.node for call, scope in self.all_calls}
            root = calls.get(node)
            if root is not None and root is not self.module:
                local = self.__dict__.setdefault("_local_parents", {})
                if id(root) not in local:
                    local[id(root)] = (root, cstwalk.parents(root))
                found = local[id(root)][1].get(node)
                if found is not None:
                    return found
            parents = self.__dict__["_parents"] = cstwalk.parents(self.module)
        return parents.get(node)

    @property
    def positions(self):
        """Each node's `CodeRange` (libcst's PositionProvider), computed once per parse on first
        use: the engine, the fixer and the runtime planner share it, and linting a clean file
        never pays for the codegen pass it costs."""
        positions = self.__dict__.get("_positions")
        if positions is None:
            from libcst.metadata import MetadataWrapper, PositionProvider

            positions = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
            self.__dict__["_positions"] = positions
        return positions

    def positions_of(self, findings: list, lines: list[tuple[int, int]] | None) -> Any:
        """CodeRanges for the findings' nodes, from a codegen pass over only the top-level
        statements that hold them (a 6,000-site module spends more in the whole-module pass than
        in every rule together). `lines`: each top-level statement's first and last line, from
        Python's parse. Where anything does not line up (a node the model cannot place, a
        statement whose length disagrees) it is the whole-module pass: never a wrong position."""
        if lines is None or "_positions" in self.__dict__ or len(lines) != len(self.module.body):
            return self.positions
        body = self.module.body
        wanted: set[int] = set()
        for f in findings:
            top = self._top_of.get(id(f.node))
            if top is None and f.site is not None:
                top = self._top_of.get(id(f.site.forward))
            if top is None:
                return self.positions
            wanted.add(top)

        def start(i: int) -> int:  # the first line of statement i's code: its own leading lines
            return lines[i][0] - len(getattr(body[i], "leading_lines", ()))

        from libcst.metadata.position_provider import PositionProvider

        from cglint.cstpositions import FastPositionState

        provider = PositionProvider()
        for i in sorted(wanted):
            state = FastPositionState(default_indent=self.module.default_indent,
                                                  default_newline=self.module.default_newline, provider=provider)
            state.line = start(i)
            body[i]._codegen(state)
            if i + 1 < len(body) and state.line != start(i + 1):
                return self.positions
        computed = provider._computed
        if any(f.node not in computed for f in findings):
            return self.positions
        return computed

    def names_in_use(self) -> set[str]:
        """Every name bound, read or imported anywhere in the module: a fixer introducing a
        name picks one outside this set, so it can shadow nothing. (Computed once: linting never
        changes the tree.)"""
        return set(self._names_in_use)
