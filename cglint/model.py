"""The analysis model: one libcst parse of a module -> the TensorFlow custom-gradient sites in it.

This is the only place that walks the syntax tree. Rules ask a `ModuleModel` and its
`GradientSite`s questions ("which variables does the forward read?", "what does this name
hold?", "what does this grad fn return?") and never traverse the tree themselves.

One pass (`_Collector`) records imports, scopes with their name bindings, function
definitions, calls and `self.x = ...` attributes. Sites are then assembled from those tables,
so the cost is one walk plus work proportional to the sites.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Iterator, Union

import libcst as cst

from cglint.cstwalk import Walker

# Shared with the quick scan, which runs before (and often instead of) libcst.
from cglint.names import KERAS_CUSTOM_GRADIENT, TF_CUSTOM_GRADIENT, alias_to_tensorflow, normalize  # noqa: F401

FunctionNode = Union[cst.FunctionDef, cst.Lambda]

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
# Keras 3 variables: `keras.Variable` wraps a backing `tf.Variable` (`w.value`), and that backing
# variable, not the wrapper, is what TensorFlow records and passes in a grad fn's `variables`.
KERAS_VARIABLE_CONSTRUCTORS = frozenset(
    {
        "keras.Variable",
        "keras.backend.Variable",
        "keras.src.backend.Variable",
        "keras.src.backend.common.variables.Variable",
        "keras.src.backend.tensorflow.core.Variable",
        "tensorflow.keras.Variable",
    }
)
# A Keras layer's weights by attribute (`self.dense.kernel`), and its own weight lists.
KERAS_WEIGHT_ATTRIBUTES = frozenset({
    "kernel", "bias", "recurrent_kernel", "depthwise_kernel", "pointwise_kernel", "embeddings", "gamma", "beta",
})
_OWN_WEIGHT_LISTS = frozenset({"trainable_weights", "weights", "trainable_variables", "variables"})
# Keras 2 (`tf_keras`, TF_USE_LEGACY_KERAS) layers: their `add_weight` returns a plain tf.Variable.
_LEGACY_KERAS = ("tf_keras.", "tensorflow.python.keras.", "keras.legacy.")
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
    # Activations and Keras 3 ops under every spelling (`tf.keras.activations.sigmoid`,
    # `keras.activations.tanh`, `keras.ops.sin`, `from keras import activations`).
    "tensorflow.keras.activations.",
    "tensorflow.keras.ops.",
    "keras.activations.",
    "keras.ops.",
    "keras.src.activations.",
    "keras.src.ops.",
    "tensorflow.",
)
# Spellings of the same op under another name.
_OP_ALIASES = {"exponential": "exp", "math.log1p": "log1p"}


def tf_op_name(qualname: str | None) -> str | None:
    """`tensorflow.math.tan` -> `tan`; None when the name is not a TensorFlow op."""
    if not qualname:
        return None
    for ns in _OP_NAMESPACES:
        if qualname.startswith(ns):
            rest = qualname[len(ns) :]
            rest = _OP_ALIASES.get(rest, rest)
            return rest if "." not in rest else None
    return None


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

    # For each entry of `bindings[name]`: (when it was bound, in source order; whether it is
    # bound unconditionally, directly in the body rather than under an if/loop/try).
    order: dict[str, list[tuple[int, bool]]] = field(default_factory=dict)

    def bind(self, name: str, value: Binding, seq: int = -1, sure: bool = False) -> None:
        self.bindings.setdefault(name, []).append(value)
        self.order.setdefault(name, []).append((seq, sure))

    def visible(self, name: str, before: int | None) -> list[Binding]:
        """The bindings of `name` a read can see: from the last unconditional one on. A read in
        this scope (`before` = its position) sees those made before it; a read in a nested
        function (`before` None: a grad fn runs after the forward returned) sees the last."""
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


@dataclass(eq=False)
class Variable:
    """A `tf.Variable` (or Keras weight) that a forward reads without taking it as input."""

    name: str  # as written in the forward: `w`, `self.kernel`
    created_by: cst.Call
    trainable: bool
    created_inside: bool  # constructed inside the forward itself
    # A Keras 3 weight (`self.add_weight(...)`, `keras.Variable(...)`): `variables` holds its
    # backing `w.value`, and the wrapper has no `.ref()`.
    keras: bool = False
    # False when the entry stands for variables the source does not name one by one (a
    # sublayer's weights, an entry of a container read by an unknown index): fixes that key
    # gradients on each variable need exact entries.
    exact: bool = True

    @property
    def ref_code(self) -> str:
        """The expression keying a gradient on this variable the way `v.ref()` for `v` in
        `variables` finds it: `self.w.value.ref()` for a Keras weight, `w.ref()` otherwise."""
        return f"{self.name}.value.ref()" if self.keras else f"{self.name}.ref()"


@dataclass(eq=False)
class Helper:
    """A function of the module a name refers to (see `ModuleModel.helper`): its def and scope."""

    node: cst.FunctionDef
    scope: Scope

    @property
    def params(self) -> list[str]:
        """Its positional parameter names, in order."""
        return [p.name.value for p in _positional_params(self.node.params)]

    def returned(self) -> list[cst.BaseExpression]:
        return [r.value for r in self.scope.returns if r.value is not None]


@dataclass(eq=False)
class GradReturn:
    """One `return` of a grad fn (a lambda's body counts as its return)."""

    node: cst.CSTNode
    value: cst.BaseExpression | None
    # The top-level elements when the value is a literal tuple (or a name bound to one).
    elements: list[cst.BaseExpression] | None

    @property
    def pair(self) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
        """`(input_grads, var_grads)` when the return is a literal 2-tuple: the shape TensorFlow
        unpacks when the forward read variables (without variables it is two input gradients)."""
        if self.elements is None or len(self.elements) != 2:
            return None
        return self.elements[0], self.elements[1]


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

    @property
    def upstream_names(self) -> list[str]:
        """Every name the upstream gradients arrive under: the positional parameters (not
        `variables`) and a `*args` that collects them."""
        star = self.node.params.star_arg
        return list(self.upstream_params) + ([star.name.value] if isinstance(star, cst.Param) else [])


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
    def keras_ops(self) -> bool:
        """A Keras 3 `keras.ops.custom_gradient` site (TensorFlow's on the TensorFlow backend)."""
        expr = self.wrapper.decorator if isinstance(self.wrapper, cst.Decorator) else getattr(self.wrapper, "func", None)
        return self.model.qualname(expr) in KERAS_CUSTOM_GRADIENT

    @property
    def trainable_variables(self) -> list[Variable]:
        return [v for v in self.variables if v.trainable]

    @property
    def output_count(self) -> int | None:
        """Number of flattened outputs, when every return agrees and the count is literal (an
        input returned as an output flattens as the input does: `input_counts`)."""
        params = self.model.param_counts(self)
        counts = {self.model.flat_count(y, self.scope, params=params) for y in self.outputs}
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

    def __init__(self, module: cst.Module, tensorflow_aliases: tuple[str, ...] = ()) -> None:
        self.module = module
        collector = _Collector(self)
        collector.walk(module)
        self.imports: dict[str, str] = reach_imports(collector.imports, tensorflow_aliases, collector.root)
        self.root: Scope = collector.root
        self.scope_of: dict[cst.CSTNode, Scope] = collector.scope_of
        self.decorated: list[tuple[cst.FunctionDef, Scope]] = collector.defs
        self.all_calls: list[tuple[cst.Call, Scope]] = collector.calls
        # Calls whose result is passed on whole or taken apart where it is made (returned,
        # a lambda's body, unpacked `a, b = f()`, indexed `f()[0]`): the caller treats it as a
        # structure, not as one tensor.
        self.forwarded_calls: set[int] = collector.forwarded
        # id(Name read) -> its position in source order, against the bindings' (`Scope.order`).
        self._read_seq: dict[int, int] = collector.read_seq
        # id(`self.x` node) -> the attribute read from it, when it is `self.x.<attr>`.
        self._attribute_of: dict[int, str] = collector.attribute_of
        # id(def, lambda, call or def name) -> index of the top-level statement holding it.
        self._top_of: dict[int, int] = collector.top_of
        # The imports are complete from here on: qualified names can be remembered per node
        # (kept with the node, so an id is never reused while its entry lives).
        self._qualnames: dict[int, tuple[cst.CSTNode, str | None]] = {}
        self.sites: list[GradientSite] = self._find_sites()

    @property
    def imports_tensorflow(self) -> bool:
        return any(q == "tensorflow" or q.startswith("tensorflow.") for q in self.imports.values())

    def reads_in(self, expr: cst.CSTNode, skip_attrs: frozenset[str] = frozenset()) -> list[cst.Name]:
        """Names an expression reads (attribute and keyword names are not reads). Names under
        an attribute in `skip_attrs` are left out: `x.shape` with `{"shape"}` reads nothing."""
        finder = _ReadsIn(skip_attrs)
        finder.walk(expr)
        return finder.names

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
        """The module's own function a name (or a call's callee) refers to in `scope`, when the
        name is bound to exactly one def there: `dtan` in `dtan(y)` -> `def dtan(a): ...`."""
        if not isinstance(expr, cst.Name):
            return None
        defs = [v for v in self.resolve(expr, scope) if isinstance(v, cst.FunctionDef) and v in self.scope_of]
        if len(defs) != 1:
            return None
        node = defs[0]
        return Helper(node, self.scope_of[node])

    def is_variable_call(self, call: cst.CSTNode) -> bool:
        if not isinstance(call, cst.Call):
            return False
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "add_weight":
            return True
        qualname = self.qualname(call.func)
        return qualname in VARIABLE_CONSTRUCTORS or qualname in KERAS_VARIABLE_CONSTRUCTORS

    def is_keras_variable_call(self, call: cst.CSTNode) -> bool:
        """Whether `call` makes a Keras 3 variable: `keras.Variable(...)`, or `add_weight(...)`
        (the TensorFlow 2.16+ `tf.keras` is Keras 3) outside a class built on Keras 2's
        `tf_keras`, whose `add_weight` returns a plain `tf.Variable`."""
        if not isinstance(call, cst.Call):
            return False
        if self.qualname(call.func) in KERAS_VARIABLE_CONSTRUCTORS:
            return True
        if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "add_weight"):
            return False
        scope = self._scope_holding(call)
        cls = scope.enclosing_class() if scope is not None else None
        if cls is not None and isinstance(cls.node, cst.ClassDef):
            bases = [self.qualname(b.value) or "" for b in cls.node.bases]
            if any(b.startswith(_LEGACY_KERAS) for b in bases):
                return False
        return True

    def _scope_holding(self, node: cst.CSTNode) -> Scope | None:
        """The scope a call was recorded in (calls are indexed once, on first use)."""
        index = self.__dict__.get("_call_scopes")
        if index is None:
            index = {id(call): scope for call, scope in self.all_calls}
            self.__dict__["_call_scopes"] = index
        return index.get(id(node))

    def variable_of(self, value: Binding) -> Variable | None:
        """The variable a bound value creates (`tf.Variable(...)`, `self.add_weight(...)`)."""
        if not self.is_variable_call(value):
            return None
        return Variable("", value, _trainable(value), False, self.is_keras_variable_call(value))  # type: ignore[arg-type]

    def weight(self, expr: cst.BaseExpression | None, scope: Scope) -> Variable | None:
        """The one variable an expression holds, when the module says which (see `weights`)."""
        found = self.weights(expr, scope)
        return found[0] if len(found) == 1 else None

    def weights(self, expr: cst.BaseExpression | None, scope: Scope, depth: int = 0) -> list[Variable]:
        """The variables an expression holds, followed through the module's data flow:
        `tf.Variable(...)` / `self.add_weight(...)` / `keras.Variable(...)`; a name bound to one
        (`w = self.kernel`, the binding in effect); `self.w` (bound in any method of the class);
        lists, tuples and dicts of them and their entries (`self.ws[0]`, `self.params["w"]`,
        `kernel, bias = self.trainable_weights`); `self.w.value` (a Keras weight's backing
        variable, a plain tf.Variable); and a sublayer's weights (`self.dense.kernel`, or all of
        `self.dense`, one inexact entry). Each Variable's `name` is the expression as written."""
        if expr is None or depth > 6:
            return []
        out: list[Variable] = []
        name: str | None = None
        for value in self.resolve(expr, scope):
            if isinstance(value, cst.Attribute) and _is_self(value.value):
                # `self.ws` bound to a literal list: its entries by index (`self.ws[0]`).
                bound = self.attribute_values(scope, value.attr.value)
                value = bound[0] if len(bound) == 1 and isinstance(bound[0], (cst.List, cst.Tuple, cst.Dict)) else value
            found = self._weights_of(value, scope, depth)
            if not found:
                continue
            name = name or (expr.value if isinstance(expr, cst.Name) else self.module.code_for_node(expr).strip())
            keys = _entry_keys(value)
            if keys is not None and len(keys) == len(found):
                out += [replace(var, name=f"{name}[{key}]") if var.exact else var for var, key in zip(found, keys)]
            else:
                out += [replace(var, name=name) if var.exact else var for var in found]
        return out

    def _containers(self, expr: cst.BaseExpression, scope: Scope) -> list[Binding]:
        """What a container expression holds: a name's bindings, `self.x`'s class bindings."""
        out: list[Binding] = []
        for value in self.resolve(expr, scope):
            if isinstance(value, cst.Attribute) and _is_self(value.value):
                out += self.attribute_values(scope, value.attr.value) or [value]
            else:
                out.append(value)
        return out

    def attribute_values(self, scope: Scope, attr: str) -> list[Binding]:
        """What `self.<attr>` is bound to in the class `scope` is in, or in a base class of this
        module (`self.dense = Dense(4)` in the base's `__init__`)."""
        cls = scope.enclosing_class()
        seen = 0
        while cls is not None and seen < 8:
            seen += 1
            if attr in cls.attributes:
                return cls.attributes[attr]
            cls = self._module_base(cls)
        return []

    def _module_base(self, cls: Scope) -> Scope | None:
        node = cls.node
        if not isinstance(node, cst.ClassDef):
            return None
        for base in node.bases:
            if isinstance(base.value, cst.Name):
                for bound in self.root.bindings.get(base.value.value, []):
                    if isinstance(bound, cst.ClassDef) and bound is not node and bound in self.scope_of:
                        return self.scope_of[bound]
        return None

    def _weights_of(self, value: Binding, scope: Scope, depth: int) -> list[Variable]:
        made = self.variable_of(value)
        if made is not None:
            return [made]
        if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
            return [v for el in value.elements if not isinstance(el, cst.StarredElement)
                    for v in self.weights(el.value, scope, depth + 1)]
        if isinstance(value, cst.Dict):
            return [v for el in value.elements if isinstance(el, cst.DictElement)
                    for v in self.weights(el.value, scope, depth + 1)]
        if isinstance(value, cst.Subscript):
            entry = _literal_entry(self._containers(value.value, scope), value)
            if entry is not None:
                return self.weights(entry, scope, depth + 1)
            return [replace(v, exact=False) for v in self.weights(value.value, scope, depth + 1)]
        if isinstance(value, Unpacked):
            entry = _unpacked_entry(self._containers(value.source, scope), value.index)
            if entry is not None:
                return self.weights(entry, scope, depth + 1)
            own = self._own_weights(value.source, scope)
            return [own] if own is not None else []
        if isinstance(value, cst.Attribute):
            if _is_self(value.value):
                for bound in self.attribute_values(scope, value.attr.value):
                    found = self._weights_of(bound, scope, depth + 1)
                    if found:
                        return found
                    layer = self.keras_layer_call(bound)
                    if layer is not None:
                        # A sublayer: its weights, which the source does not list one by one.
                        return [Variable(self.module.code_for_node(value).strip(), layer, _trainable(layer), False,
                                         True, exact=False)]
                return []
            inner = self.weights(value.value, scope, depth + 1)
            if value.attr.value == "value" and len(inner) == 1 and inner[0].keras:
                return [replace(inner[0], keras=False)]  # `self.w.value`: the backing tf.Variable
            if len(inner) == 1 and not inner[0].exact and value.attr.value in KERAS_WEIGHT_ATTRIBUTES:
                return [replace(inner[0], exact=True)]  # `self.dense.kernel`
        return []

    def _own_weights(self, source: cst.BaseExpression, scope: Scope) -> Variable | None:
        """One entry of `self.trainable_weights` (and the like) in a Keras layer or tf.Module."""
        if not (isinstance(source, cst.Attribute) and _is_self(source.value) and source.attr.value in _OWN_WEIGHT_LISTS):
            return None
        cls = scope.enclosing_class()
        keras = cls is not None and self.is_keras_class(cls)
        return Variable("", source, source.attr.value != "non_trainable_weights", False, keras)  # type: ignore[arg-type]

    def is_keras_class(self, cls: Scope) -> bool:
        """Whether a class scope is a Keras layer or model: built on `keras.*` / `tf.keras.*`
        (not Keras 2's `tf_keras`), directly or through a class of this module."""
        node = cls.node
        if not isinstance(node, cst.ClassDef):
            return False
        for base in node.bases:
            qualname = self.qualname(base.value) or ""
            if qualname.startswith(("keras.", "tensorflow.keras.")):
                return True
            if isinstance(base.value, cst.Name):
                for bound in self.root.bindings.get(base.value.value, []):
                    if isinstance(bound, cst.ClassDef) and bound is not node and bound in self.scope_of:
                        if self.is_keras_class(self.scope_of[bound]):
                            return True
        return False

    def keras_layer_call(self, value: Binding) -> cst.Call | None:
        """`keras.layers.Dense(4)` / `tf.keras.layers.Dense(4)` / `MyLayer()` (a Keras class of
        this module): the call making a sublayer, whose weights are Keras 3 variables."""
        if not isinstance(value, cst.Call):
            return None
        qualname = self.qualname(value.func) or ""
        if qualname.startswith(("keras.layers.", "tensorflow.keras.layers.", "keras.src.layers.")):
            return value
        if isinstance(value.func, cst.Name):
            for bound in self.root.bindings.get(value.func.value, []):
                if isinstance(bound, cst.ClassDef) and bound in self.scope_of and self.is_keras_class(self.scope_of[bound]):
                    return value
        return None

    def literal_elements(self, expr: cst.BaseExpression | None, scope: Scope,
                         depth: int = 0) -> list[cst.BaseExpression] | None:
        """Elements of a literal tuple/list, following a name bound once to one, and through
        `tuple(...)`/`list(...)` and a comprehension that yields the entries unchanged."""
        values = self.resolve(expr, scope)
        if len(values) != 1:
            return None
        value = values[0]
        if isinstance(value, (cst.Tuple, cst.List)):
            return [el.value for el in value.elements] if not _has_star(value) else None
        if (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in ("tuple", "list")
                and scope.lookup(value.func.value) is None):
            # `tuple([dx, dw])`, `list((dw, db))`: the literal inside.
            inner = positional_arguments(value)
            if inner is not None and len(inner) == 1 and len(value.args) == 1:
                return self.literal_elements(inner[0], scope) if depth < 4 else None
        if isinstance(value, (cst.ListComp, cst.GeneratorExp)) and depth < 4:
            # `[g for g in (dw, db)]`: the iterable's entries, when the comprehension yields each as is.
            loop = value.for_in
            if (isinstance(value.elt, cst.Name) and isinstance(loop.target, cst.Name) and value.elt.value == loop.target.value
                    and not loop.ifs and loop.inner_for_in is None):
                return self.literal_elements(loop.iter, scope, depth + 1)
        return None

    def flat_count(self, expr: cst.BaseExpression | None, scope: Scope, depth: int = 0,
                   params: dict[int, int | None] | None = None) -> int | None:
        """How many tensors `expr` flattens to, when that is literal in the source; else None.

        Literal tuples/lists/dicts are counted element by element; a tensor op, arithmetic, a
        number literal (TensorFlow counts a returned `0` as one gradient) or a parameter counts
        one; a call to anything unknown might return a structure: unknown. `params` maps a
        site's parameters (by `id` of their binding) to what they flatten to (`input_counts`)."""
        if expr is None or depth > 8:
            return None
        values = self.resolve(expr, scope)
        counts = set()
        for value in values:
            if isinstance(value, (cst.Tuple, cst.List)):
                if _has_star(value):
                    return None
                parts = [self.flat_count(el.value, scope, depth + 1, params) for el in value.elements]
                if None in parts:
                    return None
                counts.add(sum(parts))  # type: ignore[arg-type]
            elif isinstance(value, cst.Dict):
                parts = [
                    self.flat_count(el.value, scope, depth + 1, params) if isinstance(el, cst.DictElement) else None
                    for el in value.elements
                ]
                if None in parts:
                    return None
                counts.add(sum(parts))  # type: ignore[arg-type]
            elif isinstance(value, Param) and value.node.star in ("*", "**"):
                return None  # `*args` / `**kwargs` hold any number of tensors
            elif isinstance(value, Param) and params is not None and id(value) in params:
                if params[id(value)] is None:
                    return None
                counts.add(params[id(value)])  # type: ignore[arg-type]
            elif isinstance(value, (Param, cst.BinaryOperation, cst.UnaryOperation, cst.Subscript,
                                    cst.Integer, cst.Float, cst.Imaginary)):
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
        qualname = self.qualname(expr)
        return qualname in TF_CUSTOM_GRADIENT or qualname in KERAS_CUSTOM_GRADIENT

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
            target = argument(call, 0, "f")
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
            call_names = self.names_bound_to(call, scope)
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

    def _grad_fn(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> GradFn | None:
        node: FunctionNode | None = None
        name = "<lambda>"
        bound_positional, bound_keywords = 0, set()
        for value in self.resolve(expr, scope):
            if isinstance(value, (cst.FunctionDef, cst.Lambda)):
                node = value
                if isinstance(value, cst.FunctionDef):
                    name = value.name.value
                elif isinstance(expr, cst.Name):
                    name = expr.value
            elif isinstance(value, cst.Call) and self.qualname(value.func) == "functools.partial" and depth < 2:
                # `functools.partial(_grad, x=x)`: TensorFlow calls what is left of `_grad`.
                inner = self._grad_fn(value.args[0].value, scope, depth + 1) if value.args else None
                rest = value.args[1:]
                if inner is None or any(a.star for a in rest):
                    return None
                node = inner.node
                name = inner.name
                bound_positional = sum(1 for a in rest if a.keyword is None)
                bound_keywords = {a.keyword.value for a in rest if a.keyword is not None}
        if node is None or node not in self.scope_of:
            return None
        gscope = self.scope_of[node]
        params = node.params
        positional = _positional_params(params)[bound_positional:]
        # TensorFlow passes `variables` by keyword, so it is never an upstream gradient.
        upstream = [p for p in positional if p.name.value != "variables" and p.name.value not in bound_keywords]
        named = {p.name.value for p in positional} | {p.name.value for p in params.kwonly_params}
        kwargs = params.star_kwarg.name.value if isinstance(params.star_kwarg, cst.Param) else None
        returns = []
        higher_order = isinstance(node, cst.FunctionDef) and any(self._is_custom_gradient(d.decorator) for d in node.decorators)
        for value, ret in _return_values_with_nodes(node, gscope):
            if higher_order:
                # The grad fn is itself `@tf.custom_gradient`: it returns `(gradients, grad_of_grad)`
                # and its callers (TensorFlow) get the gradients alone.
                pair = self.literal_elements(value, gscope) if value is not None else None
                value = pair[0] if pair is not None and len(pair) == 2 else None
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
        the forward runs, so reads inside the grad fns (which run later) do not count. A name
        or `self.x` read is followed through the data flow `weights` knows (aliases made in
        the enclosing method, containers, sublayers)."""
        grad_scopes = site.grad_fn_scopes()
        inputs = set(site.inputs)
        found: dict[str, Variable] = {}
        for scope in site.scopes():
            if scope in grad_scopes:
                continue
            for name in scope.reads:
                if name.value in found or (scope is site.scope and name.value in inputs):
                    continue
                if scope.lookup(name.value) is None:
                    continue
                for var in self.weights(name, scope):
                    inside = var.created_by is not None and self._made_within(var.created_by, site.scope)
                    found.setdefault(var.name, replace(var, created_inside=inside))
            for attr in scope.attribute_reads:
                for var in self.weights(attr, scope):
                    if not var.exact:
                        if not self._uses_weights(attr):
                            continue  # `self.dense.units`: configuration, no variable is read
                        weight = self._attribute_of.get(id(attr))
                        if weight in KERAS_WEIGHT_ATTRIBUTES:  # `self.dense.kernel`: that weight
                            var = replace(var, name=f"{var.name}.{weight}", exact=True)
                    found.setdefault(var.name, var)
        return list(found.values())

    def _uses_weights(self, layer: cst.Attribute) -> bool:
        """Whether a sublayer `self.dense` is used in a way that reads its weights: called
        (`self.dense(x)`), or one of its weights or weight lists read (`self.dense.kernel`)."""
        if id(layer) in self.call_of_func:
            return True
        attr = self._attribute_of.get(id(layer))
        return attr is not None and (attr in KERAS_WEIGHT_ATTRIBUTES or attr in _OWN_WEIGHT_LISTS)

    def _made_within(self, call: cst.CSTNode, scope: Scope) -> bool:
        made_in = self._scope_holding(call)
        return made_in is not None and made_in.within(scope)

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

    def site_called_by(self, call: cst.Call, scope: Scope) -> GradientSite | None:
        """The custom-gradient function `call` (made in `scope`) calls, if any (the first of
        `sites_by_call_name` under the callee's name that `is_reached_by` the call)."""
        func, index = call.func, self._sites_by_callee
        if isinstance(func, cst.Name):
            found = scope.lookup(func.value)
            hits = [index[k] for k in ((func.value, id(v)) for v in found[1]) if k in index] if found else []
            return min(hits, key=lambda hit: hit[0])[1] if hits else None
        if isinstance(func, cst.Attribute) and _is_self(func.value):
            owner = scope.enclosing_class()
            hit = index.get(("self." + func.attr.value, id(owner))) if owner is not None else None
            return hit[1] if hit else None
        return None

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
            site = self.site_called_by(call, scope)
            if site is not None:
                index.setdefault(id(site), []).append((call, scope))
        return index

    def calls_reaching(self, site: GradientSite) -> list[tuple[cst.Call, Scope]]:
        """The calls of the module that call `site` (by its name, the call form's result, or
        `self.method(...)`), in source order."""
        return self._calls_by_site.get(id(site), [])

    # ---- counting as TensorFlow counts -----------------------------------------------------
    # TensorFlow flattens the positional arguments of each call (`nest.flatten(args)`): a list
    # argument holds several inputs, and the grad fn returns one gradient per flattened entry.

    def input_counts(self, site: GradientSite) -> list[int | None]:
        """Per positional input of `site`, how many tensors TensorFlow flattens it to: what the
        module's calls pass there when that is a literal structure (`f([a, b], c)`: 2 and 1),
        None when calls disagree or pass `*args` there; 1 where no call says (a guess: see
        `inputs_taken_apart`)."""
        cache = self.__dict__.setdefault("_input_counts", {})
        if id(site) not in cache:
            counts: list[int | None] = []
            guessed: set[str] = set()
            calls = self.calls_reaching(site)
            for i, param in enumerate(site.input_params):
                known: set[int | None] = set()
                for call, scope in calls:
                    positional = [a for a in call.args if a.keyword is None]
                    if any(a.star for a in positional[: i + 1]):
                        known.add(None)
                    elif i < len(positional):
                        count = self._structure_count(positional[i].value, scope)
                        if count is not None:
                            known.add(count)
                if len(known) > 1 or None in known:
                    counts.append(None)
                elif known:
                    counts.append(known.pop())
                else:
                    counts.append(1)
                    guessed.add(param.name.value)
            cache[id(site)] = (counts, guessed)
        return cache[id(site)][0]

    def inputs_taken_apart(self, site: GradientSite) -> set[str]:
        """Inputs whose count `input_counts` guessed (no call says) although the forward or a
        grad fn takes them apart as a structure (`a, b = pair`, `xs[0]`, `for x in xs`,
        `len(xs)`, `tf.add_n(xs)`, `*xs`): their real count is unknown. A walk of the site's
        body, so rules ask only when a count disagrees."""
        self.input_counts(site)
        guessed = self.__dict__["_input_counts"][id(site)][1]
        return _StructureUse.of(self, site) & guessed if guessed else set()

    def _structure_count(self, arg: cst.BaseExpression, scope: Scope, depth: int = 0) -> int | None:
        """What a call argument that is a literal structure (`[left, right]`, or a name bound
        only to one) flattens to, counting each entry that is not itself a literal structure as
        one tensor; None for anything else (a name, a call: that says nothing of structure)."""
        values = self.resolve(arg, scope)
        if depth > 8 or len(values) != 1 or not isinstance(values[0], (cst.Tuple, cst.List, cst.Dict)):
            return None
        value = values[0]
        if _has_star(value):
            return None
        total = 0
        for el in value.elements:
            inner = el.value if isinstance(el, (cst.Element, cst.DictElement)) else None
            if inner is None:
                return None
            nested = self._structure_count(inner, scope, depth + 1)
            total += nested if nested is not None else 1
        return total

    def param_counts(self, site: GradientSite) -> dict[int, int | None]:
        """`input_counts` keyed by `id` of each input's binding in the forward's scope, as
        `flat_count(params=...)` takes it."""
        out: dict[int, int | None] = {}
        for param, count in zip(site.input_params, self.input_counts(site)):
            for value in site.scope.bindings.get(param.name.value, []):
                if isinstance(value, Param) and value.node is param:
                    out[id(value)] = count
        return out

    def may_read_unseen_variables(self, site: GradientSite) -> bool:
        """Whether the forward calls something that may read variables the model does not see:
        a sublayer or object method (`self.dense(x)`, `layer(x)`), a helper of the module, any
        call that is not a TensorFlow op or a function defined inside the forward."""
        grad_scopes = site.grad_fn_scopes()
        local = {id(s.node) for s in site.scopes()}
        for scope in site.scopes():
            if scope in grad_scopes:
                continue
            for call in scope.calls:
                qualname = self.qualname(call.func)
                if qualname is not None and (qualname.startswith("tensorflow.") or qualname in _PURE_CALLS):
                    continue
                if isinstance(call.func, cst.Name):
                    if call.func.value in _PURE_BUILTINS and scope.lookup(call.func.value) is None:
                        continue
                    if any(id(v) in local for v in self.resolve(call.func, scope) if v is not None):
                        continue
                return True
        return False

    def keras_weights_passed(self, site: GradientSite) -> list[tuple[cst.Arg, Variable, str]]:
        """Keras 3 weights passed positionally to `site` (`op(x, self.w)`), with the parameter
        each lands in. Eagerly TensorFlow does not see such a weight as that input (it compares
        the `keras.Variable` wrapper with the backing `tf.Variable` the forward reads), so the
        forward still reads a variable and the grad fn needs `variables`; `self.w.value` is a
        plain input. Only trainable weights: TensorFlow watches no other."""
        found: list[tuple[cst.Arg, Variable, str]] = []
        for call, scope in self.calls_reaching(site):
            for i, arg in enumerate(call.args):
                if arg.keyword is not None or arg.star:
                    break
                weight = self.weight(arg.value, scope)
                if weight is not None and weight.keras and weight.trainable:
                    param = site.inputs[i] if i < len(site.inputs) else "*args"
                    found.append((arg, weight, param))
        return found

    # ---- plain Python values -------------------------------------------------------------
    # TensorFlow converts every positional argument of a custom-gradient call to a tensor
    # (eagerly to record the op, under tf.function before calling the forward): what an
    # argument holds when the source says it is a plain Python value.

    def python_value(self, expr: cst.BaseExpression | None, scope: Scope, depth: int = 0) -> str | None:
        """`"number"`, `"bool"`, `"string"`, `"None"` or `"callable"` when every value `expr`
        may hold is that Python value: a literal (`16`, `-0.5`, `"same"`, `None`), a lambda, def
        or class, a TensorFlow / Keras function (`tf.nn.relu`, `keras.activations.gelu`),
        `int(...)`/`len(...)`-style builtins, a name bound only to those, a parameter annotated
        with a Python type or an `__init__` parameter defaulting to one (a layer's config, as
        `self.bits = bits`), and `self.x` bound only to those. None when it may be a tensor."""
        if expr is None or depth > 6:
            return None
        kinds = set()
        for value in self.resolve(expr, scope):
            kind = self._python_kind(value, scope, depth)
            if kind is None:
                return None
            kinds.add(kind)
        if not kinds:
            return None
        return kinds.pop() if len(kinds) == 1 else "Python value"

    def _python_kind(self, value: Binding, scope: Scope, depth: int) -> str | None:
        if isinstance(value, (cst.Integer, cst.Float, cst.Imaginary)):
            return "number"
        if isinstance(value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return "string"
        if isinstance(value, cst.Name):
            return {"None": "None", "True": "bool", "False": "bool"}.get(value.value)
        if isinstance(value, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
            return "callable"
        if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, (cst.Minus, cst.Plus)):
            return "number" if self._python_kind(value.expression, scope, depth + 1) == "number" else None
        if isinstance(value, cst.BinaryOperation):
            left = self.python_value(value.left, scope, depth + 1)
            right = self.python_value(value.right, scope, depth + 1)
            return "number" if left == right == "number" else None
        if isinstance(value, Param):
            return self._python_param(value)
        if isinstance(value, cst.Call):
            func = value.func
            if isinstance(func, cst.Name) and func.value in _PYTHON_BUILTINS and scope.lookup(func.value) is None \
                    and func.value not in self.imports:
                return _PYTHON_BUILTINS[func.value]
            return None
        if isinstance(value, cst.Attribute):
            if _is_self(value.value):
                return self._python_attribute(value, scope, depth)
            qualname = self.qualname(value)
            if qualname is not None and _is_function_name(qualname):
                return "callable"
        return None

    def _python_param(self, param: Param) -> str | None:
        annotation = param.node.annotation
        if annotation is not None:
            names = self.reads_in(annotation.annotation)
            kinds = {_ANNOTATION_KINDS.get(n.value) for n in names}
            if names and None not in kinds:
                return kinds.pop() if len(kinds) == 1 else "Python value"
            return None
        # A layer's configuration: `def __init__(self, bits=8)`, stored as `self.bits = bits`.
        owners = self._bound_names.get(id(param), [])
        fn = owners[0][0].node if owners else None
        if isinstance(fn, cst.FunctionDef) and fn.name.value == "__init__" and param.node.default is not None:
            kind = self._python_kind(param.node.default, owners[0][0], 6)
            return kind if kind in ("number", "string", "bool") else None
        return None

    def _python_attribute(self, attr: cst.Attribute, scope: Scope, depth: int) -> str | None:
        """`self.x` where every `self.x = value` of the class binds a plain Python value."""
        cls = scope.enclosing_class()
        values = cls.attributes.get(attr.attr.value, []) if cls is not None else []
        if cls is None or not values:
            return None
        kinds = set()
        for value in values:
            where = self._scope_reading(value, cls) if isinstance(value, cst.Name) else cls
            kind = self.python_value(value, where, depth + 1) if where is not None else None
            if kind is None:
                return None
            kinds.add(kind)
        return kinds.pop() if len(kinds) == 1 else "Python value"

    @staticmethod
    def _scope_reading(name: cst.Name, cls: Scope) -> Scope | None:
        """The method scope of `cls` in which `name` (a node) is read."""
        for scope in cls.walk():
            if any(n is name for n in scope.reads):
                return scope
        return None

    def site_for_function(self, node: cst.CSTNode) -> GradientSite | None:
        return self._site_by_forward.get(id(node))

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


# Calls that read no variables, for `may_read_unseen_variables`.
_PURE_BUILTINS = frozenset({"len", "range", "int", "float", "bool", "str", "tuple", "list", "dict", "zip", "enumerate",
                            "isinstance", "min", "max", "abs", "sum", "print", "super", "getattr", "hasattr"})
_PURE_CALLS = frozenset({"numpy.sqrt", "numpy.pi", "math.sqrt", "math.log", "math.pi"})
# Functions that take a list of tensors: a parameter handed to one is a structure.
_LIST_TAKERS = frozenset({"len", "zip", "enumerate", "list", "tuple", "sum", "map", "sorted", "reversed",
                          "add_n", "stack", "concat", "meshgrid", "dynamic_stitch", "accumulate_n", "parallel_stack",
                          "flatten", "map_structure", "pack_sequence_as", "unstack_sequence"})


class _StructureUse(Walker):
    """Names (of a site's inputs) that its forward or grad fns take apart as a structure."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.found: set[str] = set()

    @classmethod
    def of(cls, model: ModuleModel, site: GradientSite) -> set[str]:
        cache = model.__dict__.setdefault("_structure_use", {})
        if id(site) not in cache:
            visitor = cls(set(site.inputs))
            visitor.walk(site.forward.body)
            cache[id(site)] = visitor.found
        return cache[id(site)]

    def _mark(self, expr: cst.CSTNode | None) -> None:
        if isinstance(expr, cst.Name) and expr.value in self.names:
            self.found.add(expr.value)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        # `xs[0]` picks an entry; `x[:, 0]` or `x[..., 1]` slices a tensor.
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            index = node.slice[0].slice.value
            if isinstance(index, cst.UnaryOperation):
                index = index.expression
            if isinstance(index, cst.Integer):
                self._mark(node.value)

    def visit_For(self, node: cst.For) -> None:
        self._mark(node.iter)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._mark(node.iter)

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(isinstance(t.target, (cst.Tuple, cst.List)) for t in node.targets):
            self._mark(node.value)

    def visit_StarredElement(self, node: cst.StarredElement) -> None:
        self._mark(node.value)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.star:
            self._mark(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        last = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
        if last in _LIST_TAKERS:
            for arg in node.args:
                self._mark(arg.value)


# Builtins whose result is a plain Python value, for `python_value`.
_PYTHON_BUILTINS = {"int": "number", "float": "number", "round": "number", "len": "number", "abs": None,
                    "str": "string", "bool": "bool", "repr": "string"}
_PYTHON_BUILTINS = {k: v for k, v in _PYTHON_BUILTINS.items() if v is not None}
# Annotations naming a plain Python type (`bits: int`, `activation: Callable`).
_ANNOTATION_KINDS = {"int": "number", "float": "number", "complex": "number", "bool": "bool", "str": "string",
                     "Callable": "callable", "typing": "Python value", "collections": "Python value",
                     "abc": "Python value"}
# TensorFlow names that are not functions: dtypes and constants (`tf.float32`, `tf.newaxis`).
_TF_NON_FUNCTIONS = frozenset({"float16", "float32", "float64", "bfloat16", "half", "double", "int8", "int16",
                               "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool", "string",
                               "complex64", "complex128", "qint8", "quint8", "qint32", "variant", "resource",
                               "newaxis", "pi", "e", "inf", "nan"})


def _is_function_name(qualname: str) -> bool:
    """`tensorflow.nn.relu`, `keras.activations.gelu`: a TensorFlow or Keras function."""
    for prefix in ("keras.activations.", "tensorflow.keras.activations.", "keras.ops."):
        if qualname.startswith(prefix):
            rest = qualname[len(prefix):]
            return bool(rest) and "." not in rest and rest[0].islower()
    op = tf_op_name(qualname)
    return op is not None and op[:1].islower() and op not in _TF_NON_FUNCTIONS


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


def _literal_entry(containers: list[Binding], subscript: cst.Subscript) -> cst.BaseExpression | None:
    """`ws[0]` / `params["w"]` where `ws`/`params` is bound once to a literal: that entry."""
    if len(containers) != 1 or len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index):
        return None
    container, key = containers[0], subscript.slice[0].slice.value
    if isinstance(container, (cst.List, cst.Tuple)) and isinstance(key, cst.Integer) and not _has_star(container):
        i = int(key.value, 0)
        return container.elements[i].value if -len(container.elements) <= i < len(container.elements) else None
    if isinstance(container, cst.Dict) and isinstance(key, cst.SimpleString):
        for el in container.elements:
            if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString) and el.key.evaluated_value == key.evaluated_value:
                return el.value
    return None


def _entry_keys(value: Binding) -> list[str] | None:
    """How a literal container's entries are written as subscripts: `0`, `1` / `"w"`."""
    if isinstance(value, (cst.List, cst.Tuple)) and not _has_star(value):
        return [str(i) for i in range(len(value.elements))]
    if isinstance(value, cst.Dict) and all(isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString)
                                           for el in value.elements):
        return [el.key.value for el in value.elements]  # type: ignore[union-attr]
    return None


def _unpacked_entry(containers: list[Binding], index: int) -> cst.BaseExpression | None:
    if len(containers) == 1 and isinstance(containers[0], (cst.List, cst.Tuple)) and not _has_star(containers[0]):
        elements = containers[0].elements
        return elements[index].value if index < len(elements) else None
    return None


def _trainable(call: cst.Call) -> bool:
    value = argument(call, keyword="trainable")
    return not (isinstance(value, cst.Name) and value.value == "False")


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


class _Collector(Walker):
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
            if _has_star(target):
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
        elif isinstance(target, cst.Attribute) and _is_self(target.value) and value is not None:
            cls = self.scope.enclosing_class()
            if cls is not None:
                cls.attributes.setdefault(target.attr.value, []).append(value)
            self.walk(target.value)
        else:
            self.walk(target)

    def visit_Assign(self, node: cst.Assign) -> bool:
        if isinstance(node.value, cst.Call) and any(isinstance(t.target, (cst.Tuple, cst.List)) for t in node.targets):
            self.forwarded.add(id(node.value))
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
        if _is_self(node.value):
            self.scope.attribute_reads.append(node)
        elif isinstance(node.value, cst.Attribute) and _is_self(node.value.value):
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


class _ReadsIn(Walker):
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
