"""CG005 output-derivative."""

from __future__ import annotations

from typing import Iterator, NamedTuple

import libcst as cst

from cglint.diagnostics import Finding, Fix
from cglint.model import GradientSite, ModuleModel, Param, Scope, argument, tf_op_name
from cglint.samples import derivative_at_output, output_read_for_input
from cglint.rules._fixes import fresh_name, insert_before, parenthesized, single_binding, sole_statement_line
from cglint.rules.base import Invalid, Rule

# For each elementwise op: the functions whose appearance *applied to the op's output* means
# the derivative was evaluated at the wrong point. "div" stands for `... / <output>`.
# Output-based formulas that are right use none of these: sigmoid -> y * (1 - y),
# tanh -> 1 - y**2, tan -> 1 + y**2, exp -> y, sqrt -> 0.5 / y, softplus -> 1 - exp(-y).
DERIVATIVE_FUNCTIONS: dict[str, frozenset[str]] = {
    "tan": frozenset({"cos", "tan"}),
    "sin": frozenset({"cos", "sin"}),
    "cos": frozenset({"sin", "cos"}),
    "exp": frozenset({"exp"}),
    "expm1": frozenset({"exp", "expm1"}),
    "log": frozenset({"reciprocal", "div"}),
    "log1p": frozenset({"reciprocal", "div"}),
    "sigmoid": frozenset({"sigmoid", "exp"}),
    "tanh": frozenset({"tanh", "cosh"}),
    "softplus": frozenset({"sigmoid"}),
    "sqrt": frozenset({"sqrt", "rsqrt"}),
    "rsqrt": frozenset({"rsqrt", "sqrt"}),
    "reciprocal": frozenset({"reciprocal", "div"}),
    "erf": frozenset({"exp"}),
    "erfc": frozenset({"exp"}),
    "sinh": frozenset({"cosh", "sinh"}),
    "cosh": frozenset({"sinh", "cosh"}),
    "atan": frozenset({"reciprocal", "div"}),
    "asin": frozenset({"sqrt", "rsqrt"}),
    "acos": frozenset({"sqrt", "rsqrt"}),
}
_ALL_DERIVATIVES = frozenset().union(*DERIVATIVE_FUNCTIONS.values())


class OutputDerivative(Rule):
    """
    ## What it does
    Flags a derivative evaluated at an op's *output* instead of its input (the
    pre-activation): `cos(y)` for `y = tan(z)`, `sigmoid(s)` for `s = sigmoid(z)`,
    `exp(y)` for `y = exp(z)`. Names are followed through assignments (the binding in effect
    where the derivative is read: `x = tf.tan(x)` makes `cos(x)` an output derivative, and a
    name overwritten before the grad fn reads it holds its last value), through a helper that
    returns the op, and into helpers that compute the derivative of their argument, a call or
    two deep. The ops are recognised under every spelling: `tf.math.*`, `tf.nn.*`,
    `tf.keras.activations.*`, `keras.activations.*`, `keras.ops.*`, imported modules and names.

    Formulas written in terms of the output that are right are not flagged:
    `y * (1 - y)` for sigmoid, `1 - y**2` for tanh, `1 + y**2` for tan, `y` for exp.

    Whatever the spelling, the maths is also evaluated where cglint can compute it (its own
    NumPy versions of TensorFlow / Keras ops on small sample arrays: several inputs, a layer's
    weights and module variables, matmuls, reductions, `tf.where`, broadcasting, the module's
    helpers with their locals, `if`s and loops, `tf.while_loop`; never your code): each
    returned gradient is compared with the forward's vector-Jacobian product (central
    differences, at samples of both signs, else positive ones), and a read of the output is
    flagged when the gradients as written differ from it at most sample points and reading the
    input (or the output's operand, `z` in `y = tf.tanh(z)`) there makes every gradient match.
    A forward that rounds or quantises (`tf.round`, `floor`, `ceil`, `sign`,
    `tf.quantization.fake_quant_*`) has a zero derivative almost everywhere, so there the
    comparison is with the straight-through estimator users mean: rounding read as the
    identity, a clip's mask kept, `sign` as `clip(x, -1, 1)`. Anything it cannot evaluate (an
    op it has no NumPy version of, a loop of more than 256 trips, a name bound under
    conditions) claims nothing.

    ## Why is this bad?
    d/dz tan(z) is 1/cos²(z); 1/cos²(tan(z)) is a different function. TensorFlow runs it
    without complaint and trains on the wrong gradient: on the seed's `tan(x @ w + b)` the
    gradient was off by 110% (relative), with no error or warning.
    """

    fix_safety = """
    The fix evaluates the derivative at the op's input. For `y = tf.tan(z)` it replaces `y`
    with `z` in the derivative (`cos(y)` -> `cos(z)`); when the input is an expression,
    `y = tf.tan(x @ w + b)`, it first names it in the forward: `z = x @ w + b` /
    `y = tf.tan(z)`. Both are safe: the forward computes the same values in the same order,
    and only the derivative changes, to the one the rule's message describes. They are offered
    when `y` and `z` are each bound once and mean the same thing where the derivative is.

    When `y` comes from a helper, `y = forward(x)` with `def forward(a): return tf.tan(a @ w
    + b)`, the fix adds `z = x @ w + b` (the helper's argument expression, with the helper's
    parameters replaced by the call's arguments) before the call and uses `z` in the
    derivative. The forward's value is unchanged, but the expression is computed twice and the
    rewrite assumes the helper is that single return, so it is unsafe. It is offered when the
    helper's body is one `return op(...)`, its parameters are plain, the call's arguments are
    names or constants, and every other name in the expression means the same thing at the
    call.

    A finding from the evaluated maths (several inputs, variables, arrays) offers to read the
    input, or the output's operand, where the grad fn reads the output. It is unsafe: that the
    gradients then match the forward's vector-Jacobian product is shown at a few sample points
    of cglint's choosing, not proven.
    """

    code = "CG005"
    name = "output-derivative"
    summary = "Derivative evaluated at the op's output instead of its input"

    INVALID = [
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def op(x):
    y = tf.math.tan(x)

    def grad(dy):
        return dy / tf.square(tf.math.cos(y))

    return y, grad
''',
            at="9:31",
            fixed='''
import tensorflow as tf

@tf.custom_gradient
def op(x):
    y = tf.math.tan(x)

    def grad(dy):
        return dy / tf.square(tf.math.cos(x))

    return y, grad
'''),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def gate(z):
    s = tf.sigmoid(z)

    def grad(ds):
        return ds * tf.sigmoid(s) * (1 - tf.sigmoid(s))

    return s, grad
''',
            at=(Invalid(
            '''9:21''',
            at=()), Invalid(
            '''9:42''',
            at=())),
            fixed='''
import tensorflow as tf

@tf.custom_gradient
def gate(z):
    s = tf.sigmoid(z)

    def grad(ds):
        return ds * tf.sigmoid(z) * (1 - tf.sigmoid(z))

    return s, grad
'''),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def op(x):
    def forward(a):
        return tf.tan(a)

    def dtan(at):
        return 1.0 / tf.square(tf.cos(at))

    y = forward(x)
    return y, lambda dy: dy * dtan(y)
''',
            at="13:31",
            fixed='''
import tensorflow as tf

@tf.custom_gradient
def op(x):
    def forward(a):
        return tf.tan(a)

    def dtan(at):
        return 1.0 / tf.square(tf.cos(at))

    y = forward(x)
    return y, lambda dy: dy * dtan(x)
'''),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def soft(x):
    y = tf.nn.softplus(x)
    return y, lambda dy: dy * tf.nn.sigmoid(y)
''',
            at="7:31",
            fixed='''
import tensorflow as tf

@tf.custom_gradient
def soft(x):
    y = tf.nn.softplus(x)
    return y, lambda dy: dy * tf.nn.sigmoid(x)
'''),
        Invalid(
            '''
import keras
import tensorflow as tf

@tf.custom_gradient
def gate(z):
    s = tf.keras.activations.sigmoid(z)

    def grad(dy):
        return dy * keras.activations.sigmoid(s) * (1 - keras.activations.sigmoid(s))

    return s, grad
''',
            at=("10:21", "10:57"),
            fixed='''
import keras
import tensorflow as tf

@tf.custom_gradient
def gate(z):
    s = tf.keras.activations.sigmoid(z)

    def grad(dy):
        return dy * keras.activations.sigmoid(z) * (1 - keras.activations.sigmoid(z))

    return s, grad
'''),
        Invalid(
            '''
import tensorflow as tf
from keras import ops

@tf.custom_gradient
def squash(z):
    t = ops.tanh(z)

    def grad(dy):
        return dy / tf.square(ops.cosh(t))

    return t, grad
''',
            at="10:31",
            fixed='''
import tensorflow as tf
from keras import ops

@tf.custom_gradient
def squash(z):
    t = ops.tanh(z)

    def grad(dy):
        return dy / tf.square(ops.cosh(z))

    return t, grad
'''),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def tan_op(x):
    x = tf.tan(x)

    def grad(dy):
        return dy / tf.square(tf.cos(x))

    return x, grad
''',
            at="9:31"),
        Invalid(
            '''
import tensorflow as tf

def sec2(a):
    return 1.0 / tf.square(tf.cos(a))

def dtan(a):
    return sec2(a)

@tf.custom_gradient
def tan_op(x):
    y = tf.tan(x)

    def grad(dy):
        return dy * dtan(y)

    return y, grad
''',
            at="15:21",
            fixed='''
import tensorflow as tf

def sec2(a):
    return 1.0 / tf.square(tf.cos(a))

def dtan(a):
    return sec2(a)

@tf.custom_gradient
def tan_op(x):
    y = tf.tan(x)

    def grad(dy):
        return dy * dtan(x)

    return y, grad
'''),
    
        # Judged by the maths, whatever the spelling: `2 * y` is d/dx x² taken at the output. In
        # TensorFlow 2.21 it gave 0.18 at x = 0.3 where autodiff gives 0.6.
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def square(x):
    y = x * x

    def grad(dy):
        return dy * 2 * y

    return y, grad
''',
            at="9:16"),
        # softsign's derivative 1 / (1 + |x|)² written at the output: 0.66 at x = 0.3 (autodiff 0.59).
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def softsign(x):
    y = x / (1 + tf.abs(x))

    def grad(dy):
        return dy / (1 + tf.abs(y)) ** 2

    return y, grad
''',
            at="9:16"),
        # Judged against the forward's vector-Jacobian product on sample arrays (a layer's
        # weights, matmuls, reductions): in TensorFlow 2.21 the kernel's gradient `y.T @ dz` was
        # off by 3.95 (autodiff's largest entry 2.04) with 4 input features, and failed with
        # "Incompatible shapes" with 3; `x.T @ dz`, the fix, matches autodiff with 3 and 4.
        Invalid(
            '''
import keras
import tensorflow as tf


class TanhDense(keras.layers.Layer):
    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], 4))
        self.bias = self.add_weight(shape=(4,), initializer="zeros")

    def call(self, inputs):
        @tf.custom_gradient
        def dense(x):
            y = tf.tanh(x @ self.kernel + self.bias)

            def grad(dy, variables=None):
                dz = dy * (1 - y * y)
                by_var = {self.kernel.value.ref(): tf.transpose(y) @ dz,
                          self.bias.value.ref(): tf.reduce_sum(dz, axis=0)}
                return dz @ tf.transpose(self.kernel), [by_var[v.ref()] for v in variables]

            return y, grad

        return dense(inputs)
''',
            at="18:65",
            fixed='''
import keras
import tensorflow as tf


class TanhDense(keras.layers.Layer):
    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], 4))
        self.bias = self.add_weight(shape=(4,), initializer="zeros")

    def call(self, inputs):
        @tf.custom_gradient
        def dense(x):
            y = tf.tanh(x @ self.kernel + self.bias)

            def grad(dy, variables=None):
                dz = dy * (1 - y * y)
                by_var = {self.kernel.value.ref(): tf.transpose(x) @ dz,
                          self.bias.value.ref(): tf.reduce_sum(dz, axis=0)}
                return dz @ tf.transpose(self.kernel), [by_var[v.ref()] for v in variables]

            return y, grad

        return dense(inputs)
'''),
        # Two inputs: the gate's gradient uses s(1 - s) written at the output `y = x * s`; in
        # TensorFlow 2.21 it was off by 0.48 where autodiff's largest entry is 0.30.
        Invalid(
            '''
import tensorflow as tf


@tf.custom_gradient
def gated(x, gate):
    s = tf.sigmoid(gate)
    y = x * s

    def grad(dy):
        return dy * s, dy * x * y * (1 - y)

    return y, grad
''',
            at="11:33",
            fixed='''
import tensorflow as tf


@tf.custom_gradient
def gated(x, gate):
    s = tf.sigmoid(gate)
    y = x * s

    def grad(dy):
        return dy * s, dy * x * s * (1 - s)

    return y, grad
'''),
        # A reduction with keepdims: exp of the sum where the derivative needs exp(x); off by 17.3
        # in TensorFlow 2.21 (autodiff's largest entry 17.9).
        Invalid(
            '''
import tensorflow as tf


@tf.custom_gradient
def weighted_sum_exp(x, w):
    y = tf.reduce_sum(w * tf.exp(x), axis=-1, keepdims=True)

    def grad(dy):
        return dy * w * tf.exp(y), dy * tf.exp(x)

    return y, grad
''',
            at="10:32",
            fixed='''
import tensorflow as tf


@tf.custom_gradient
def weighted_sum_exp(x, w):
    y = tf.reduce_sum(w * tf.exp(x), axis=-1, keepdims=True)

    def grad(dy):
        return dy * w * tf.exp(x), dy * tf.exp(x)

    return y, grad
'''),
        # A straight-through quantiser whose mask reads the quantised output: |y| <= 1 always,
        # so the gradient passes where the clip stopped it (TensorFlow 2.21: 1.0 for x = 1.1 and
        # -1.25, where reading `x` gives 0).
        Invalid(
            '''
import tensorflow as tf


@tf.custom_gradient
def quantize(x):
    y = tf.round(tf.clip_by_value(x, -1.0, 1.0) * 127.0) / 127.0

    def grad(dy):
        return dy * tf.cast(tf.abs(y) <= 1.0, dy.dtype)

    return y, grad
''',
            at="10:36",
            fixed='''
import tensorflow as tf


@tf.custom_gradient
def quantize(x):
    y = tf.round(tf.clip_by_value(x, -1.0, 1.0) * 127.0) / 127.0

    def grad(dy):
        return dy * tf.cast(tf.abs(x) <= 1.0, dy.dtype)

    return y, grad
'''),
        # A per-channel slope (C,) broadcast against a batch (N, C): its gradient, summed over
        # the batch axis, reads the output where it needs the input (TensorFlow 2.21: off by 1.7
        # from autodiff at x (4, 3)); judged at the shapes the forward broadcasts.
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def prelu(x, alpha):
    positive = x > 0.0
    y = tf.where(positive, x, alpha * x)

    def grad(dy):
        dx = tf.where(positive, dy, alpha * dy)
        dalpha = tf.reduce_sum(tf.where(positive, tf.zeros_like(x), y * dy), axis=0)
        return dx, dalpha

    return y, grad
''',
            at="11:69",
            fixed='''
import tensorflow as tf

@tf.custom_gradient
def prelu(x, alpha):
    positive = x > 0.0
    y = tf.where(positive, x, alpha * x)

    def grad(dy):
        dx = tf.where(positive, dy, alpha * dy)
        dalpha = tf.reduce_sum(tf.where(positive, tf.zeros_like(x), x * dy), axis=0)
        return dx, dalpha

    return y, grad
'''),
        # The output's shape where the input's is needed: right while `x` has the output's shape,
        # wrong where it broadcasts (TensorFlow 2.21: a (4, 3) gradient for `x` of shape (3,)
        # against `scale` of (4, 3)).
        Invalid(
            '''
import tensorflow as tf


def unbroadcast(g, like):
    _, axes = tf.raw_ops.BroadcastGradientArgs(s0=tf.shape(g), s1=tf.shape(like))
    return tf.reshape(tf.reduce_sum(g, axis=axes), tf.shape(like))


@tf.custom_gradient
def scaled_square(x, scale):
    y = scale * x * x

    def grad(dy):
        return unbroadcast(2.0 * dy * scale * x, y), unbroadcast(dy * x * x, scale)

    return y, grad
''',
            at="15:50",
            fixed='''
import tensorflow as tf


def unbroadcast(g, like):
    _, axes = tf.raw_ops.BroadcastGradientArgs(s0=tf.shape(g), s1=tf.shape(like))
    return tf.reshape(tf.reduce_sum(g, axis=axes), tf.shape(like))


@tf.custom_gradient
def scaled_square(x, scale):
    y = scale * x * x

    def grad(dy):
        return unbroadcast(2.0 * dy * scale * x, x), unbroadcast(dy * x * x, scale)

    return y, grad
'''),
    ]
    VALID = [
        # The straight-through sign of binarised networks: the gradient passes where |x| <= 1.
        '''
import tensorflow as tf


@tf.custom_gradient
def binarize(x):
    y = tf.sign(x)

    def grad(dy):
        return dy * tf.cast(tf.abs(x) <= 1.0, dy.dtype)

    return y, grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def square(x):
    y = x * x

    def grad(dy):
        return dy * 2 * x

    return y, grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def op(x):
    z = x * 2.0
    y = tf.math.tan(z)

    def grad(dy):
        return 2.0 * dy / tf.square(tf.math.cos(z))

    return y, grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def gate(z):
    s = tf.sigmoid(z)
    return s, lambda ds: ds * s * (1 - s)
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def ops(x):
    t = tf.tanh(x)
    u = tf.tan(x)
    e = tf.exp(x)
    return t + u + e, lambda dy: dy * ((1 - t**2) + (1 + u**2) + e)
''',
            '''
import tensorflow as tf
from tensorflow.keras import activations

@tf.custom_gradient
def gate(z):
    s = activations.sigmoid(z)

    def grad(dy):
        return dy * s * (1 - s)

    return s, grad
''',
            '''
import tensorflow as tf

@tf.custom_gradient
def swish(x):
    h = tf.sigmoid(x)
    y = h * x
    h = x  # the backward needs the pre-activation

    def grad(dy):
        s = tf.sigmoid(h)
        return dy * (s + x * s * (1 - s))

    return y, grad
''',
    
        # A masked gate reading its mask and the sigmoid it kept: matches autodiff.
        '''
import tensorflow as tf


@tf.custom_gradient
def masked_gate(x, gate, mask):
    s = tf.sigmoid(gate)
    y = tf.where(mask, x * s, 0.0)

    def grad(dy):
        dy = tf.where(mask, dy, 0.0)
        return dy * s, dy * x * s * (1 - s), None

    return y, grad
''',
        # The same slope's gradient from the output, right: y / alpha is x where x <= 0.
        '''
import tensorflow as tf

@tf.custom_gradient
def prelu(x, alpha):
    positive = x > 0.0
    y = tf.where(positive, x, alpha * x)

    def grad(dy):
        dx = tf.where(positive, dy, alpha * dy)
        dalpha = tf.reduce_sum(tf.where(positive, tf.zeros_like(x), y / alpha * dy), axis=0)
        return dx, dalpha

    return y, grad
''',
        '''
import tensorflow as tf


def unbroadcast(g, like):
    _, axes = tf.raw_ops.BroadcastGradientArgs(s0=tf.shape(g), s1=tf.shape(like))
    return tf.reshape(tf.reduce_sum(g, axis=axes), tf.shape(like))


@tf.custom_gradient
def scaled_square(x, scale):
    y = scale * x * x

    def grad(dy):
        return unbroadcast(2.0 * dy * scale * x, x), unbroadcast(dy * x * x, scale)

    return y, grad
''',
    ]

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        model = site.model
        found = False
        for scope in site.grad_fn_scopes():
            for call in scope.calls:
                for arg, derivative in _derivative_uses(model, call, scope):
                    hit = _output_of(model, arg, scope, derivative)
                    if hit:
                        found = True
                        yield Finding(call, _message(model, call, derivative, hit.op, hit.name.value),
                                      fix=_fix(model, scope, hit))
            for node in _divisions(scope):
                hit = _output_of(model, node.right, scope, "div")
                if hit:
                    found = True
                    yield Finding(node, _message(model, node, "div", hit.op, hit.name.value),
                                  fix=_fix(model, scope, hit))
        if not found:
            # Whatever the spelling: the grad fn's values are the forward's derivative taken at
            # its output, at every sample point where the maths can be evaluated.
            wrong = derivative_at_output(model, site)
            if wrong is not None:
                out = site.outputs[0].value  # type: ignore[attr-defined]
                yield Finding(wrong, f"`{site.grad_fns[0].name}` returns the derivative of `{site.name}` evaluated at "
                                     f"its output `{out}` (f'(f(x)), by the values of both at sample points), not at "
                                     f"its input; the derivative needs the input `{site.inputs[0]}`")
                return
            # Several inputs, variables, arrays: every returned gradient against the forward's
            # vector-Jacobian product, as written and with the output read swapped.
            hit = output_read_for_input(model, site)
            if hit is not None:
                more = len(hit.reads) - 1
                also = f" (and {more} more read{'s' if more > 1 else ''} of it)" if more else ""
                against = (f"the straight-through derivative of `{site.name}` (its rounding, quantising or `sign` read "
                           f"as the identity inside their clip)" if hit.straight_through else f"`{site.name}`'s vector-Jacobian product")
                yield Finding(hit.reads[0], f"`{site.grad_fns[0].name}` reads the forward's output `{hit.output}` here{also} "
                                            f"where the derivative needs `{hit.instead}`: the gradient for `{hit.wrong}` "
                                            f"differs from {against} at sample points, and "
                                            f"reading `{hit.instead}` here makes every gradient match it",
                              fix=Fix([(r, cst.Name(hit.instead)) for r in hit.reads], safe=False,
                                      description=f"Read `{hit.instead}` where the derivative reads `{hit.output}`"))


def _message(model: ModuleModel, node: cst.CSTNode, derivative: str, op: str, name: str) -> str:
    what = f"`... / {name}`" if derivative == "div" else f"`{derivative}(...)` applied to `{name}`"
    return (
        f"{what} evaluates the derivative of `{op}` at its output `{name}`; the derivative needs "
        f"the op's input (the pre-activation), e.g. keep `z` and use it instead of `{name} = {op}(z)`"
    )


def _derivative_uses(model: ModuleModel, call: cst.Call, scope: Scope,
                     depth: int = 0) -> Iterator[tuple[cst.BaseExpression, str]]:
    """(argument, derivative function) pairs: `tf.cos(y)` gives (y, "cos"); a call to a helper
    `dtan(y)` whose body applies `cos` to its parameter gives (y, "cos") as well, followed
    through a helper calling another (`dtan(a)` -> `sec2(a)` -> `tf.cos(a)`)."""
    op = tf_op_name(model.qualname(call.func))
    first = argument(call, 0, "x")
    if op in _ALL_DERIVATIVES:
        if first is not None:
            yield first, op
        return
    helper = model.helper(call.func, scope) if op is None and depth < 2 else None
    if helper is None:
        return
    params = helper.params
    for inner in helper.scope.calls:
        for inner_arg, inner_op in _derivative_uses(helper.model, inner, helper.scope, depth + 1):
            for pname in _names_in(inner_arg):
                if pname in params:
                    passed = argument(call, params.index(pname), pname)
                    if passed is not None:
                        yield passed, inner_op


def _divisions(scope: Scope) -> Iterator[cst.BinaryOperation]:
    """Divisions in a grad fn's calls and returns (`1 / y`); found from the expressions the
    model recorded, not by walking the tree again."""
    seen: set[int] = set()
    roots: list[cst.CSTNode] = [a.value for c in scope.calls for a in c.args]
    roots += [r.value for r in scope.returns if r.value is not None]
    if isinstance(scope.node, cst.Lambda):
        roots.append(scope.node.body)
    for values in scope.bindings.values():
        roots += [v for v in values if isinstance(v, cst.BaseExpression)]
    for root in roots:
        for node in _arithmetic(root):
            if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide) and id(node) not in seen:
                seen.add(id(node))
                yield node


def _arithmetic(expr: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The expression and its arithmetic operands, not descending into calls."""
    yield expr
    if isinstance(expr, cst.BinaryOperation):
        yield from _arithmetic(expr.left)
        yield from _arithmetic(expr.right)
    elif isinstance(expr, cst.UnaryOperation):
        yield from _arithmetic(expr.expression)
    elif isinstance(expr, (cst.Tuple, cst.List)):
        for el in expr.elements:
            yield from _arithmetic(el.value)


def _names_in(expr: cst.BaseExpression) -> list[str]:
    return [n.value for n in _arithmetic(expr) if isinstance(n, cst.Name)]


class _Hit(NamedTuple):
    name: cst.Name  # the output's name where the derivative reads it
    op: str
    value: cst.Call  # what the name is bound to: the op call, or a call to a helper returning it


def _output_of(model: ModuleModel, expr: cst.BaseExpression, scope: Scope, derivative: str) -> _Hit | None:
    """If `expr` (or an arithmetic operand of it) is a name holding the output of an op whose
    derivative `derivative` belongs to, say which name, op and bound value."""
    for node in _arithmetic(expr):
        if not isinstance(node, cst.Name):
            continue
        for value in model.resolve(node, scope):
            op = _op_of(model, value, scope)
            if op is not None and derivative in DERIVATIVE_FUNCTIONS.get(op, ()):
                return _Hit(node, op, value)  # type: ignore[arg-type]
    return None


def _op_of(model: ModuleModel, value: object, scope: Scope, depth: int = 0) -> str | None:
    """The elementwise op a bound value is the output of: `tf.tan(z)` directly, or a call to a
    helper whose return is `tf.tan(...)` (or a call to another such helper)."""
    if isinstance(value, Param) or not isinstance(value, cst.Call):
        return None
    op = tf_op_name(model.qualname(value.func))
    if op is not None:
        return op if op in DERIVATIVE_FUNCTIONS else None
    helper = model.helper(value.func, scope) if depth < 2 else None
    for returned in helper.returned() if helper is not None else []:
        inner = _op_of(helper.model, returned, helper.scope, depth + 1)  # type: ignore[union-attr]
        if inner is not None:
            return inner
    return None


# ---- the fix -------------------------------------------------------------------------------


def _first_positional(call: cst.Call) -> cst.Arg | None:
    if call.args and call.args[0].keyword is None and not call.args[0].star:
        return call.args[0]
    return None


def _fix(model: ModuleModel, scope: Scope, hit: _Hit) -> Fix | None:
    """See `fix_safety`: use the op's input where the derivative reads its output."""
    bound = single_binding(scope, hit.name.value)
    if bound is None or bound[1] is not hit.value:
        return None
    owner = bound[0]
    if tf_op_name(model.qualname(hit.value.func)) is not None:
        return _fix_direct(model, scope, owner, hit)
    return _fix_helper(model, scope, owner, hit)


def _same_meaning(name: str, here: Scope, there: Scope) -> bool:
    """`name` read in `here` is the binding it has in `there`, bound once (or a builtin/global
    seen alike from both)."""
    a, b = here.lookup(name), there.lookup(name)
    if a is None or b is None:
        return a is None and b is None
    return a[0] is b[0] and len(a[1]) == 1


def _fix_direct(model: ModuleModel, scope: Scope, owner: Scope, hit: _Hit) -> Fix | None:
    arg = _first_positional(hit.value)
    if arg is None:
        return None
    if isinstance(arg.value, cst.Name):
        z = arg.value.value
        if not _same_meaning(z, scope, owner):
            return None
        return Fix([(hit.name, cst.Name(z))], safe=True,
                   description=f"Evaluate the derivative at `{z}`, the input of `{hit.op}`")
    assign = model.parent(hit.value)
    line = sole_statement_line(model, assign) if isinstance(assign, cst.Assign) else None
    if line is None or len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
        return None
    z = fresh_name(model, "z", f"{hit.name.value}_pre")
    new_assign = cst.Assign(targets=[cst.AssignTarget(cst.Name(z))], value=arg.value.with_changes(lpar=[], rpar=[])
                            if _balanced(arg.value) else arg.value)
    call = hit.value.with_changes(args=[arg.with_changes(value=cst.Name(z)), *hit.value.args[1:]])
    return Fix(
        [insert_before(line, new_assign, assign.with_changes(value=call)), (hit.name, cst.Name(z))],
        safe=True,
        description=f"Name the input of `{hit.op}` `{z}` and evaluate the derivative there",
    )


def _balanced(expr: cst.BaseExpression) -> bool:
    return bool(expr.lpar) and len(expr.lpar) == len(expr.rpar)


def _fix_helper(model: ModuleModel, scope: Scope, owner: Scope, hit: _Hit) -> Fix | None:
    """`y = forward(x)` with `def forward(a): return tf.tan(a @ w + b)`: add `z = x @ w + b`."""
    call = hit.value
    helpers = [h for h in model.resolve(call.func, owner) if isinstance(h, cst.FunctionDef)]
    if len(helpers) != 1 or helpers[0] not in model.scope_of:
        return None
    helper = helpers[0]
    hscope = model.scope_of[helper]
    params = helper.params
    if (hscope.nested or params.posonly_params or params.kwonly_params or params.star_arg is not cst.MaybeSentinel.DEFAULT
            or params.star_kwarg is not None or any(p.default is not None for p in params.params)):
        return None
    body = helper.body.body
    if len(body) != 1 or len(hscope.returns) != 1 or not isinstance(hscope.returns[0].value, cst.Call):
        return None
    inner = _first_positional(hscope.returns[0].value)
    args = list(call.args)
    if inner is None or len(args) != len(params.params) or any(a.keyword is not None or a.star for a in args):
        return None
    if not all(isinstance(a.value, (cst.Name, cst.Integer, cst.Float, cst.SimpleString)) for a in args):
        return None  # evaluating an argument twice must not repeat its effects
    names = [p.name.value for p in params.params]
    substitute = {n: parenthesized(a.value) for n, a in zip(names, args)}
    reads = {id(n): n.value for n in hscope.reads}
    for name in set(reads.values()) - set(names):
        a, b = hscope.lookup(name), owner.lookup(name)
        if (a is None) != (b is None) or (a is not None and a[0] is not b[0]):
            return None
    for arg in args:
        if isinstance(arg.value, cst.Name) and not _same_meaning(arg.value.value, owner, owner):
            return None
    expr = inner.value.visit(_Substitute(substitute, reads))
    assign = model.parent(call)
    line = sole_statement_line(model, assign) if isinstance(assign, cst.Assign) else None
    if line is None:
        return None
    if isinstance(expr, cst.Name):
        if not _same_meaning(expr.value, scope, owner):
            return None
        return Fix([(hit.name, cst.Name(expr.value))], safe=False,
                   description=f"Evaluate the derivative at `{expr.value}`, the input of `{hit.op}` in `{helper.name.value}`")
    z = fresh_name(model, "z", f"{hit.name.value}_pre")
    new_assign = cst.Assign(targets=[cst.AssignTarget(cst.Name(z))], value=expr)
    return Fix(
        [insert_before(line, new_assign), (hit.name, cst.Name(z))],
        safe=False,
        description=f"Compute the input of `{hit.op}` in `{helper.name.value}` as `{z}` and evaluate the derivative there",
    )


class _Substitute(cst.CSTTransformer):
    """Replaces the helper's parameter reads (by identity, from the model) with the call's
    arguments."""

    def __init__(self, by_name: dict[str, cst.BaseExpression], reads: dict[int, str]) -> None:
        self.by_name, self.reads = by_name, reads

    def on_leave(self, original, updated):  # type: ignore[override]
        if isinstance(original, cst.Name) and id(original) in self.reads and original.value in self.by_name:
            return self.by_name[original.value]
        return updated
