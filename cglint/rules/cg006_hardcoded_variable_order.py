"""CG006 hardcoded-variable-order."""

from typing import Iterator

import libcst as cst

from cglint.diagnostics import Finding
from cglint.model import GradientSite
from cglint.samples import gradients_by_position
from cglint.rules._fixes import keyed_variable_gradients
from cglint.rules.base import Invalid, Rule


class HardcodedVariableOrder(Rule):
    """
    ## What it does
    Flags a grad fn that returns two or more variable gradients as a literal list or tuple,
    `return dx, [dw, db]` (or a name bound to one, `list((dw, db))`, or a comprehension that
    passes the entries through), without ever reading `variables`, or reading it only to pair
    the entries with it position by position (`[g for _, g in zip(variables, grads)]`, which
    keeps the fixed order of `grads`). Whatever the spelling (`dict(zip(refs, grads))`,
    `grads[i]` over `enumerate(variables)`), a grad fn that reads `variables` is also evaluated
    where its maths can be (the project's NumPy versions of the ops, at sample points) with
    `variables` in its order and reversed: gradients that stay at their positions, where they
    differ, are keyed by position. A
    single variable gradient, or a list of `None`s, is not flagged: there is no order to get
    wrong.

    ## Why is this bad?
    TensorFlow passes the variables the forward read as the keyword `variables` and pairs the
    returned list with it entry by entry. In eager mode it builds that list from a *set* of
    variable references, so its order depends on hashing and changes from process to process.
    A hard-coded `[dw, db]` is then silently applied to the wrong variables in some runs:
    with six variables, TensorFlow 2.21 gave `[1, 4, 5, 3, 2, 6]` for the true gradients
    `[1, 2, 3, 4, 5, 6]`, wrong in 4 of 4 fresh processes, with no error. Build the list from
    `variables` instead: key the gradients on the variable (`v.ref()`, `id(v)`, `v.name`) and
    look each entry up; zipping `variables` with a fixed list only pairs positions.
    """

    fix_safety = """
    When the forward's trainable variables are known (module-level or closure `tf.Variable`s,
    Keras weights on `self`), the fix rewrites the return as `return dx, [{w.ref(): dw,
    b.ref(): db}[v.ref()] for v in variables]` (hoisting the table into a
    `grads_by_variable = {...}` statement when the gradients are expressions), so each
    gradient follows its variable whatever order TensorFlow uses. Which gradient belongs to
    which variable is taken from the gradients' names when every one names a variable
    (`dw`/`d_kernel`/`kernel_grad` -> `kernel`), otherwise from the order in which the forward
    first reads the variables; when the count differs or names point two ways there is no
    fix. The mapping is an assumption about your intent, so the fix is unsafe: check it.
    """

    code = "CG006"
    name = "hardcoded-variable-order"
    summary = "Two or more variable gradients returned in a fixed order without consulting `variables`"

    INVALID = [
        Invalid(
            '''
import tensorflow as tf

w = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
b = tf.Variable([0.5, -0.5])

@tf.custom_gradient
def dense(x):
    def grad(dy, variables=None):
        return dy @ tf.transpose(w), [tf.transpose(x) @ dy, tf.reduce_sum(dy, 0)]

    return x @ w + b, grad
''',
            at="10:9",
            fixed='''
import tensorflow as tf

w = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
b = tf.Variable([0.5, -0.5])

@tf.custom_gradient
def dense(x):
    def grad(dy, variables=None):
        grads_by_variable = {w.ref(): tf.transpose(x) @ dy, b.ref(): tf.reduce_sum(dy, 0)}
        return dy @ tf.transpose(w), [grads_by_variable[v.ref()] for v in variables]

    return x @ w + b, grad
'''),
        Invalid(
            '''
import tensorflow as tf

class Affine(tf.keras.layers.Layer):
    def build(self, shape):
        self.scale = self.add_weight(shape=())
        self.shift = self.add_weight(shape=())

    @tf.custom_gradient
    def call(self, x):
        def grad(dy, **kwargs):
            var_grads = [tf.reduce_sum(dy * x), tf.reduce_sum(dy)]
            return dy * self.scale, var_grads

        return x * self.scale + self.shift, grad
''',
            at="13:13",
            fixed='''
import tensorflow as tf

class Affine(tf.keras.layers.Layer):
    def build(self, shape):
        self.scale = self.add_weight(shape=())
        self.shift = self.add_weight(shape=())

    @tf.custom_gradient
    def call(self, x):
        def grad(dy, **kwargs):
            var_grads = [tf.reduce_sum(dy * x), tf.reduce_sum(dy)]
            grads_by_variable = {self.scale.value.ref(): tf.reduce_sum(dy * x), self.shift.value.ref(): tf.reduce_sum(dy)}
            return dy * self.scale, [grads_by_variable[v.ref()] for v in kwargs["variables"]]

        return x * self.scale + self.shift, grad
'''),
        Invalid(
            '''
import tensorflow as tf

def make(w, b):
    @tf.custom_gradient
    def op(x):
        def grad(dy, variables):
            dw = tf.reduce_sum(dy * x)
            db = tf.reduce_sum(dy)
            return dy * w, (dw, db)

        return x * w + b, grad

    return op
''',
            at="10:13"),
        Invalid(
            '''
import tensorflow as tf

w = tf.Variable(2.0, name="w")
b = tf.Variable(1.0, name="b")

@tf.custom_gradient
def affine(x):
    def grad(dy, variables=None):
        dw = tf.reduce_sum(dy * x)
        db = tf.reduce_sum(dy)
        return dy * w, list((dw, db))

    return x * w + b, grad
''',
            at="12:9",
            fixed='''
import tensorflow as tf

w = tf.Variable(2.0, name="w")
b = tf.Variable(1.0, name="b")

@tf.custom_gradient
def affine(x):
    def grad(dy, variables=None):
        dw = tf.reduce_sum(dy * x)
        db = tf.reduce_sum(dy)
        return dy * w, [{w.ref(): dw, b.ref(): db}[v.ref()] for v in variables]

    return x * w + b, grad
'''),
        Invalid(
            '''
import tensorflow as tf

w = tf.Variable(2.0, name="w")
b = tf.Variable(1.0, name="bias")

@tf.custom_gradient
def affine(x):
    def grad(dy, variables=None):
        grads = (tf.reduce_sum(dy * x), tf.reduce_sum(dy))
        return dy * w, [g for _, g in zip(variables, grads)]

    return x * w + b, grad
''',
            at="11:9"),
        # Keyed by position whatever the spelling: each gradient paired with the entry of
        # `variables` at its index (TensorFlow 2.21, under tf.function where `variables` is
        # sorted by name: d/w and d/b came back swapped; eagerly, as the set's order falls).
        Invalid(
            '''
import tensorflow as tf

w = tf.Variable([1.0, 2.0, 3.0], name="w")
b = tf.Variable([0.5, -0.5, 0.25], name="b")


@tf.custom_gradient
def affine(x):
    y = x * w + b

    def grad(dy, variables=None):
        grads = dict(zip([v.ref() for v in variables], [tf.reduce_sum(dy * x, 0), tf.reduce_sum(dy, 0)]))
        return dy * w, [grads[v.ref()] for v in variables]

    return y, grad
''',
            at="14:9"),
        Invalid(
            '''
import tensorflow as tf

w = tf.Variable([1.0, 2.0, 3.0], name="w")
b = tf.Variable([0.5, -0.5, 0.25], name="b")


@tf.custom_gradient
def affine(x):
    y = x * w + b

    def grad(dy, variables=None):
        grads = [tf.reduce_sum(dy * x, 0), tf.reduce_sum(dy, 0)]
        return dy * w, [grads[i] for i, v in enumerate(variables)]

    return y, grad
''',
            at="14:9"),
    ]
    VALID = [
        '''
import tensorflow as tf

w = tf.Variable(2.0, name="w")
b = tf.Variable(1.0, name="bias")

@tf.custom_gradient
def affine(x):
    def grad(dy, variables=None):
        by_var = {v.ref(): g for v, g in zip((w, b), (tf.reduce_sum(dy * x), tf.reduce_sum(dy)))}
        return dy * w, [by_var[v.ref()] for v in variables]

    return x * w + b, grad
''',
        '''
import tensorflow as tf

w = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
b = tf.Variable([0.5, -0.5])

@tf.custom_gradient
def dense(x):
    def grad(dy, variables=None):
        by_var = {w.ref(): tf.transpose(x) @ dy, b.ref(): tf.reduce_sum(dy, 0)}
        return dy @ tf.transpose(w), [by_var[v.ref()] for v in variables]

    return x @ w + b, grad
''',
        '''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scale(x):
    def grad(dy, variables=None):
        return dy * w, [tf.reduce_sum(dy * x)]

    return x * w, grad
''',
        '''
import tensorflow as tf

w = tf.Variable(2.0)
b = tf.Variable(1.0)

@tf.custom_gradient
def affine(x):
    def grad(dy, variables=None):
        grads = {id(w): tf.reduce_sum(dy * x), id(b): tf.reduce_sum(dy)}
        return dy * w, [grads[id(v)] for v in variables]

    return x * w + b, grad
''',
        '''
import tensorflow as tf

w = tf.Variable(2.0)
b = tf.Variable(1.0)

@tf.custom_gradient
def affine(x):
    def grad(dy, variables=None):
        by_name = {w.name: tf.reduce_sum(dy * x), b.name: tf.reduce_sum(dy)}
        return dy * w, [by_name[v.name] for v in variables]

    return x * w + b, grad
''',
        '''
import tensorflow as tf

w = tf.Variable(2.0)
b = tf.Variable(1.0)

@tf.custom_gradient
def frozen_affine(x):
    def grad(dy, variables=None):
        return dy * w, [None, None]

    return x * w + b, grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def mul(x, y):
    def grad(dz):
        return [dz * y, dz * x]

    return x * y, grad
''',
            '''
import tensorflow as tf

class Affine(tf.Module):
    def __init__(self):
        super().__init__()
        self.params = {"w": tf.Variable(2.0), "b": tf.Variable(1.0)}

    def __call__(self, x):
        w, b = self.params["w"], self.params["b"]

        @tf.custom_gradient
        def affine(x):
            def grad(dy, variables=None):
                by_var = {w.ref(): tf.reduce_sum(dy * x), b.ref(): tf.reduce_sum(dy)}
                return dy * w, [by_var[v.ref()] for v in variables]

            return x * w + b, grad

        return affine(x)
''',
        # Keyed on each variable: follows `variables` in any order.
        '''
import tensorflow as tf

w = tf.Variable([1.0, 2.0, 3.0], name="w")
b = tf.Variable([0.5, -0.5, 0.25], name="b")


@tf.custom_gradient
def affine(x):
    y = x * w + b

    def grad(dy, variables=None):
        grads = dict(zip([w.ref(), b.ref()], [tf.reduce_sum(dy * x, 0), tf.reduce_sum(dy, 0)]))
        return dy * w, [grads[v.ref()] for v in variables]

    return y, grad
''',
    ]

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        for grad in site.grad_fns:
            # Only where the variables contract applies: known variables or a grad fn that
            # takes them. Without it, `(dx, [a, b])` is two input gradients.
            if grad.variables_param is None:
                continue
            reads = grad.reads(grad.variables_param)
            found = False
            for ret in grad.returns:
                if ret.pair is None:
                    continue
                input_grads, listed = ret.pair
                if reads:
                    # Reading `variables` only to zip with them keeps the fixed order.
                    var_grads = site.model.zipped_entries(listed, grad.scope, grad.variables_param)
                    how = f"only zips them with `{grad.variables_param}`, which pairs by position"
                else:
                    var_grads = site.model.literal_elements(listed, grad.scope)
                    how = f"never reads `{grad.variables_param}`"
                if var_grads is None or len(var_grads) < 2 or all(_is_none(g) for g in var_grads):
                    continue  # one entry, or all `None`: no order to get wrong
                found = True
                yield Finding(
                    ret.node,
                    f"`{grad.name}` returns {len(var_grads)} variable gradients in a fixed order but {how}: "
                    "TensorFlow pairs them with `variables`, whose order changes from process to process "
                    "(and is sorted by name under tf.function), so gradients get silently swapped; key each "
                    "gradient on its variable (e.g. `[grads[v.ref()] for v in variables]`)",
                    fix=None if reads else keyed_variable_gradients(
                        site, grad, ret, site.model.module.code_for_node(input_grads).strip(), var_grads),
                )
            if not found and reads and len(site.grad_fns) == 1:
                yield from _by_position(site, grad)


def _by_position(site: GradientSite, grad) -> Iterator[Finding]:
    """Whatever the spelling: evaluated with `variables` reversed, the gradients stay where they
    were (`dict(zip(refs, grads))` keys them by position)."""
    stay = gradients_by_position(site.model, site)
    if not stay:
        return
    returns = [r.node for r in grad.returns]
    names = ", ".join(f"`{n}`" for n in stay)
    yield Finding(
        returns[0] if len(returns) == 1 else grad.anchor,
        f"`{grad.name}` reads `{grad.variables_param}` but its gradients for {names} do not follow it: evaluated "
        f"with `{grad.variables_param}` reversed, each stays at its position, so each is keyed by where a "
        "variable is, not which it is; TensorFlow's order changes from process to process (and is sorted by "
        "name under tf.function); key each gradient on its own variable (`{w.ref(): dw, b.ref(): db}`)",
    )


def _is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"
