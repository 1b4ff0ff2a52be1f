"""The analysis model: one libcst parse of a module -> the TensorFlow custom-gradient sites in it.

This is the only place that walks the syntax tree. Rules ask a `ModuleModel` and its
`GradientSite`s questions ("which variables does the forward read?", "what does this name
hold?", "what does this grad fn return?") and never traverse the tree themselves.

One pass (`_Collector`) records imports, scopes with their name bindings, function
definitions, calls and `self.x = ...` attributes. Sites are then assembled from those tables,
so the cost is one walk plus work proportional to the sites.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Union

import libcst as cst

FunctionNode = Union[cst.FunctionDef, cst.Lambda]

# Qualified names, after import resolution, that are TensorFlow's custom_gradient. Keras 3's
# keras.ops.custom_gradient, jax.custom_gradient, TFP's and Mesh-TF's have other contracts.
TF_CUSTOM_GRADIENT = frozenset(
    {
        "tensorflow.custom_gradient",
        "tensorflow.python.ops.custom_gradient.custom_gradient",
    }
)
TF_FUNCTION = frozenset(
    {
        "tensorflow.function",
        "tensorflow.python.eager.def_function.function",
        "tensorflow.python.eager.polymorphic_function.polymorphic_function.function",
    }
)
# Calls that create a variable; `.add_weight(...)` on any object (Keras layers) counts too.
VARIABLE_CONSTRUCTORS = frozenset(
    {
        "tensorflow.Variable",
        "tensorflow.get_variable",
        "tensorflow.python.ops.variables.Variable",
        "tensorflow.python.ops.variable_scope.get_variable",
    }
)
# Modules whose members are TensorFlow ops under their plain name (tf.tan, tf.math.tan, ...).
_OP_NAMESPACES = (
    "tensorflow.math.",
    "tensorflow.nn.",
    "tensorflow.python.ops.math_ops.",
    "tensorflow.python.ops.gen_math_ops.",
    "tensorflow.python.ops.nn_ops.",
    "tensorflow.python.ops.nn_impl.",
    "tensorflow.python.ops.gen_nn_ops.",
    "tensorflow.python.ops.special_math_ops.",
    "tensorflow.",
)


def normalize(qualname: str | None) -> str | None:
    """`tensorflow.compat.v1.x` and `tensorflow.compat.v2.x` are `tensorflow.x`."""
    if qualname is None:
        return None
    for prefix in ("tensorflow.compat.v1.", "tensorflow.compat.v2."):
        if qualname.startswith(prefix):
            return "tensorflow." + qualname[len(prefix) :]
    return qualname


def tf_op_name(qualname: str | None) -> str | None:
    """`tensorflow.math.tan` -> `tan`; None when the name is not a TensorFlow op."""
    if not qualname:
        return None
    for ns in _OP_NAMESPACES:
        if qualname.startswith(ns):
            rest = qualname[len(ns) :]
            return rest if "." not in rest else None
    return None


class Param:
    """Marker binding: the name is a parameter of its function."""

    def __init__(self, node: cst.Param) -> None:
        self.node = node


Binding = Union[cst.BaseExpression, cst.FunctionDef, cst.ClassDef, Param, None]


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

    def bind(self, name: str, value: Binding) -> None:
        self.bindings.setdefault(name, []).append(value)

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

    def walk(self) -> Iterator[Scope]:
        yield self
        for child in self.nested:
            yield from child.walk()

    def reads_name(self, name: str) -> bool:
        """Whether this scope or one nested in it reads `name` (shadowing is not modelled)."""
        return any(n.value == name for scope in self.walk() for n in scope.reads)


@dataclass(eq=False)
class Variable:
    """A `tf.Variable` (or Keras weight) that a forward reads without taking it as input."""

    name: str  # as written in the forward: `w`, `self.kernel`
    created_by: cst.Call
    trainable: bool
    created_inside: bool  # constructed inside the forward itself


@dataclass(eq=False)
class GradReturn:
    """One `return` of a grad fn (a lambda's body counts as its return)."""

    node: cst.CSTNode
    value: cst.BaseExpression | None
    # The top-level elements when the value is a literal tuple (or a name bound to one).
    elements: list[cst.BaseExpression] | None


@dataclass(eq=False)
class GradFn:
    node: FunctionNode
    name: str
    scope: Scope
    upstream_params: list[str]  # positional parameters, excluding `variables` (passed by keyword)
    has_varargs: bool
    accepts_variables: bool  # a `variables` parameter or **kwargs
    returns: list[GradReturn]
    # How many of `upstream_params` have no default: callers must pass at least this many.
    required_upstream: int = 0
    # The parameter TensorFlow's `variables=` lands in: `variables`, the **kwargs name, or None.
    variables_param: str | None = None

    @property
    def anchor(self) -> cst.CSTNode:
        """Where diagnostics about the grad fn's definition point: its name, or the lambda."""
        return self.node.name if isinstance(self.node, cst.FunctionDef) else self.node

    def reads(self, name: str) -> bool:
        """Whether the grad fn's body (nested functions included) reads `name`."""
        return self.scope.reads_name(name)


@dataclass(eq=False)
class GradientSite:
    """One TensorFlow custom-gradient function: the forward and what the model knows of it."""

    model: ModuleModel
    name: str  # the name users call it by (`op`, `Layer.call`, or the assigned name for call forms)
    forward: FunctionNode
    scope: Scope  # the forward's own scope
    wrapper: cst.CSTNode  # the `@tf.custom_gradient` decorator or the `tf.custom_gradient(...)` call
    is_method: bool
    inputs: list[str]  # positional inputs (`self`/`cls` excluded)
    has_varargs: bool
    outputs: list[cst.BaseExpression]  # the `y` of each `return y, grad_fn`
    grad_fns: list[GradFn]
    variables: list[Variable]
    call_names: set[str]  # names under which callers reach it (for keyword-call checks)

    # ---- questions rules ask -------------------------------------------------------------

    @property
    def anchor(self) -> cst.CSTNode:
        return self.forward.name if isinstance(self.forward, cst.FunctionDef) else self.forward

    @property
    def trainable_variables(self) -> list[Variable]:
        return [v for v in self.variables if v.trainable]

    @property
    def output_count(self) -> int | None:
        """Number of flattened outputs, when every return agrees and the count is literal."""
        counts = {self.model.flat_count(y, self.scope) for y in self.outputs}
        return counts.pop() if len(counts) == 1 else None

    def scopes(self) -> Iterator[Scope]:
        """The forward's scope and every scope nested in it (grad fns, helpers)."""
        return self.scope.walk()

    def calls(self) -> Iterator[tuple[cst.Call, Scope]]:
        """Every call inside the forward, grad fns included, with the scope it is in."""
        for scope in self.scopes():
            for call in scope.calls:
                yield call, scope

    def grad_fn_scopes(self) -> set[Scope]:
        return {scope for g in self.grad_fns for scope in g.scope.walk()}

    @property
    def required_inputs(self) -> int:
        """Positional inputs without a default: TensorFlow counts a defaulted one as an input
        only when a caller passes it positionally, so the input count lies in
        `required_inputs ..= len(inputs)`."""
        return sum(1 for p in self.input_params if p.default is None)

    @property
    def input_params(self) -> list[cst.Param]:
        positional = _positional_params(self.forward.params)
        return positional[1:] if self.is_method and positional else positional

    @property
    def outer(self) -> Scope:
        """The scope the forward is defined in (a class body for methods)."""
        return self.scope.parent  # type: ignore[return-value]

    def is_named_by(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """Whether the name `expr` (in `scope`) is this custom-gradient function. A decorated def
        is; in the call form only the result of `tf.custom_gradient(fwd)` is (`fwd` itself is
        the plain forward)."""
        if not isinstance(expr, cst.Name):
            return False
        found = scope.lookup(expr.value)
        target = self.forward if isinstance(self.wrapper, cst.Decorator) else self.wrapper
        return found is not None and any(v is target for v in found[1])

    def is_reached_by(self, call: cst.Call, scope: Scope) -> bool:
        """Whether `call` (made in `scope`) calls this custom-gradient function: by a name bound
        to the decorated def or to the `tf.custom_gradient(...)` result, or as `self.method(...)`
        from the same class."""
        func = call.func
        if isinstance(func, cst.Name):
            return self.is_named_by(func, scope)
        if isinstance(func, cst.Attribute) and _is_self(func.value) and self.is_method:
            name = self.forward.name.value if isinstance(self.forward, cst.FunctionDef) else None
            return func.attr.value in ({name} | self.call_names) and scope.enclosing_class() is self.outer
        return False


@dataclass(eq=False)
class UnwrappedCandidate:
    """A function shaped like a custom-gradient forward (returns `(y, nested_grad_fn)`)."""

    node: cst.FunctionDef
    scope: Scope
    grad_fn: cst.FunctionDef


class ModuleModel:
    """Everything the rules may ask about one module."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        collector = _Collector(self)
        module.visit(collector)
        self.imports: dict[str, str] = collector.imports
        self.root: Scope = collector.root
        self.scope_of: dict[cst.CSTNode, Scope] = collector.scope_of
        self.decorated: list[tuple[cst.FunctionDef, Scope]] = collector.defs
        self.all_calls: list[tuple[cst.Call, Scope]] = collector.calls
        # Calls whose result is passed on whole or taken apart where it is made (returned,
        # a lambda's body, unpacked `a, b = f()`, indexed `f()[0]`): the caller treats it as a
        # structure, not as one tensor.
        self.forwarded_calls: set[int] = collector.forwarded
        self.sites: list[GradientSite] = self._find_sites()

    @property
    def imports_tensorflow(self) -> bool:
        return any(q == "tensorflow" or q.startswith("tensorflow.") for q in self.imports.values())

    def reads_in(self, expr: cst.CSTNode, skip_attrs: frozenset[str] = frozenset()) -> list[cst.Name]:
        """Names an expression reads (attribute and keyword names are not reads). Names under
        an attribute in `skip_attrs` are left out: `x.shape` with `{"shape"}` reads nothing."""
        finder = _ReadsIn(skip_attrs)
        expr.visit(finder)
        return finder.names

    # ---- name resolution -----------------------------------------------------------------

    def qualname(self, expr: cst.BaseExpression | None) -> str | None:
        """`tf.math.tan` -> `tensorflow.math.tan` through the module's imports (compat folded)."""
        parts: list[str] = []
        while isinstance(expr, cst.Attribute):
            parts.append(expr.attr.value)
            expr = expr.value
        if not isinstance(expr, cst.Name) or expr.value not in self.imports:
            return None
        parts.append(self.imports[expr.value])
        return normalize(".".join(reversed(parts)))

    def resolve(self, expr: cst.BaseExpression | None, scope: Scope, depth: int = 0) -> list[Binding]:
        """What an expression may hold: names are followed through assignments (all of them,
        since control flow is not modelled); anything else stands for itself."""
        if isinstance(expr, cst.Name) and depth < 8:
            found = scope.lookup(expr.value)
            if found is None:
                return [expr]
            owner, values = found
            out: list[Binding] = []
            for value in values:
                if isinstance(value, cst.Name):
                    out.extend(self.resolve(value, owner, depth + 1))
                else:
                    out.append(value)
            return out
        return [expr]

    def is_variable_call(self, call: cst.CSTNode) -> bool:
        if not isinstance(call, cst.Call):
            return False
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "add_weight":
            return True
        return self.qualname(call.func) in VARIABLE_CONSTRUCTORS

    def literal_elements(self, expr: cst.BaseExpression | None, scope: Scope) -> list[cst.BaseExpression] | None:
        """Elements of a literal tuple/list, following a name bound once to one."""
        values = self.resolve(expr, scope)
        if len(values) != 1:
            return None
        value = values[0]
        if isinstance(value, (cst.Tuple, cst.List)):
            return [el.value for el in value.elements] if not _has_star(value) else None
        return None

    def flat_count(self, expr: cst.BaseExpression | None, scope: Scope, depth: int = 0) -> int | None:
        """How many tensors `expr` flattens to, when that is literal in the source; else None.

        Literal tuples/lists/dicts are counted element by element; a tensor op, arithmetic or a
        parameter counts one; a call to anything unknown might return a structure: unknown."""
        if expr is None or depth > 8:
            return None
        values = self.resolve(expr, scope)
        counts = set()
        for value in values:
            if isinstance(value, (cst.Tuple, cst.List)):
                if _has_star(value):
                    return None
                parts = [self.flat_count(el.value, scope, depth + 1) for el in value.elements]
                if None in parts:
                    return None
                counts.add(sum(parts))  # type: ignore[arg-type]
            elif isinstance(value, cst.Dict):
                parts = [
                    self.flat_count(el.value, scope, depth + 1) if isinstance(el, cst.DictElement) else None
                    for el in value.elements
                ]
                if None in parts:
                    return None
                counts.add(sum(parts))  # type: ignore[arg-type]
            elif isinstance(value, Param) and value.node.star in ("*", "**"):
                return None  # `*args` / `**kwargs` hold any number of tensors
            elif isinstance(value, (Param, cst.BinaryOperation, cst.UnaryOperation, cst.Subscript)):
                counts.add(1)
            elif isinstance(value, cst.Name) and value.value == "None":
                counts.add(1)  # nest.flatten(None) is [None]: one (absent) gradient
            elif isinstance(value, cst.Call) and tf_op_name(self.qualname(value.func)) is not None:
                # Most ops return one tensor; the few that return lists are listed here.
                if tf_op_name(self.qualname(value.func)) in _MULTI_OUTPUT_OPS:
                    return None
                counts.add(1)
            else:
                return None
        return counts.pop() if len(counts) == 1 else None

    # ---- site discovery ------------------------------------------------------------------

    def _is_custom_gradient(self, expr: cst.BaseExpression) -> bool:
        return self.qualname(expr) in TF_CUSTOM_GRADIENT

    def _find_sites(self) -> list[GradientSite]:
        sites: list[GradientSite] = []
        for fn, scope in self.decorated:
            for dec in fn.decorators:
                if self._is_custom_gradient(dec.decorator):
                    names = {fn.name.value}
                    sites.append(self._site(fn, dec, scope, fn.name.value, names))
                    break
        for call, scope in self.all_calls:
            if not self._is_custom_gradient(call.func):
                continue
            target = next((a.value for a in call.args if a.keyword is None or a.keyword.value == "f"), None)
            forward: FunctionNode | None = None
            name = "<lambda>"
            if isinstance(target, cst.Lambda):
                forward = target
            elif isinstance(target, cst.Name):
                name = target.value
                for value in self.resolve(target, scope):
                    if isinstance(value, (cst.FunctionDef, cst.Lambda)):
                        forward = value
            elif isinstance(target, cst.Attribute) and _is_self(target.value):
                name = target.attr.value
                cls = scope.enclosing_class()
                if cls is not None:
                    forward = next(
                        (v for v in cls.bindings.get(name, []) if isinstance(v, cst.FunctionDef)), None
                    )
            if forward is None:
                continue
            call_names = _names_assigned_from(scope, call)
            fscope = self.scope_of.get(forward)
            if fscope is None or fscope.parent is None:
                continue
            sites.append(self._site(forward, call, fscope.parent, name, call_names))
        return sites

    def _site(
        self, forward: FunctionNode, wrapper: cst.CSTNode, outer: Scope, name: str, call_names: set[str]
    ) -> GradientSite:
        scope = self.scope_of[forward]
        is_method = isinstance(outer.node, cst.ClassDef) and not _is_staticmethod(forward)
        positional = _positional_params(forward.params)
        if is_method and positional:
            positional = positional[1:]
        if isinstance(outer.node, cst.ClassDef):
            name = f"{outer.node.name.value}.{name}"
        outputs: list[cst.BaseExpression] = []
        grad_fns: list[GradFn] = []
        seen: set[int] = set()
        for value in _return_values(forward, scope):
            if not isinstance(value, cst.Tuple) or len(value.elements) != 2 or _has_star(value):
                continue
            outputs.append(value.elements[0].value)
            grad = self._grad_fn(value.elements[1].value, scope)
            if grad is not None and id(grad.node) not in seen:
                seen.add(id(grad.node))
                grad_fns.append(grad)
        site = GradientSite(
            model=self,
            name=name,
            forward=forward,
            scope=scope,
            wrapper=wrapper,
            is_method=is_method,
            inputs=[p.name.value for p in positional],
            has_varargs=isinstance(forward.params.star_arg, cst.Param),
            outputs=outputs,
            grad_fns=grad_fns,
            variables=[],
            call_names=call_names,
        )
        site.variables = self._variables_read(site)
        return site

    def _grad_fn(self, expr: cst.BaseExpression, scope: Scope) -> GradFn | None:
        node: FunctionNode | None = None
        name = "<lambda>"
        for value in self.resolve(expr, scope):
            if isinstance(value, (cst.FunctionDef, cst.Lambda)):
                node = value
                if isinstance(value, cst.FunctionDef):
                    name = value.name.value
                elif isinstance(expr, cst.Name):
                    name = expr.value
        if node is None or node not in self.scope_of:
            return None
        gscope = self.scope_of[node]
        params = node.params
        positional = _positional_params(params)
        # TensorFlow passes `variables` by keyword, so it is never an upstream gradient.
        upstream = [p for p in positional if p.name.value != "variables"]
        named = {p.name.value for p in positional} | {p.name.value for p in params.kwonly_params}
        kwargs = params.star_kwarg.name.value if isinstance(params.star_kwarg, cst.Param) else None
        returns = []
        for value, ret in _return_values_with_nodes(node, gscope):
            returns.append(GradReturn(ret, value, self.literal_elements(value, gscope) if value is not None else None))
        return GradFn(
            node=node,
            name=name,
            scope=gscope,
            upstream_params=[p.name.value for p in upstream],
            has_varargs=isinstance(params.star_arg, cst.Param),
            accepts_variables="variables" in named or params.star_kwarg is not None,
            returns=returns,
            required_upstream=sum(1 for p in upstream if p.default is None),
            variables_param="variables" if "variables" in named else kwargs,
        )

    def _variables_read(self, site: GradientSite) -> list[Variable]:
        """Variables the forward reads that are not inputs. TensorFlow watches reads made while
        the forward runs, so reads inside the grad fns (which run later) do not count."""
        grad_scopes = site.grad_fn_scopes()
        found: dict[str, Variable] = {}
        for scope in site.scopes():
            if scope in grad_scopes:
                continue
            for name in scope.reads:
                if name.value in found:
                    continue
                hit = scope.lookup(name.value)
                if hit is None:
                    continue
                owner, values = hit
                for value in values:
                    if self.is_variable_call(value):
                        inside = owner is site.scope or owner in set(site.scopes())
                        found[name.value] = Variable(name.value, value, _trainable(value), inside)  # type: ignore[arg-type]
                        break
            for attr in scope.attribute_reads:
                key = f"self.{attr.attr.value}"
                cls = scope.enclosing_class()
                if key in found or cls is None:
                    continue
                for value in cls.attributes.get(attr.attr.value, []):
                    if self.is_variable_call(value):
                        found[key] = Variable(key, value, _trainable(value), False)  # type: ignore[arg-type]
                        break
        return list(found.values())

    # ---- module-level questions ----------------------------------------------------------

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The node's parent in the module. Fixers need it (which statement holds this
        assignment?); the parent table is built on first use, so linting never pays for it."""
        parents = self.__dict__.get("_parents")
        if parents is None:
            from libcst.metadata import MetadataWrapper, ParentNodeProvider

            parents = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(ParentNodeProvider)
            self.__dict__["_parents"] = parents
        return parents.get(node)

    def names_in_use(self) -> set[str]:
        """Every name bound, read or imported anywhere in the module: a fixer introducing a
        name picks one outside this set, so it can shadow nothing."""
        names = self.__dict__.get("_names_in_use")  # once per module: fixers ask once per site
        if names is None:
            names = set(self.imports)
            for scope in self.root.walk():
                names.update(scope.bindings)
                names.update(n.value for n in scope.reads)
            self.__dict__["_names_in_use"] = names
        return set(names)


    def site_for_function(self, node: cst.CSTNode) -> GradientSite | None:
        return next((s for s in self.sites if s.forward is node), None)

    def unwrapped_candidates(self) -> Iterator[UnwrappedCandidate]:
        """Functions returning `(y, g)` where `g` is a def nested in them, not wrapped as a site."""
        wrapped = {id(s.forward) for s in self.sites}
        for scope in self.root.walk():
            node = scope.node
            if not isinstance(node, cst.FunctionDef) or id(node) in wrapped:
                continue
            for value in _return_values(node, scope):
                if isinstance(value, cst.Tuple) and len(value.elements) == 2 and not _has_star(value):
                    second = value.elements[1].value
                    if isinstance(second, cst.Name):
                        defs = [v for v in scope.bindings.get(second.value, []) if isinstance(v, cst.FunctionDef)]
                        if defs:
                            yield UnwrappedCandidate(node, scope, defs[0])
                            break


# Ops that return a list of tensors: an output built by them is not a single tensor.
_MULTI_OUTPUT_OPS = frozenset({"split", "unstack", "meshgrid", "dynamic_partition", "top_k", "unique", "moments"})


def _has_star(node: cst.CSTNode) -> bool:
    return any(isinstance(el, (cst.StarredElement, cst.StarredDictElement)) for el in getattr(node, "elements", ()))


def _is_self(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value in ("self", "cls")


def _is_staticmethod(fn: FunctionNode) -> bool:
    return isinstance(fn, cst.FunctionDef) and any(
        isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in fn.decorators
    )


def _positional_params(params: cst.Parameters) -> list[cst.Param]:
    return list(params.posonly_params) + list(params.params)


def _trainable(call: cst.Call) -> bool:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "trainable":
            return not (isinstance(arg.value, cst.Name) and arg.value.value == "False")
    return True


def _names_assigned_from(scope: Scope, call: cst.Call) -> set[str]:
    return {name for name, values in scope.bindings.items() if any(v is call for v in values)}


def _return_values_with_nodes(
    fn: FunctionNode, scope: Scope
) -> Iterator[tuple[cst.BaseExpression | None, cst.CSTNode]]:
    if isinstance(fn, cst.Lambda):
        yield fn.body, fn.body
        return
    for ret in scope.returns:
        yield ret.value, ret


def _return_values(fn: FunctionNode, scope: Scope) -> Iterator[cst.BaseExpression]:
    """Return values of `fn`, with a returned name bound to a tuple literal followed once."""
    for value, _ in _return_values_with_nodes(fn, scope):
        if isinstance(value, cst.Name):
            bound = scope.bindings.get(value.value, [])
            tuples = [v for v in bound if isinstance(v, cst.Tuple)]
            if tuples:
                yield from tuples  # type: ignore[misc]
                continue
        if value is not None:
            yield value


class _Collector(cst.CSTVisitor):
    """The single walk: scopes, bindings, reads, calls, returns, imports, decorated defs."""

    def __init__(self, model: ModuleModel) -> None:
        self.model = model
        self.imports: dict[str, str] = {}
        self.root = Scope(node=cst.Module(body=[]), parent=None)
        self.stack: list[Scope] = [self.root]
        self.scope_of: dict[cst.CSTNode, Scope] = {}
        self.defs: list[tuple[cst.FunctionDef, Scope]] = []
        self.calls: list[tuple[cst.Call, Scope]] = []
        self.forwarded: set[int] = set()

    @property
    def scope(self) -> Scope:
        return self.stack[-1]

    def visit_Module(self, node: cst.Module) -> None:
        self.root.node = node
        self.scope_of[node] = self.root

    # -- imports
    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            full = _dotted(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.imports[alias.asname.name.value] = full
            else:
                top = full.split(".")[0]
                self.imports[top] = top
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
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
        return scope

    def _bind_params(self, scope: Scope, params: cst.Parameters) -> None:
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        for extra in (params.star_arg, params.star_kwarg):
            if isinstance(extra, cst.Param):
                every.append(extra)
        for p in every:
            scope.bind(p.name.value, Param(p))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.scope.bind(node.name.value, node)
        if node.decorators:
            self.defs.append((node, self.scope))
        # Decorators and defaults belong to the enclosing scope.
        for dec in node.decorators:
            dec.visit(self)
        self._function_body(node)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        if isinstance(node.body, cst.Call):
            self.forwarded.add(id(node.body))
        self._function_body(node)
        return False

    def _function_body(self, node: FunctionNode) -> None:
        """Defaults are evaluated in the enclosing scope; parameters and body get their own."""
        _visit_defaults(node.params, self)
        scope = self._push(node)
        self._bind_params(scope, node.params)
        node.body.visit(self)
        self.stack.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.scope.bind(node.name.value, node)
        for dec in node.decorators:
            dec.visit(self)
        for base in node.bases:
            base.visit(self)
        self._push(node)
        node.body.visit(self)
        self.stack.pop()
        return False

    # -- bindings
    def _bind_target(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if isinstance(target, cst.Name):
            self.scope.bind(target.value, value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            values = None
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements):
                values = [el.value for el in value.elements]
            for i, el in enumerate(target.elements):
                self._bind_target(el.value, values[i] if values and not _has_star(target) else None)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value, None)
        elif isinstance(target, cst.Attribute) and _is_self(target.value) and value is not None:
            cls = self.scope.enclosing_class()
            if cls is not None:
                cls.attributes.setdefault(target.attr.value, []).append(value)
            target.value.visit(self)
        else:
            target.visit(self)

    def visit_Assign(self, node: cst.Assign) -> bool:
        if isinstance(node.value, cst.Call) and any(isinstance(t.target, (cst.Tuple, cst.List)) for t in node.targets):
            self.forwarded.add(id(node.value))
        node.value.visit(self)
        for t in node.targets:
            self._bind_target(t.target, node.value)
        return False

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        if node.value is not None:
            node.value.visit(self)
        self._bind_target(node.target, node.value)
        return False

    def visit_AugAssign(self, node: cst.AugAssign) -> bool:
        node.value.visit(self)
        node.target.visit(self)  # an augmented target is read as well
        if isinstance(node.target, cst.Name):
            self.scope.bind(node.target.value, None)
        return False

    def visit_NamedExpr(self, node: cst.NamedExpr) -> bool:
        node.value.visit(self)
        self._bind_target(node.target, node.value)
        return False

    def visit_For(self, node: cst.For) -> bool:
        node.iter.visit(self)
        self._bind_target(node.target, None)
        node.body.visit(self)
        if node.orelse is not None:
            node.orelse.visit(self)
        return False

    def visit_CompFor(self, node: cst.CompFor) -> bool:
        node.iter.visit(self)
        self._bind_target(node.target, None)
        for cond in node.ifs:
            cond.visit(self)
        if node.inner_for_in is not None:
            node.inner_for_in.visit(self)
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

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if _is_self(node.value):
            self.scope.attribute_reads.append(node)
        node.value.visit(self)  # the attribute name itself is not a read
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)  # a keyword's name is not a read
        return False

    def visit_Call(self, node: cst.Call) -> None:
        self.scope.calls.append(node)
        self.calls.append((node, self.scope))

    def visit_Return(self, node: cst.Return) -> None:
        self.scope.returns.append(node)
        if isinstance(node.value, cst.Call):
            self.forwarded.add(id(node.value))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if isinstance(node.value, cst.Call):
            self.forwarded.add(id(node.value))


class _ReadsIn(cst.CSTVisitor):
    """Names read inside one expression (see `ModuleModel.reads_in`)."""

    def __init__(self, skip_attrs: frozenset[str]) -> None:
        self.skip_attrs = skip_attrs
        self.names: list[cst.Name] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.names.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if node.attr.value not in self.skip_attrs:
            node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False


def _visit_defaults(params: cst.Parameters, visitor: cst.CSTVisitor) -> None:
    for p in [*params.posonly_params, *params.params, *params.kwonly_params]:
        if p.default is not None:
            p.default.visit(visitor)


def _dotted(node: cst.CSTNode) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


# ---- expression kinds ----------------------------------------------------------------------

# What a returned expression is, as far as the source says: rules compare these.
LIST, TUPLE, CALLABLE, NONE, TENSOR, UNKNOWN = "list", "tuple", "callable", "none", "tensor", "unknown"


def kind_of(model: ModuleModel, expr: cst.BaseExpression | None, scope: Scope) -> str:
    """Classify a value by its source: a list (literal, comprehension, `list(...)`, concatenation
    of lists), a tuple literal, a callable (lambda or def), `None`, a tensor (a TensorFlow op,
    arithmetic, a parameter), or unknown. A name bound to several kinds is unknown."""
    kinds = {_kind(model, v) for v in model.resolve(expr, scope)}
    return kinds.pop() if len(kinds) == 1 else UNKNOWN


def _kind(model: ModuleModel, value: Binding) -> str:
    if isinstance(value, (cst.List, cst.ListComp)):
        return LIST
    if isinstance(value, cst.Tuple):
        return TUPLE
    if isinstance(value, (cst.Lambda, cst.FunctionDef)):
        return CALLABLE
    if isinstance(value, cst.Name) and value.value == "None":
        return NONE
    if isinstance(value, Param):
        return TENSOR if value.node.star not in ("*", "**") else UNKNOWN
    if isinstance(value, cst.Call):
        if isinstance(value.func, cst.Name) and value.func.value == "list":
            return LIST
        return TENSOR if tf_op_name(model.qualname(value.func)) is not None else UNKNOWN
    if isinstance(value, cst.BinaryOperation):
        if isinstance(value.operator, cst.Add) and isinstance(value.left, (cst.List, cst.ListComp)):
            return LIST
        return TENSOR if not isinstance(value.left, (cst.List, cst.ListComp, cst.Tuple)) else UNKNOWN
    if isinstance(value, cst.UnaryOperation):
        return TENSOR
    return UNKNOWN


# Calls that build an all-zero gradient, by their last name: `tf.zeros_like`, `np.zeros`, ...
_ZERO_BUILDERS = frozenset({"zeros", "zeros_like"})


def is_no_gradient(model: ModuleModel, expr: cst.BaseExpression | None, scope: Scope, depth: int = 0) -> bool:
    """Whether a gradient value is "nothing flows back": `None`, a literal zero, `tf.zeros(...)`
    / `zeros_like(...)`, or a tuple, list, comprehension or `[None] * n` made only of those."""
    if expr is None or depth > 8:
        return False
    values = model.resolve(expr, scope)
    return bool(values) and all(_no_gradient(model, v, scope, depth) for v in values)


def _no_gradient(model: ModuleModel, value: Binding, scope: Scope, depth: int) -> bool:
    if isinstance(value, cst.Name):
        return value.value == "None"
    if isinstance(value, (cst.Integer, cst.Float)):
        return float(value.evaluated_value) == 0.0
    if isinstance(value, (cst.Tuple, cst.List)):
        return all(
            not isinstance(el, cst.StarredElement) and is_no_gradient(model, el.value, scope, depth + 1)
            for el in value.elements
        )
    if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        return is_no_gradient(model, value.elt, model.scope_of.get(value, scope), depth + 1)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
        return is_no_gradient(model, value.left, scope, depth + 1) and isinstance(value.left, (cst.List, cst.Tuple))
    if isinstance(value, cst.Call):
        func = value.func
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        return last in _ZERO_BUILDERS
    return False
