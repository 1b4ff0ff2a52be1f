"""Variables and Keras: which calls make a variable (`tf.Variable`, `add_weight`, `keras.Variable`),
what an expression holds (names, `self.x`, containers, sublayers), and which variables a
forward reads without taking them as inputs."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import libcst as cst

from cglint.model.ops import PURE_BUILTINS, PURE_CALLS
from cglint.model.scopes import Binding, Scope, Unpacked, has_star, is_self, argument

if TYPE_CHECKING:
    from cglint.model.sites import GradientSite


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


class VariableQueries:
    """What the model knows of variables: which calls make them, what an expression holds, which a forward reads."""

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
        if depth == 0:
            # Asked again and again for the same expression (the evaluator, at every sample point
            # of every rule): the model does not change during a lint, so neither does the answer.
            memo = self.__dict__.setdefault("_weights_memo", {})
            key = (id(expr), id(scope))
            if key not in memo:
                memo[key] = (expr, scope, self._weights(expr, scope, 0))
            return list(memo[key][2])
        return self._weights(expr, scope, depth)

    def _weights(self, expr: cst.BaseExpression, scope: Scope, depth: int) -> list[Variable]:
        out: list[Variable] = []
        name: str | None = None
        for value in self.resolve(expr, scope):
            if isinstance(value, cst.Attribute) and is_self(value.value):
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
            if isinstance(value, cst.Attribute) and is_self(value.value):
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
            if is_self(value.value):
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
        if not (isinstance(source, cst.Attribute) and is_self(source.value) and source.attr.value in _OWN_WEIGHT_LISTS):
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
                    # A module-level variable of another project module (`from .state import w`).
                    for var in self._imported_weights(name.value):
                        found.setdefault(var.name, var)
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
            for call in scope.calls:  # what the project functions it calls read while it runs
                for var in self._read_by_callees(call, scope, site, 0):
                    found.setdefault(var.name, var)
        return list(found.values())

    def _read_by_callees(self, call: cst.Call, scope: Scope, site: GradientSite, depth: int) -> list[Variable]:
        """Variables read by the project functions `call` may run (`self._project(h)` reading
        `self.w`, `params.temperature()` reading a module variable of another module), and by
        those they call, two calls deep. Functions nested in the forward are walked already."""
        if depth > 1:
            return []
        out: list[Variable] = []
        for callee in self.callables(call.func, scope):
            if not isinstance(callee.node, cst.FunctionDef) or callee.scope.within(site.scope):
                continue
            model = callee.model
            for inner in callee.scope.walk():
                for name in inner.reads:
                    if inner.lookup(name.value) is None:
                        out += model._imported_weights(name.value)
                    else:
                        out += [v for v in model.weights(name, inner) if v.exact]
                for attr in inner.attribute_reads:
                    out += [v for v in model.weights(attr, inner) if v.exact]
                for c in inner.calls:
                    out += model._read_by_callees(c, inner, site, depth + 1)
        return out

    def _imported_weights(self, name: str) -> list[Variable]:
        """The variables an imported name holds, as its defining module says (named as here)."""
        out = []
        for owner, value in self.imported(name):
            held = owner.weights(value, owner.root) if isinstance(value, cst.Name) else owner._weights_of(value, owner.root, 0)
            out += [replace(v, name=name) for v in held if v.exact]
        return out

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
                if qualname is not None and (qualname.startswith("tensorflow.") or qualname in PURE_CALLS):
                    continue
                if isinstance(call.func, cst.Name):
                    if call.func.value in PURE_BUILTINS and scope.lookup(call.func.value) is None:
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
        return [hit for call, scope in self.calls_reaching(site) for hit in self.keras_weights_in_call(site, call, scope)]

    def keras_weights_in_call(self, site: GradientSite, call: cst.Call, scope: Scope) -> list[tuple[cst.Arg, Variable, str]]:
        """`keras_weights_passed` for one call of this module (`site` may be another module's)."""
        found: list[tuple[cst.Arg, Variable, str]] = []
        for i, arg in enumerate(call.args):
            if arg.keyword is not None or arg.star:
                break
            weight = self.weight(arg.value, scope)
            if weight is not None and weight.keras and weight.trainable:
                param = site.inputs[i] if i < len(site.inputs) else "*args"
                found.append((arg, weight, param))
        return found


def _literal_entry(containers: list[Binding], subscript: cst.Subscript) -> cst.BaseExpression | None:
    """`ws[0]` / `params["w"]` where `ws`/`params` is bound once to a literal: that entry."""
    if len(containers) != 1 or len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index):
        return None
    container, key = containers[0], subscript.slice[0].slice.value
    if isinstance(container, (cst.List, cst.Tuple)) and isinstance(key, cst.Integer) and not has_star(container):
        i = int(key.value, 0)
        return container.elements[i].value if -len(container.elements) <= i < len(container.elements) else None
    if isinstance(container, cst.Dict) and isinstance(key, cst.SimpleString):
        for el in container.elements:
            if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString) and el.key.evaluated_value == key.evaluated_value:
                return el.value
    return None


def _entry_keys(value: Binding) -> list[str] | None:
    """How a literal container's entries are written as subscripts: `0`, `1` / `"w"`."""
    if isinstance(value, (cst.List, cst.Tuple)) and not has_star(value):
        return [str(i) for i in range(len(value.elements))]
    if isinstance(value, cst.Dict) and all(isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString)
                                           for el in value.elements):
        return [el.key.value for el in value.elements]  # type: ignore[union-attr]
    return None


def _unpacked_entry(containers: list[Binding], index: int) -> cst.BaseExpression | None:
    if len(containers) == 1 and isinstance(containers[0], (cst.List, cst.Tuple)) and not has_star(containers[0]):
        elements = containers[0].elements
        return elements[index].value if index < len(elements) else None
    return None


def _trainable(call: cst.Call) -> bool:
    value = argument(call, keyword="trainable")
    return not (isinstance(value, cst.Name) and value.value == "False")
