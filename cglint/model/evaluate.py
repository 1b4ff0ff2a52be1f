"""Evaluation: a forward's and its grad fn's elementwise maths, computed at sample points, so a
derivative can be judged by its values instead of by its spelling.

Only the project's own scalar versions of elementwise TensorFlow / Keras ops (Python's `math`,
so the answer never depends on what else is installed) and Python arithmetic are evaluated,
never the user's code. An expression holding anything else (a call
the table does not know, a name bound more than once, a matmul, a reduction) cannot be
evaluated: `Unknown`, and nothing is claimed about it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable

import libcst as cst

from cglint.model.ops import tf_op_name
from cglint.model.scopes import Param, Scope

if TYPE_CHECKING:
    from cglint.model.module import ModuleModel


class Unknown(Exception):
    """The expression holds something the evaluator does not compute."""


def _sigmoid(a: float) -> float:
    return 1.0 / (1.0 + math.exp(-a)) if a >= 0 else math.exp(a) / (1.0 + math.exp(a))


def _softplus(a: float) -> float:
    return max(a, 0.0) + math.log1p(math.exp(-abs(a)))


# Elementwise ops on one scalar, by TensorFlow's plain name (`tf_op_name`).
_OPS: dict[str, Callable] = {
    "exp": math.exp, "log": math.log, "log1p": math.log1p, "expm1": math.expm1, "sqrt": math.sqrt,
    "rsqrt": lambda a: 1.0 / math.sqrt(a), "square": lambda a: a * a, "reciprocal": lambda a: 1.0 / a,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "sinh": math.sinh, "cosh": math.cosh, "tanh": math.tanh,
    "asin": math.asin, "acos": math.acos, "atan": math.atan, "sigmoid": _sigmoid, "softplus": _softplus,
    "softsign": lambda a: a / (1.0 + abs(a)), "negative": lambda a: -a, "abs": abs,
    "identity": lambda a: a, "convert_to_tensor": lambda a: a, "stop_gradient": lambda a: a,
    "multiply": lambda a, b: a * b, "add": lambda a, b: a + b, "subtract": lambda a, b: a - b,
    "divide": lambda a, b: a / b, "truediv": lambda a, b: a / b, "pow": lambda a, b: a ** b,
    "maximum": max, "minimum": min, "where": lambda c, a, b: a if c else b,
}


_BINARY: dict[type, Callable] = {
    cst.Add: lambda a, b: a + b, cst.Subtract: lambda a, b: a - b, cst.Multiply: lambda a, b: a * b,
    cst.Divide: lambda a, b: a / b, cst.Power: lambda a, b: a ** b,
}
_COMPARE: dict[type, Callable] = {
    cst.LessThan: lambda a, b: a < b, cst.GreaterThan: lambda a, b: a > b,
    cst.LessThanEqual: lambda a, b: a <= b, cst.GreaterThanEqual: lambda a, b: a >= b,
}


class Evaluator:
    """Values of expressions of one module at one point, given values for some parameters
    (`env`: the Param bindings by node identity)."""

    def __init__(self, model: ModuleModel, env: dict[int, float], picks: dict | None = None) -> None:
        self.model, self.env = model, env
        self.picks: dict[tuple[int, str], int] = picks or {}
        self.choices: dict[tuple[int, str], int] = {}  # names bound more than once, met so far

    def value(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> float:
        if depth > 40:
            raise Unknown("too deep")
        if isinstance(expr, (cst.Integer, cst.Float)):
            return float(expr.evaluated_value)
        if isinstance(expr, cst.Name):
            return self._name(expr, scope, depth)
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
            inner = self.value(expr.expression, scope, depth + 1)
            return -inner if isinstance(expr.operator, cst.Minus) else inner
        if isinstance(expr, cst.BinaryOperation) and type(expr.operator) in _BINARY:
            return _BINARY[type(expr.operator)](self.value(expr.left, scope, depth + 1),
                                                self.value(expr.right, scope, depth + 1))
        if (isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1
                and type(expr.comparisons[0].operator) in _COMPARE):
            return _COMPARE[type(expr.comparisons[0].operator)](self.value(expr.left, scope, depth + 1),
                                                                 self.value(expr.comparisons[0].comparator, scope, depth + 1))
        if isinstance(expr, cst.Call):
            op = tf_op_name(self.model.qualname(expr.func))
            if op in ("cast",) and expr.args:
                return self.value(expr.args[0].value, scope, depth + 1)
            fn = _OPS.get(op) if op is not None else None
            if fn is None or any(a.keyword is not None or a.star for a in expr.args):
                raise Unknown(f"call {op}")
            return fn(*(self.value(a.value, scope, depth + 1) for a in expr.args))
        raise Unknown(type(expr).__name__)

    def _name(self, name: cst.Name, scope: Scope, depth: int):
        found = scope.lookup(name.value)
        if found is None:
            raise Unknown(name.value)
        owner = found[0]
        seq = self.model._read_seq.get(id(name))
        values = owner.visible(name.value, seq if owner is scope else None)
        if not 1 <= len(values) <= 4:
            raise Unknown(f"{name.value} bound {len(values)} times")
        if len(values) > 1:
            # Bound under conditions (`cutoff = -20` or `-9` by dtype): one binding per world
            # (`picks`); callers evaluate every world and use a value only where all agree.
            key = (id(owner), name.value)
            self.choices[key] = len(values)
            return self._bound(name, values[self.picks.get(key, 0)], owner, depth)
        return self._bound(name, values[0], owner, depth)

    def _bound(self, name: cst.Name, value, owner: Scope, depth: int) -> float:
        if isinstance(value, Param):
            if id(value) in self.env:
                return self.env[id(value)]
            raise Unknown(f"parameter {name.value}")
        if not isinstance(value, cst.BaseExpression):
            raise Unknown(name.value)
        return self.value(value, owner, depth + 1)


def derivative_at_output(model: ModuleModel, site) -> cst.BaseExpression | None:
    """For a one-input elementwise site whose grad fn reads the forward's output: the grad fn's
    returned expression when its values are the forward's derivative taken at the output,
    f'(f(x)), and not the derivative, f'(x), at sample points (None when the maths cannot be
    evaluated or says otherwise)."""
    if len(site.inputs) != 1 or site.has_varargs or site.variables or len(site.outputs) != 1 or len(site.grad_fns) != 1:
        return None
    grad = site.grad_fns[0]
    out = site.outputs[0]
    if not isinstance(out, cst.Name) or not grad.reads(out.value) or len(grad.upstream_params) != 1:
        return None
    returns = [r.value for r in grad.returns if r.value is not None]
    if len(returns) != 1 or isinstance(returns[0], (cst.Tuple, cst.List)):
        return None
    x_param = next((v for v in site.scope.bindings.get(site.inputs[0], []) if isinstance(v, Param)), None)
    dy_param = next((v for v in grad.scope.bindings.get(grad.upstream_params[0], []) if isinstance(v, Param)), None)
    if x_param is None or dy_param is None:
        return None

    def evaluate(expr: cst.BaseExpression, scope: Scope, env: dict[int, float]) -> float:
        """The value in every world of conditional bindings (at most 8), when all agree."""
        first = Evaluator(model, env)
        value = float(first.value(expr, scope))
        worlds = [{}]
        for key, n in first.choices.items():
            worlds = [{**w, key: i} for w in worlds for i in range(n)]
        if len(worlds) > 8:
            raise Unknown("too many conditional bindings")
        for picks in worlds[1:]:
            other = float(Evaluator(model, env, picks).value(expr, scope))
            if abs(other - value) > 1e-9 * max(1.0, abs(value)):
                raise Unknown("the value depends on which binding holds")
        return value

    def forward(at: float) -> float:
        return evaluate(out, site.scope, {id(x_param): at})

    agree_at_output = differ_from_true = points = 0
    for i in range(24):
        x = (0.2 + 1.1 * ((i * 0.61803398875) % 1.0)) * (1 if i % 2 else -1)  # spread over ±[0.2, 1.3]
        try:
            g = evaluate(returns[0], grad.scope, {id(x_param): x, id(dy_param): 1.0})
            y = forward(x)
            h, hy = 1e-6 * (1.0 + abs(x)), 1e-6 * (1.0 + abs(y))
            true = (forward(x + h) - forward(x - h)) / (2 * h)
            at_output = (forward(y + hy) - forward(y - hy)) / (2 * hy)
        except Unknown:
            return None
        except (ArithmeticError, ValueError, TypeError):
            continue  # outside the maths' domain at this point (log of a negative, ...)
        if not all(math.isfinite(v) for v in (g, true, at_output)):
            continue
        points += 1
        agree_at_output += abs(g - at_output) <= 1e-4 * max(1.0, abs(at_output))
        differ_from_true += abs(g - true) > 1e-3 * max(1.0, abs(true))
    if points >= 8 and agree_at_output == points and differ_from_true >= 0.75 * points:
        return returns[0]
    return None
