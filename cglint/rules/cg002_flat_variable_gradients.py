"""CG002 flat-variable-gradients."""

from typing import Iterator

import libcst as cst

from cglint.diagnostics import Finding
from cglint.model import LIST, NONE, TENSOR, TUPLE, GradFn, GradientSite, GradReturn, kind_of
from cglint.model.ops import MULTI_OUTPUT_OPS, tf_op_name
from cglint.rules._fixes import input_grads_code, keyed_variable_gradients
from cglint.rules.base import Invalid, Rule


class FlatVariableGradients(Rule):
    """
    ## What it does
    Flags a grad fn that returns variable gradients flat, `return dx, dw, db` (also written
    `tuple([dx, dw, db])`), or with the variable gradients not as a list, when the forward
    reads trainable variables (followed as CG004 follows them: aliases, containers, sublayers).

    ## Why is this bad?
    When the forward reads `tf.Variable`s that are not inputs, TensorFlow unpacks the grad
    fn's result as exactly two parts, `input_grads, variable_grads = result`, and requires
    `variable_grads` to be a list with one gradient per entry of `variables`. A flat
    `(dx, dw, db)` raises `ValueError: too many values to unpack (expected 2)`; a tensor or
    tuple in place of the list fails or, worse, is split along its first axis.
    """

    fix_safety = """
    The fix rewrites the return as `return dx, [{w.ref(): dw, b.ref(): db}[v.ref()] for v in
    variables]` (hoisting the table into a `grads_by_variable = {...}` statement when the
    gradients are expressions), which is right whatever order TensorFlow passes `variables`
    in. It is offered only when the split is unambiguous: the return holds one gradient per
    positional input followed by one per trainable variable (or a tuple/tensor with one per
    variable), and the grad fn has a `variables` parameter (or `**kwargs`; without either,
    CG004's fix comes first). Which gradient belongs to which variable is taken from the
    gradients' names when every one names a variable (`dw`/`dydw`/`w_grad` -> `w`), and
    otherwise from the order in which the forward first reads the variables. That is an
    assumption about your intent, so the fix is unsafe: check the mapping.
    """

    code = "CG002"
    name = "flat-variable-gradients"
    summary = "Variable gradients returned flat, or not as a list, where `(input_grads, [var_grads])` is required"

    INVALID = [
        Invalid(
            '''
import tensorflow as tf

w = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
b = tf.Variable([0.5, -0.5])

@tf.custom_gradient
def dense_tan(x):
    z = x @ w + b
    y = tf.tan(z)

    def grad(dy, variables=None):
        g = dy / tf.square(tf.cos(z))
        return g @ tf.transpose(w), tf.transpose(x) @ g, tf.reduce_sum(g, 0)

    return y, grad
''',
            at="14:9",
            fixed='''
import tensorflow as tf

w = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
b = tf.Variable([0.5, -0.5])

@tf.custom_gradient
def dense_tan(x):
    z = x @ w + b
    y = tf.tan(z)

    def grad(dy, variables=None):
        g = dy / tf.square(tf.cos(z))
        grads_by_variable = {w.ref(): tf.transpose(x) @ g, b.ref(): tf.reduce_sum(g, 0)}
        return g @ tf.transpose(w), [grads_by_variable[v.ref()] for v in variables]

    return y, grad
'''),
        Invalid(
            '''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scale(x):
    def grad(dy, variables=None):
        return dy * w, dy * x

    return x * w, grad
''',
            at="9:9",
            fixed='''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scale(x):
    def grad(dy, variables=None):
        return dy * w, [{w.ref(): dy * x}[v.ref()] for v in variables]

    return x * w, grad
'''),
        Invalid(
            '''
import tensorflow as tf

class Scale(tf.keras.layers.Layer):
    def build(self, shape):
        self.k = self.add_weight(shape=())

    @tf.custom_gradient
    def call(self, x):
        def grad(dy, variables=None):
            dk = tf.reduce_sum(dy * x)
            return dy * self.k, (dk,)

        return x * self.k, grad
''',
            at="12:13",
            fixed='''
import tensorflow as tf

class Scale(tf.keras.layers.Layer):
    def build(self, shape):
        self.k = self.add_weight(shape=())

    @tf.custom_gradient
    def call(self, x):
        def grad(dy, variables=None):
            dk = tf.reduce_sum(dy * x)
            return dy * self.k, [{self.k.value.ref(): dk}[v.ref()] for v in variables]

        return x * self.k, grad
'''),
        Invalid(
            '''
import tensorflow as tf

w = tf.Variable(2.0)
b = tf.Variable(1.0)

@tf.custom_gradient
def affine(x):
    def grad(dy, variables=None):
        dw = tf.reduce_sum(dy * x)
        db = tf.reduce_sum(dy)
        return tuple([dy * w, dw, db])

    return x * w + b, grad
''',
            at="12:9"),
    
        # accepts `variables` (through **kwargs) but returns only the input gradient
        Invalid(
            '''
import tensorflow as tf

level = tf.Variable(3.0, name="level")


@tf.custom_gradient
def soft_clip(x):
    y = level * tf.tanh(x / level)

    def grad(dy, **kwargs):
        return dy * (1.0 - tf.square(tf.tanh(x / level)))

    return y, grad
''',
            at="12:9"),
        # the variable gradients splatted after the input gradient (TF 2.21: too many values to unpack)
        Invalid(
            '''
import tensorflow as tf

w = tf.Variable(2.0, name="w")
b = tf.Variable(1.0, name="b")


@tf.custom_gradient
def affine(x):
    def grad(dy, variables=None):
        by_var = {w.ref(): tf.reduce_sum(dy * x), b.ref(): tf.reduce_sum(dy)}
        return (dy * w, *[by_var[v.ref()] for v in variables])

    return x * w + b, grad
''',
            at="12:9"),
        # keyed right, but a `tuple(...)` (TF 2.21: can only concatenate list (not "tuple") to list)
        Invalid(
            '''
import tensorflow as tf

mu = tf.Variable(tf.zeros([3]), name="mu")


@tf.custom_gradient
def center(x):
    def grad(dy, variables=None):
        table = {mu.ref(): -tf.reduce_sum(dy, axis=0)}
        return dy, tuple(table[v.ref()] for v in variables)

    return x - mu, grad
''',
            at="11:9"),
    ]
    VALID = [
        '''
import tensorflow as tf

w = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
b = tf.Variable([0.5, -0.5])

@tf.custom_gradient
def dense_tan(x):
    z = x @ w + b
    y = tf.tan(z)

    def grad(dy, variables=None):
        g = dy / tf.square(tf.cos(z))
        by_var = {w.ref(): tf.transpose(x) @ g, b.ref(): tf.reduce_sum(g, 0)}
        return g @ tf.transpose(w), [by_var[v.ref()] for v in variables]

    return y, grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def mul(x, y):
    def grad(dz):
        return dz * y, dz * x

    return x * y, grad
''',
        '''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scale(x):
    def grad(dy, variables=None):
        return dy * w, [dy * x for _ in variables]

    return x * w, grad
''',
    ]

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        if not site.trainable_variables:
            return
        names = ", ".join(v.name for v in site.trainable_variables)
        for grad in site.grad_fns:
            for ret in grad.returns:
                if ret.elements is None:
                    # (a grad fn that does not accept `variables` is CG004's finding)
                    if _splatted(site, grad, ret.value):
                        yield Finding(
                            ret.node,
                            f"`{grad.name}` splats the variable gradients into the returned tuple (`*[...]`), so "
                            f"it returns them flat, but the forward reads variables ({names}): TensorFlow unpacks "
                            "`input_grads, variable_grads` and raises 'too many values to unpack'; return "
                            "`(input_grads, [one per entry of variables])`",
                        )
                        continue
                    if grad.accepts_variables and _one_tensor(site, grad, ret.value):
                        yield Finding(
                            ret.node,
                            f"`{grad.name}` returns one gradient, but the forward reads variables ({names}): "
                            "TensorFlow unpacks `input_grads, variable_grads` from it and raises (eagerly 'too "
                            "many values to unpack' or 'Scalar tensor has no len()', by its shape; under "
                            "tf.function 'Iterating over a symbolic tf.Tensor'); "
                            "return `(input_grads, [one per entry of variables])`",
                        )
                    continue
                if len(ret.elements) != 2:
                    k = len(site.inputs)
                    yield Finding(
                        ret.node,
                        f"`{grad.name}` returns {len(ret.elements)} gradients flat, but the forward reads "
                        f"variables ({names}): TensorFlow unpacks `input_grads, variable_grads` and raises "
                        "'too many values to unpack'; return `(input_grads, [one per entry of variables])`",
                        fix=_fix(site, grad, ret, ret.elements[:k], ret.elements[k:]),
                    )
                    continue
                _, var_grads = ret.pair  # type: ignore[misc]
                kind = kind_of(site.model, var_grads, grad.scope)
                if kind in (TENSOR, TUPLE, NONE) and kind != LIST:
                    yield Finding(
                        ret.node,
                        f"`{grad.name}` returns the variable gradients as a {kind}, not a list: TensorFlow "
                        "needs a list with one gradient per entry of `variables`, in that order",
                        fix=_fix(site, grad, ret, None, _as_list(site, grad, var_grads, kind)),
                    )


def _splatted(site: GradientSite, grad: GradFn, expr) -> bool:
    """`(dx, *[g(v) for v in variables])`: a tuple that unpacks a comprehension over the grad
    fn's `variables` after the input gradients."""
    if not isinstance(expr, cst.Tuple) or len(expr.elements) < 2 or isinstance(expr.elements[0], cst.StarredElement):
        return False
    name = grad.variables_param
    for el in expr.elements[1:]:
        comp = el.value
        if isinstance(el, cst.StarredElement) and isinstance(comp, (cst.ListComp, cst.GeneratorExp)):
            it = comp.for_in.iter
            if any(n.value == name for n in site.model.reads_in(it)):
                return True
    return False


def _one_tensor(site: GradientSite, grad: GradFn, expr) -> bool:
    """The return is one tensor as the code writes it: arithmetic or a TensorFlow op's result
    that makes one tensor (not a call of a project function, which may return the pair)."""
    model = site.model
    if expr is None or kind_of(model, expr, grad.scope) != TENSOR:
        return False
    if isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation)):
        return True
    if isinstance(expr, cst.Call):
        op = tf_op_name(model.qualname(expr.func))
        return op is not None and op not in MULTI_OUTPUT_OPS and op not in ("py_function", "numpy_function",
                                                                            "identity_n", "nest")
    return False


def _as_list(site: GradientSite, grad: GradFn, expr, kind: str) -> list | None:
    """The variable gradients held by a tuple literal, or a single tensor for one variable."""
    if kind == TUPLE:
        return site.model.literal_elements(expr, grad.scope)
    if kind == TENSOR and len(site.trainable_variables) == 1:
        return [expr]
    return None


def _fix(site: GradientSite, grad: GradFn, ret: GradReturn, input_grads, var_grads):
    if var_grads is None or ret.elements is None:
        return None
    if input_grads is None and ret.pair is not None:
        code = site.model.module.code_for_node(ret.pair[0]).strip()
    else:
        code = input_grads_code(site, list(input_grads))
    if code is None:
        return None
    return keyed_variable_gradients(site, grad, ret, code, list(var_grads))
