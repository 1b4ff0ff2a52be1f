"""Scopes and bindings: the one walk over the syntax tree (`Collector`) and what it records.

Every function, lambda, class and the module get a `Scope` with the names bound in it (in
source order, and whether unconditionally), the names and `self.x` read, calls, returns and
`self.x = ...` attributes; imports are resolved to dotted names (`reach_imports`). The rest
of the model answers questions from these tables and never walks the tree again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator, Union

import libcst as cst

from cglint.cstwalk import Walker
from cglint.names import alias_to_tensorflow

if TYPE_CHECKING:
    from cglint.model.module import ModuleModel


FunctionNode = Union[cst.FunctionDef, cst.Lambda]


class Param:
    """Marker binding: the name is a parameter of its function."""

    def __init__(self, node: cst.Param) -> None:
        self.node = node


class Unpacked:
    """Marker binding: the name is entry `index` of `source`, unpacked (`a, b = source`)."""

    def __init__(self, source: cst.BaseExpression, index: int) -> None:
        self.source, self.index = source, index


Binding = Union[cst.BaseExpression, cst.FunctionDef, cst.ClassDef, Param, Unpacked, None]


@dataclass(eq=False)
class Scope:
    """A function (or lambda, class, module) body and the names bound in it."""

    node: cst.CSTNode
    parent: Scope | None
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    # `self.x = <expr>` in a class's methods, keyed by attribute (class scopes only).
    attributes: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)
    returns: list[cst.Return] = field(default_factory=list)
    calls: list[cst.Call] = field(default_factory=list)
    nested: list[Scope] = field(default_factory=list)
    # Names read (load context) and `self.attr` reads directly in this scope.
    reads: list[cst.Name] = field(default_factory=list)
    attribute_reads: list[cst.Attribute] = field(default_factory=list)
    # `a is b`, `a == b`, ... made directly in this scope (identity checks on variables).
    comparisons: list[cst.Comparison] = field(default_factory=list)
    # Dict displays made directly in this scope (gradients keyed on variables).
    dicts: list[cst.Dict] = field(default_factory=list)
    # `table[key] = value` made directly in this scope (registries filled by assignment).
    stores: list[tuple[cst.Subscript, cst.BaseExpression]] = field(default_factory=list)

    # For each entry of `bindings[name]`: (when it was bound, in source order; whether it is
    # bound unconditionally, directly in the body rather than under an if/loop/try).
    order: dict[str, list[tuple[int, bool]]] = field(default_factory=dict)

    # `visible`'s answers: the evaluator asks the same (name, read) thousands of times per site.
    _visible: dict[tuple[str, int | None], list[Binding]] = field(default_factory=dict, repr=False)

    def bind(self, name: str, value: Binding, seq: int = -1, sure: bool = False) -> None:
        self.bindings.setdefault(name, []).append(value)
        self.order.setdefault(name, []).append((seq, sure))
        self._visible.clear()

    def visible(self, name: str, before: int | None) -> list[Binding]:
        """The bindings of `name` a read can see: from the last unconditional one on. A read in
        this scope (`before` = its position) sees those made before it; a read in a nested
        function (`before` None: a grad fn runs after the forward returned) sees the last."""
        known = self._visible.get((name, before))
        if known is None:
            known = self._visible[(name, before)] = self._see(name, before)
        return known

    def _see(self, name: str, before: int | None) -> list[Binding]:
        values = self.bindings.get(name, [])
        order = self.order.get(name, [])
        if len(order) != len(values):
            return values
        pairs = list(zip(values, order))
        if before is not None:
            earlier = [p for p in pairs if 0 <= p[1][0] < before]
            if not earlier:
                return values  # read before any binding (a loop, a later def): anything
            pairs = earlier
        for i in range(len(pairs) - 1, -1, -1):
            if pairs[i][1][1]:
                return [v for v, _ in pairs[i:]]
        return [v for v, _ in pairs]

    def lookup(self, name: str) -> tuple[Scope, list[Binding]] | None:
        """The innermost scope binding `name` (class bodies are skipped, as in Python)."""
        scope: Scope | None = self
        while scope is not None:
            if name in scope.bindings and (scope is self or not isinstance(scope.node, cst.ClassDef)):
                return scope, scope.bindings[name]
            scope = scope.parent
        return None

    def enclosing_class(self) -> Scope | None:
        """For a method's scope (or anything nested in one): the class scope."""
        scope: Scope | None = self
        while scope is not None:
            if scope.parent is not None and isinstance(scope.parent.node, cst.ClassDef):
                return scope.parent
            scope = scope.parent
        return None

    def within(self, other: Scope) -> bool:
        """Whether this scope is `other` or nested in it."""
        scope: Scope | None = self
        while scope is not None:
            if scope is other:
                return True
            scope = scope.parent
        return False

    def walk(self) -> Iterator[Scope]:
        yield self
        for child in self.nested:
            yield from child.walk()

    def reads_name(self, name: str) -> bool:
        """Whether this scope or one nested in it reads `name` (shadowing is not modelled)."""
        return any(n.value == name for scope in self.walk() for n in scope.reads)


def has_star(node: cst.CSTNode) -> bool:
    return any(isinstance(el, (cst.StarredElement, cst.StarredDictElement)) for el in getattr(node, "elements", ()))


def is_self(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value in ("self", "cls")


def is_staticmethod(fn: FunctionNode) -> bool:
    return isinstance(fn, cst.FunctionDef) and any(
        isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in fn.decorators
    )


def positional_params(params: cst.Parameters) -> list[cst.Param]:
    return list(params.posonly_params) + list(params.params)


def argument(call: cst.Call, position: int | None = None, keyword: str | None = None) -> cst.BaseExpression | None:
    """The argument a call passes for a parameter, by keyword or at `position` (0-based, among
    the plain positional arguments; none past a `*args` splat, whose length is unknown)."""
    for arg in call.args:
        if keyword is not None and arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    if position is not None:
        for i, arg in enumerate(call.args):
            if arg.keyword is not None or arg.star:
                return None
            if i == position:
                return arg.value
    return None


def positional_arguments(call: cst.Call) -> list[cst.BaseExpression] | None:
    """The call's positional arguments, or None when a `*splat` makes them unknown."""
    out = []
    for arg in call.args:
        if arg.star == "*":
            return None
        if arg.keyword is None and not arg.star:
            out.append(arg.value)
    return out


def return_values_with_nodes(
    fn: FunctionNode, scope: Scope
) -> Iterator[tuple[cst.BaseExpression | None, cst.CSTNode]]:
    if isinstance(fn, cst.Lambda):
        yield fn.body, fn.body
        return
    for ret in scope.returns:
        yield ret.value, ret


def return_values(fn: FunctionNode, scope: Scope) -> Iterator[cst.BaseExpression]:
    """Return values of `fn`, with a returned name bound to a tuple literal followed once."""
    for value, _ in return_values_with_nodes(fn, scope):
        if isinstance(value, cst.Name):
            bound = scope.bindings.get(value.value, [])
            tuples = [v for v in bound if isinstance(v, cst.Tuple)]
            if tuples:
                yield from tuples  # type: ignore[misc]
                continue
        if value is not None:
            yield value


# ---- reach: where TensorFlow comes from ------------------------------------------------------


def reach_imports(imports: dict[str, str], aliases: tuple[str, ...], root: Scope) -> dict[str, str]:
    """The module's imports as TensorFlow sees them: configured re-exports of TensorFlow are
    TensorFlow; a `tf` the module reads but never binds or imports is TensorFlow (a snippet, a
    notebook cell after `import tensorflow as tf` in another); and in TensorFlow's own
    custom_gradient.py the module-local `custom_gradient` (the def exported as
    `tf_export("custom_gradient")`) is `tf.custom_gradient`."""
    out = {name: alias_to_tensorflow(dotted, aliases) for name, dotted in imports.items()} if aliases else imports
    if "tf" not in out:
        scopes = list(root.walk())
        if not any("tf" in scope.bindings for scope in scopes) and any(
            n.value == "tf" for scope in scopes for n in scope.reads
        ):
            out["tf"] = "tensorflow"
    if "custom_gradient" not in out:
        for value in root.bindings.get("custom_gradient", []):
            if isinstance(value, cst.FunctionDef) and any(_exports_custom_gradient(d.decorator, out)
                                                          for d in value.decorators):
                out["custom_gradient"] = "tensorflow.custom_gradient"
    return out


def _exports_custom_gradient(decorator: cst.BaseExpression, imports: dict[str, str]) -> bool:
    """`@tf_export("custom_gradient")`, TensorFlow's export of its own decorator."""
    if not isinstance(decorator, cst.Call) or not decorator.args:
        return False
    func = decorator.func
    name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
    first = decorator.args[0].value
    return name == "tf_export" and isinstance(first, cst.SimpleString) and first.evaluated_value == "custom_gradient"


class Collector(Walker):
    """The single walk: scopes, bindings, reads, calls, returns, imports, decorated defs."""

    def __init__(self, model: ModuleModel) -> None:
        self.model = model
        self.imports: dict[str, str] = {}
        # Every import as the project index resolves it: local name -> (level, module, name).
        self.project_imports: dict[str, tuple[int, str, str | None]] = {}
        # `from .m import *` at module level: (level, module), in source order.
        self.star_imports: list[tuple[int, str]] = []
        self.root = Scope(node=cst.Module(body=[]), parent=None)
        self.stack: list[Scope] = [self.root]
        self.scope_of: dict[cst.CSTNode, Scope] = {}
        self.defs: list[tuple[cst.FunctionDef, Scope]] = []
        self.calls: list[tuple[cst.Call, Scope]] = []
        self.forwarded: set[int] = set()
        self.unpacked: list[tuple[cst.Call, cst.Tuple | cst.List, Scope]] = []  # `a, b = f(...)`
        self.read_seq: dict[int, int] = {}
        self.seq = 0
        self.attribute_of: dict[int, str] = {}
        # Per open scope: how many if/loop/try blocks deep the walk is inside it.
        self.depth: list[int] = [0]
        self.top = 0  # the top-level statement being walked
        self.top_of: dict[int, int] = {}

    def _bind(self, name: str, value: Binding, sure: bool | None = None) -> None:
        self.seq += 1
        self.scope.bind(name, value, self.seq, self.depth[-1] == 0 if sure is None else sure)

    def _enter_block(self, node: cst.CSTNode) -> None:
        self.depth[-1] += 1

    def _leave_block(self, node: cst.CSTNode) -> None:
        self.depth[-1] -= 1

    visit_If = visit_While = visit_Try = visit_TryStar = visit_Match = _enter_block  # type: ignore[assignment]
    leave_If = leave_While = leave_Try = leave_TryStar = leave_Match = _leave_block  # type: ignore[assignment]

    @property
    def scope(self) -> Scope:
        return self.stack[-1]

    def visit_Module(self, node: cst.Module) -> bool:
        self.root.node = node
        self.scope_of[node] = self.root
        for i, stmt in enumerate(node.body):
            self.top = i
            self.walk(stmt)
        return False

    # -- imports
    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            full = _dotted(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.imports[alias.asname.name.value] = full
                self.project_imports[alias.asname.name.value] = (0, full, None)
            else:
                top = full.split(".")[0]
                self.imports[top] = top
                self.project_imports[top] = (0, top, None)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if isinstance(node.names, cst.ImportStar) and self.scope is self.root:
            self.star_imports.append((len(node.relative), _dotted(node.module) if node.module is not None else ""))
        if not isinstance(node.names, cst.ImportStar):
            module = _dotted(node.module) if node.module is not None else ""
            for alias in node.names:
                name = _dotted(alias.name)
                local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else name
                self.project_imports[local] = (len(node.relative), module, name)
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return False
        base = _dotted(node.module)
        for alias in node.names:
            name = _dotted(alias.name)
            local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else name
            self.imports[local] = f"{base}.{name}"
        return False

    # -- scopes
    def _push(self, node: cst.CSTNode) -> Scope:
        scope = Scope(node=node, parent=self.scope)
        self.scope.nested.append(scope)
        self.scope_of[node] = scope
        self.stack.append(scope)
        self.depth.append(0)
        return scope

    def _pop(self) -> None:
        self.stack.pop()
        self.depth.pop()

    def _bind_params(self, scope: Scope, params: cst.Parameters) -> None:
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        for extra in (params.star_arg, params.star_kwarg):
            if isinstance(extra, cst.Param):
                every.append(extra)
        for p in every:
            self.seq += 1
            scope.bind(p.name.value, Param(p), self.seq, True)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.top_of[id(node)] = self.top_of[id(node.name)] = self.top
        self._bind(node.name.value, node)
        if node.decorators:
            self.defs.append((node, self.scope))
        # Decorators and defaults belong to the enclosing scope.
        for dec in node.decorators:
            self.walk(dec)
        self._function_body(node)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        self.top_of[id(node)] = self.top
        if isinstance(node.body, cst.Call):
            self.forwarded.add(id(node.body))
        self._function_body(node)
        return False

    def _function_body(self, node: FunctionNode) -> None:
        """Defaults are evaluated in the enclosing scope; parameters and body get their own."""
        _visit_defaults(node.params, self)
        scope = self._push(node)
        self._bind_params(scope, node.params)
        self.walk(node.body)
        self._pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self._bind(node.name.value, node)
        for dec in node.decorators:
            self.walk(dec)
        for base in node.bases:
            self.walk(base)
        self._push(node)
        self.walk(node.body)
        self._pop()
        return False

    # -- bindings
    def _bind_target(self, target: cst.BaseExpression, value: Binding, sure: bool | None = None) -> None:
        if isinstance(target, cst.Name):
            self._bind(target.value, value, sure)
        elif isinstance(target, (cst.Tuple, cst.List)):
            values: list[Binding] | None = None
            if has_star(target):
                values = None
            elif isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements):
                values = [el.value for el in value.elements]
            elif isinstance(value, cst.BaseExpression):
                # `kernel, bias = self.trainable_weights`: each name holds one entry of the value.
                values = [Unpacked(value, i) for i in range(len(target.elements))]
            for i, el in enumerate(target.elements):
                self._bind_target(el.value, values[i] if values else None, sure)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value, None, sure)
        elif isinstance(target, cst.Attribute) and is_self(target.value) and value is not None:
            cls = self.scope.enclosing_class()
            if cls is not None:
                cls.attributes.setdefault(target.attr.value, []).append(value)
            self.walk(target.value)
        else:
            if isinstance(target, cst.Subscript) and isinstance(value, cst.BaseExpression):
                self.scope.stores.append((target, value))
            self.walk(target)

    def visit_Assign(self, node: cst.Assign) -> bool:
        if isinstance(node.value, cst.Call) and any(isinstance(t.target, (cst.Tuple, cst.List)) for t in node.targets):
            self.forwarded.add(id(node.value))
            if len(node.targets) == 1:
                self.unpacked.append((node.value, node.targets[0].target, self.scope))  # type: ignore[arg-type]
        self.walk(node.value)
        for t in node.targets:
            self._bind_target(t.target, node.value)
        return False

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        if node.value is not None:
            self.walk(node.value)
        self._bind_target(node.target, node.value)
        return False

    def visit_AugAssign(self, node: cst.AugAssign) -> bool:
        self.walk(node.value)
        self.walk(node.target)  # an augmented target is read as well
        if isinstance(node.target, cst.Name):
            self._bind(node.target.value, None)
        return False

    def visit_NamedExpr(self, node: cst.NamedExpr) -> bool:
        self.walk(node.value)
        self._bind_target(node.target, node.value)
        return False

    def visit_For(self, node: cst.For) -> bool:
        self.walk(node.iter)
        self._bind_target(node.target, None, sure=False)  # the loop may not run
        self.depth[-1] += 1
        self.walk(node.body)
        if node.orelse is not None:
            self.walk(node.orelse)
        self.depth[-1] -= 1
        return False

    def visit_CompFor(self, node: cst.CompFor) -> bool:
        self.walk(node.iter)
        self._bind_target(node.target, None, sure=False)  # the comprehension's own name
        for cond in node.ifs:
            self.walk(cond)
        if node.inner_for_in is not None:
            self.walk(node.inner_for_in)
        return False

    def visit_AsName(self, node: cst.AsName) -> bool:
        self._bind_target(node.name, None)  # type: ignore[arg-type]
        return False

    def visit_Global(self, node: cst.Global) -> bool:
        return False

    def visit_Nonlocal(self, node: cst.Nonlocal) -> bool:
        return False

    # -- reads, calls, returns
    def visit_Name(self, node: cst.Name) -> None:
        self.scope.reads.append(node)
        self.seq += 1
        self.read_seq[id(node)] = self.seq

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if is_self(node.value):
            self.scope.attribute_reads.append(node)
        elif isinstance(node.value, cst.Attribute) and is_self(node.value.value):
            self.attribute_of[id(node.value)] = node.attr.value  # `self.dense.kernel`: "kernel"
        self.walk(node.value)  # the attribute name itself is not a read
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        self.walk(node.value)  # a keyword's name is not a read
        return False

    def visit_Call(self, node: cst.Call) -> None:
        self.top_of[id(node)] = self.top
        self.scope.calls.append(node)
        self.calls.append((node, self.scope))

    def visit_Comparison(self, node: cst.Comparison) -> None:
        self.scope.comparisons.append(node)

    def visit_Dict(self, node: cst.Dict) -> None:
        self.scope.dicts.append(node)

    def visit_Return(self, node: cst.Return) -> None:
        self.scope.returns.append(node)
        if isinstance(node.value, cst.Call):
            self.forwarded.add(id(node.value))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if isinstance(node.value, cst.Call):
            self.forwarded.add(id(node.value))


class ReadsIn(Walker):
    """Names read inside one expression (see `ModuleModel.reads_in`)."""

    def __init__(self, skip_attrs: frozenset[str]) -> None:
        self.skip_attrs = skip_attrs
        self.names: list[cst.Name] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.names.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if node.attr.value not in self.skip_attrs:
            self.walk(node.value)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        self.walk(node.value)
        return False


def _visit_defaults(params: cst.Parameters, visitor: Walker) -> None:
    for p in [*params.posonly_params, *params.params, *params.kwonly_params]:
        if p.default is not None:
            visitor.walk(p.default)


def _dotted(node: cst.CSTNode) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""
