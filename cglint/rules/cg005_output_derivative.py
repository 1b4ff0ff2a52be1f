"""CG005 output-derivative."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from cglint.diagnostics import Finding
from cglint.model import GradientSite, ModuleModel, Param, Scope, tf_op_name
from cglint.rules.base import Rule

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
    `exp(y)` for `y = exp(z)`. Names are followed through assignments, through a helper that
    returns the op, and into a helper that computes the derivative of its argument.

    Formulas written in terms of the output that are right are not flagged:
    `y * (1 - y)` for sigmoid, `1 - y**2` for tanh, `1 + y**2` for tan, `y` for exp.

    ## Why is this bad?
    d/dz tan(z) is 1/cos²(z); 1/cos²(tan(z)) is a different function. TensorFlow runs it
    without complaint and trains on the wrong gradient: on the seed's `tan(x @ w + b)` the
    gradient was off by 110% (relative), with no error or warning.
    """

    code = "CG005"
    name = "output-derivative"
    summary = "Derivative evaluated at the op's output instead of its input"

    INVALID = [
        '''
import tensorflow as tf

@tf.custom_gradient
def op(x):
    y = tf.math.tan(x)

    def grad(dy):
        return dy / tf.square(tf.math.cos(y))

    return y, grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def gate(z):
    s = tf.sigmoid(z)

    def grad(ds):
        return ds * tf.sigmoid(s) * (1 - tf.sigmoid(s))

    return s, grad
''',
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
        '''
import tensorflow as tf

@tf.custom_gradient
def soft(x):
    y = tf.nn.softplus(x)
    return y, lambda dy: dy * tf.nn.sigmoid(y)
''',
    ]
    VALID = [
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
    ]

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        model = site.model
        for scope in site.grad_fn_scopes():
            for call in scope.calls:
                for arg, derivative in _derivative_uses(model, call, scope):
                    hit = _output_of(model, arg, scope, derivative)
                    if hit:
                        name, op = hit
                        yield Finding(call, _message(model, call, derivative, op, name))
            for node in _divisions(scope):
                hit = _output_of(model, node.right, scope, "div")
                if hit:
                    name, op = hit
                    yield Finding(node, _message(model, node, "div", op, name))


def _message(model: ModuleModel, node: cst.CSTNode, derivative: str, op: str, name: str) -> str:
    what = f"`... / {name}`" if derivative == "div" else f"`{derivative}(...)` applied to `{name}`"
    return (
        f"{what} evaluates the derivative of `{op}` at its output `{name}`; the derivative needs "
        f"the op's input (the pre-activation), e.g. keep `z` and use it instead of `{name} = {op}(z)`"
    )


def _derivative_uses(model: ModuleModel, call: cst.Call, scope: Scope) -> Iterator[tuple[cst.BaseExpression, str]]:
    """(argument, derivative function) pairs: `tf.cos(y)` gives (y, "cos"); a call to a helper
    `dtan(y)` whose body applies `cos` to its parameter gives (y, "cos") as well."""
    op = tf_op_name(model.qualname(call.func))
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    if op in _ALL_DERIVATIVES:
        if positional:
            yield positional[0], op
        return
    if op is not None or not isinstance(call.func, cst.Name):
        return
    for helper in model.resolve(call.func, scope):
        if not isinstance(helper, cst.FunctionDef) or helper not in model.scope_of:
            continue
        hscope = model.scope_of[helper]
        params = [p.name.value for p in helper.params.params]
        for inner in hscope.calls:
            inner_op = tf_op_name(model.qualname(inner.func))
            inner_args = [a.value for a in inner.args if a.keyword is None and not a.star]
            if inner_op not in _ALL_DERIVATIVES or not inner_args:
                continue
            for pname in _names_in(inner_args[0]):
                if pname in params and params.index(pname) < len(positional):
                    yield positional[params.index(pname)], inner_op


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


def _output_of(model: ModuleModel, expr: cst.BaseExpression, scope: Scope, derivative: str) -> tuple[str, str] | None:
    """If `expr` (or an arithmetic operand of it) is a name holding the output of an op whose
    derivative `derivative` belongs to, return (name, op)."""
    for node in _arithmetic(expr):
        if not isinstance(node, cst.Name):
            continue
        for value in model.resolve(node, scope):
            op = _op_of(model, value, scope)
            if op is not None and derivative in DERIVATIVE_FUNCTIONS.get(op, ()):
                return node.value, op
    return None


def _op_of(model: ModuleModel, value: object, scope: Scope) -> str | None:
    """The elementwise op a bound value is the output of: `tf.tan(z)` directly, or a call to a
    helper whose return is `tf.tan(...)`."""
    if isinstance(value, Param) or not isinstance(value, cst.Call):
        return None
    op = tf_op_name(model.qualname(value.func))
    if op is not None:
        return op if op in DERIVATIVE_FUNCTIONS else None
    if isinstance(value.func, cst.Name):
        for helper in model.resolve(value.func, scope):
            if isinstance(helper, cst.FunctionDef) and helper in model.scope_of:
                hscope = model.scope_of[helper]
                for ret in hscope.returns:
                    if isinstance(ret.value, cst.Call):
                        inner = tf_op_name(model.qualname(ret.value.func))
                        if inner in DERIVATIVE_FUNCTIONS:
                            return inner
    return None
