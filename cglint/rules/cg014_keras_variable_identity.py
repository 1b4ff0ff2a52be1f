"""CG014 keras-variable-identity."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from cglint.diagnostics import Finding, Fix
from cglint.model import GradientSite, Scope
from cglint.rules.base import Invalid, Rule

# Comparisons that match one object against another: identity, or equality (which a dict
# lookup or `list.index` also uses).
_MATCHING = (cst.Is, cst.IsNot, cst.Equal, cst.NotEqual)


class KerasVariableIdentity(Rule):
    """
    ## What it does
    Flags a custom gradient that matches the entries of `variables` against a Keras 3 weight
    (`self.w = self.add_weight(...)`, `keras.Variable(...)`) by identity (`v is self.w`,
    `id(self.w)`), by `==`, as a dict key (`{self.w: dw}`), or through `self.w.ref()`; and one
    that matches their names against the weight's Keras name or path (`{self.w.name: dw}`
    looked up with `v.name`, `v.name == self.w.path`).

    ## Why is this bad?
    With Keras 3 (the `tf.keras` of TensorFlow 2.16 and later), `self.add_weight(...)` returns a
    `keras.Variable`, a wrapper around a backing `tf.Variable` (`self.w.value`). TensorFlow
    records the backing variable, so that is what the grad fn receives in `variables`. Matched
    against the wrapper, nothing ever matches: `v is self.w` and `id(v) == id(self.w)` are always
    false and the weight silently gets a zero (or no) gradient (TensorFlow 2.21 with Keras 3:
    gradient `[0, 0]` where autodiff gives `[4, 6]`), and `self.w.ref()` raises
    `AttributeError: 'Variable' object has no attribute 'ref'` at the first gradient; as a dict
    key it raises `TypeError: unhashable type: 'Variable'`; and `v == self.w` compares values
    elementwise (a tensor, true for any weight holding the same numbers). The Keras weight's
    `.name` is `'w'` and its `.path` `'layer/w'`, while the entry of `variables` is named
    `'layer/w:0'`: a table keyed on either raises `KeyError` when looked up by `v.name`. Match the
    backing variable instead: `self.w.value`, e.g. `{self.w.value.ref(): dw}[v.ref()]`, which
    is right both eagerly and under `tf.function`.

    Applies to `tf.custom_gradient` sites (on the TensorFlow backend, `keras.ops.custom_gradient`
    hands its grad fn the same `variables`).
    """

    fix_safety = """
    The fix inserts `.value` after the Keras weight (`v is self.w.value`,
    `self.w.value.ref()`), the backing `tf.Variable` that TensorFlow passes in `variables`. It
    is safe: the code as written can never match (or raises), so no working behaviour changes,
    and the match the author wrote now happens.
    """

    code = "CG014"
    name = "keras-variable-identity"
    summary = "`variables` entries matched against a Keras 3 weight (`is`, `==`, `.ref()`) instead of its `.value`"

    INVALID = [
        Invalid(
            '''
import tensorflow as tf

class Scale(tf.keras.layers.Layer):
    def build(self, input_shape):
        self.gain = self.add_weight(shape=(input_shape[-1],), initializer="ones")

    def call(self, x):
        @tf.custom_gradient
        def scale(x):
            def grad(dy, variables=None):
                dgain = tf.reduce_sum(dy * x, axis=0)
                return dy * self.gain, [dgain if v is self.gain else None for v in variables]

            return x * self.gain, grad

        return scale(x)
''',
            at="13:50",
            fixed='''
import tensorflow as tf

class Scale(tf.keras.layers.Layer):
    def build(self, input_shape):
        self.gain = self.add_weight(shape=(input_shape[-1],), initializer="ones")

    def call(self, x):
        @tf.custom_gradient
        def scale(x):
            def grad(dy, variables=None):
                dgain = tf.reduce_sum(dy * x, axis=0)
                return dy * self.gain, [dgain if v is self.gain.value else None for v in variables]

            return x * self.gain, grad

        return scale(x)
'''),
        Invalid(
            '''
import keras
import tensorflow as tf

class Affine(keras.layers.Layer):
    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], 2))
        self.bias = self.add_weight(shape=(2,), initializer="zeros")

    def call(self, x):
        @tf.custom_gradient
        def affine(x):
            def grad(dy, variables=None):
                by_var = {self.kernel.ref(): tf.transpose(x) @ dy, self.bias.ref(): tf.reduce_sum(dy, 0)}
                return dy @ tf.transpose(self.kernel), [by_var[v.ref()] for v in variables]

            return x @ self.kernel + self.bias, grad

        return affine(x)
''',
            at=(Invalid(
            '''14:27''',
            at=()), Invalid(
            '''14:68''',
            at=())),
            fixed='''
import keras
import tensorflow as tf

class Affine(keras.layers.Layer):
    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], 2))
        self.bias = self.add_weight(shape=(2,), initializer="zeros")

    def call(self, x):
        @tf.custom_gradient
        def affine(x):
            def grad(dy, variables=None):
                by_var = {self.kernel.value.ref(): tf.transpose(x) @ dy, self.bias.value.ref(): tf.reduce_sum(dy, 0)}
                return dy @ tf.transpose(self.kernel), [by_var[v.ref()] for v in variables]

            return x @ self.kernel + self.bias, grad

        return affine(x)
'''),
        Invalid(
            '''
import keras
import tensorflow as tf

class Gate(keras.layers.Layer):
    def __init__(self, units):
        super().__init__()
        self.alpha = keras.Variable(tf.ones((units,)), name="alpha")

    def call(self, x):
        alpha = self.alpha

        @tf.custom_gradient
        def gate(x):
            def grad(dy, variables=None):
                dalpha = tf.reduce_sum(dy * x, 0)
                return dy * alpha, [dalpha if id(v) == id(alpha) else tf.zeros_like(v) for v in variables]

            return x * alpha, grad

        return gate(x)
''',
            at="17:56",
            fixed='''
import keras
import tensorflow as tf

class Gate(keras.layers.Layer):
    def __init__(self, units):
        super().__init__()
        self.alpha = keras.Variable(tf.ones((units,)), name="alpha")

    def call(self, x):
        alpha = self.alpha

        @tf.custom_gradient
        def gate(x):
            def grad(dy, variables=None):
                dalpha = tf.reduce_sum(dy * x, 0)
                return dy * alpha, [dalpha if id(v) == id(alpha.value) else tf.zeros_like(v) for v in variables]

            return x * alpha, grad

        return gate(x)
'''),
        Invalid(
            '''
import keras
import tensorflow as tf

class Projection(keras.layers.Layer):
    def __init__(self, units):
        super().__init__()
        self.dense = keras.layers.Dense(units)

    def call(self, x):
        @tf.custom_gradient
        def project(x):
            def grad(dy, variables=None):
                dkernel = tf.transpose(x) @ dy
                return dy @ tf.transpose(self.dense.kernel), [
                    dkernel if v is self.dense.kernel else tf.reduce_sum(dy, 0) for v in variables
                ]

            return self.dense(x), grad

        return project(x)
''',
            at="16:32",
            fixed='''
import keras
import tensorflow as tf

class Projection(keras.layers.Layer):
    def __init__(self, units):
        super().__init__()
        self.dense = keras.layers.Dense(units)

    def call(self, x):
        @tf.custom_gradient
        def project(x):
            def grad(dy, variables=None):
                dkernel = tf.transpose(x) @ dy
                return dy @ tf.transpose(self.dense.kernel), [
                    dkernel if v is self.dense.kernel.value else tf.reduce_sum(dy, 0) for v in variables
                ]

            return self.dense(x), grad

        return project(x)
'''),
        Invalid(
            '''
import tensorflow as tf

class Scale(tf.keras.layers.Layer):
    def build(self, input_shape):
        self.gain = self.add_weight(shape=(input_shape[-1],), initializer="ones")

    def call(self, x):
        @tf.custom_gradient
        def scale(x):
            def grad(dy, variables=None):
                by_var = {self.gain: tf.reduce_sum(dy * x, axis=0)}
                return dy * self.gain, [by_var[v] for v in variables]

            return x * self.gain, grad

        return scale(x)
''',
            at="12:27"),
        Invalid(
            '''
import keras
import tensorflow as tf


class Affine(keras.layers.Layer):
    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1],), name="kernel")
        self.bias = self.add_weight(shape=(input_shape[-1],), name="bias")

    def call(self, x):
        @tf.custom_gradient
        def affine(x):
            def grad(dy, variables=None):
                by_path = {self.kernel.path: tf.reduce_sum(dy * x, 0), self.bias.path: tf.reduce_sum(dy, 0)}
                return dy * self.kernel, [by_path[v.name] for v in variables]

            return x * self.kernel + self.bias, grad

        return affine(x)
''',
            at=("15:28", "15:72"),
            fixed='''
import keras
import tensorflow as tf


class Affine(keras.layers.Layer):
    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1],), name="kernel")
        self.bias = self.add_weight(shape=(input_shape[-1],), name="bias")

    def call(self, x):
        @tf.custom_gradient
        def affine(x):
            def grad(dy, variables=None):
                by_path = {self.kernel.value.name: tf.reduce_sum(dy * x, 0), self.bias.value.name: tf.reduce_sum(dy, 0)}
                return dy * self.kernel, [by_path[v.name] for v in variables]

            return x * self.kernel + self.bias, grad

        return affine(x)
'''),
    ]
    VALID = [
        '''
import keras
import tensorflow as tf


class Affine(keras.layers.Layer):
    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1],), name="kernel")
        self.bias = self.add_weight(shape=(input_shape[-1],), name="bias")

    def call(self, x):
        @tf.custom_gradient
        def affine(x):
            def grad(dy, variables=None):
                by_path = {self.kernel.value.name: tf.reduce_sum(dy * x, 0), self.bias.value.name: tf.reduce_sum(dy, 0)}
                return dy * self.kernel, [by_path[v.name] for v in variables]

            return x * self.kernel + self.bias, grad

        return affine(x)
''',
        '''
import tensorflow as tf

class Scale(tf.keras.layers.Layer):
    def build(self, input_shape):
        self.gain = self.add_weight(shape=(input_shape[-1],), initializer="ones")

    def call(self, x):
        @tf.custom_gradient
        def scale(x):
            def grad(dy, variables=None):
                dgain = tf.reduce_sum(dy * x, axis=0)
                return dy * self.gain, [dgain if v is self.gain.value else None for v in variables]

            return x * self.gain, grad

        return scale(x)
''',
        '''
import tensorflow as tf

class Affine(tf.Module):
    def __init__(self):
        super().__init__()
        self.kernel = tf.Variable(tf.ones((3, 2)))
        self.bias = tf.Variable(tf.zeros((2,)))

    def __call__(self, x):
        @tf.custom_gradient
        def affine(x):
            def grad(dy, variables=None):
                by_var = {self.kernel.ref(): tf.transpose(x) @ dy, self.bias.ref(): tf.reduce_sum(dy, 0)}
                return dy @ tf.transpose(self.kernel), [by_var[v.ref()] for v in variables]

            return x @ self.kernel + self.bias, grad

        return affine(x)
''',
        '''
import keras
import tensorflow as tf

class Lazy(keras.layers.Layer):
    def build(self, input_shape):
        self.w = None
        self.w = self.add_weight(shape=(input_shape[-1],))

    def call(self, x):
        if self.w is None:
            raise ValueError("not built")

        @tf.custom_gradient
        def op(x):
            def grad(dy, variables=None):
                return dy * self.w, [tf.reduce_sum(dy * x, 0) for _ in variables]

            return x * self.w, grad

        return op(x)
''',
            '''
import tensorflow as tf

class Scale(tf.keras.layers.Layer):
    def build(self, input_shape):
        self.gain = self.add_weight(shape=(input_shape[-1],), initializer="ones")

    def call(self, x):
        gain = self.gain.value

        @tf.custom_gradient
        def scale(x):
            def grad(dy, variables=None):
                return dy * gain, [tf.reduce_sum(dy * x, 0) if v is gain else None for v in variables]

            return x * gain, grad

        return scale(x)
''',
    
    ]

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        grad_scopes = site.grad_fn_scopes()
        for scope in site.scopes():
            for call in scope.calls:
                weight = self._keras_weight_in_call(site, call, scope)
                if weight is not None:
                    yield self._finding(site, call, weight, scope)
            if scope not in grad_scopes:
                continue
            for comparison in scope.comparisons:
                for weight, target in _compared_weights(site, comparison, scope):
                    yield self._finding(site, comparison, weight, scope, target)
                operands = [comparison.left] + [t.comparator for t in comparison.comparisons]
                if len(operands) == 2 and any(_is_name_of(o) for o in operands):
                    yield from (f for o in operands if (f := _keras_name(site, o, scope)) is not None)
            for display in scope.dicts:
                for el in display.elements:
                    if (isinstance(el, cst.DictElement) and _is_name_of_attr(el.key)
                            and (found := _keras_name(site, el.key, scope)) is not None and _looks_up_by_name(site)):
                        yield found
                    weight = site.model.weight(el.key, scope) if isinstance(el, cst.DictElement) else None
                    if weight is not None and weight.keras:
                        name = site.model.module.code_for_node(el.key).strip()
                        yield Finding(
                            el.key,
                            f"`{name}` is a Keras 3 weight used as a dict key: it is unhashable (TypeError: unhashable "
                            f"type: 'Variable'), and `variables` holds `{name}.value` anyway; key on "
                            f"`{name}.value.ref()` and look entries up with `v.ref()`",
                        )

    @staticmethod
    def _keras_weight_in_call(site: GradientSite, call: cst.Call, scope: Scope) -> cst.BaseExpression | None:
        """`w.ref()` / `w.experimental_ref()` / `id(w)` on a Keras weight `w`: the weight."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("ref", "experimental_ref") and not call.args:
            target = func.value
        elif isinstance(func, cst.Name) and func.value == "id" and len(call.args) == 1 and scope.lookup("id") is None:
            target = call.args[0].value
        else:
            return None
        weight = site.model.weight(target, scope)
        return target if weight is not None and weight.keras else None

    def _finding(self, site: GradientSite, node: cst.CSTNode, weight: cst.BaseExpression, scope: Scope,
                 target: cst.ComparisonTarget | None = None) -> Finding:
        model = site.model
        name = model.module.code_for_node(weight).strip()
        backing = cst.Attribute(value=weight, attr=cst.Name("value"))
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            effect = f"raises AttributeError: a Keras 3 `Variable` has no `.{node.func.attr.value}()`"
        elif target is not None and isinstance(target.operator, (cst.Equal, cst.NotEqual)):
            # `==` on variables compares their values elementwise (a tensor, ambiguous in `if`,
            # and true for two weights that happen to hold the same numbers): match by identity.
            identity = cst.Is() if isinstance(target.operator, cst.Equal) else cst.IsNot()
            identity = identity.with_changes(whitespace_before=target.operator.whitespace_before,
                                             whitespace_after=target.operator.whitespace_after)
            new = node.with_changes(comparisons=[
                t.with_changes(operator=identity) if t is target else t for t in node.comparisons  # type: ignore[attr-defined]
            ])
            new = new.visit(_Replace(weight, backing))
            return Finding(
                node,
                f"`{name}` is a Keras 3 weight and `==` compares values elementwise (a tensor, true for any "
                f"weight holding the same numbers), never the variable: `variables` holds `{name}.value`; "
                f"match it by identity, `is {name}.value`",
                fix=Fix([(node, new)], False, f"Match the backing variable by identity, `is {name}.value`"),
            )
        else:
            effect = ("never matches (the gradient silently becomes zero or is dropped): `variables` holds "
                      f"`{name}.value`, the backing tf.Variable, not the Keras wrapper")
        return Finding(
            node,
            f"`{name}` is a Keras 3 weight and this {effect}; match `{name}.value` instead",
            fix=Fix([(weight, backing)], True, f"Match the backing variable `{name}.value`"),
        )


class _Replace(cst.CSTTransformer):
    def __init__(self, old: cst.CSTNode, new: cst.CSTNode) -> None:
        self.old, self.new = old, new

    def on_leave(self, original, updated):  # type: ignore[override]
        return self.new if original is self.old else updated


def _compared_weights(site: GradientSite, comparison: cst.Comparison,
                      scope: Scope) -> Iterator[tuple[cst.BaseExpression, cst.ComparisonTarget]]:
    """Keras weights matched in `a is b` / `a == b` against something other than a constant
    (`self.w is None` is a lazy-build check, not a match)."""
    operands = [comparison.left] + [target.comparator for target in comparison.comparisons]
    for i, target in enumerate(comparison.comparisons):
        if not isinstance(target.operator, _MATCHING):
            continue
        pair = (operands[i], operands[i + 1])
        if any(_constant(side) for side in pair):
            continue
        for side in pair:
            weight = site.model.weight(side, scope)
            if weight is not None and weight.keras:
                yield side, target


def _constant(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)) or (
        isinstance(expr, cst.Name) and expr.value in ("None", "True", "False"))


def _is_name_of(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Attribute) and expr.attr.value == "name"


def _is_name_of_attr(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Attribute) and expr.attr.value in ("name", "path")


def _looks_up_by_name(site: GradientSite) -> bool:
    """A grad fn that looks entries up by a name (`table[v.name]`, `table.get(v.name)`)."""
    return any(site.model.looks_up_by_attribute(g.node, "name") for g in site.grad_fns)


_KERAS_NAMES = {"name": "'w'", "path": "'layer/w'"}


def _keras_name(site: GradientSite, expr: cst.BaseExpression, scope: Scope) -> Finding | None:
    """`w.name` / `w.path` of a Keras 3 weight matched against the name of an entry of
    `variables`: the Keras name ('w') and path ('layer/w') never equal the backing
    tf.Variable's name ('layer/w:0'), which `w.value.name` is."""
    if not (isinstance(expr, cst.Attribute) and expr.attr.value in ("name", "path")):
        return None
    weight = site.model.weight(expr.value, scope)
    if weight is None or not weight.keras:
        return None
    name = site.model.module.code_for_node(expr.value).strip()
    right = cst.Attribute(value=cst.Attribute(value=expr.value, attr=cst.Name("value")), attr=cst.Name("name"))
    return Finding(
        expr,
        f"`{name}.{expr.attr.value}` is a Keras 3 weight's {expr.attr.value} "
        f"({_KERAS_NAMES[expr.attr.value]}), never the name of an entry of `variables`, "
        "the backing tf.Variable named 'layer/w:0' (TensorFlow 2.21: KeyError, or a gradient silently dropped); "
        f"use `{name}.value.name`",
        fix=Fix([(expr, right)], True, f"Match the backing variable's name `{name}.value.name`"),
    )
