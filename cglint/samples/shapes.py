"""A grad fn judged by the shapes of the gradients it returns, at the sample shapes the forward
takes (`cglint.samples.vjp`'s samples); anything Unknown claims nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from cglint.samples.evaluate import Evaluator
from cglint.samples.interpret import unwrap
from cglint.model.scopes import Param
from cglint.samples.vjp import MATHS_ERRORS, Unknown, Check, Skip

if TYPE_CHECKING:
    from cglint.model.module import ModuleModel
    from cglint.model.sites import GradientSite

# Calls whose result has their first argument's shape (`tf.convert_to_tensor(beta)`).
_SAME_SHAPE = frozenset({"convert_to_tensor", "cast", "constant", "identity", "float32", "float64", "float",
                         "convert_to_tensor_v2", "convert_to_tensor_v2_with_dispatch", "asarray", "array"})


@dataclass
class ShapeMismatch:
    """A returned gradient of another shape than its input's (or variable's), with the sample
    shapes the forward evaluated at."""

    slot: int
    name: str
    got: tuple
    want: tuple
    shapes: dict[str, tuple]


def gradient_shape_mismatch(model: ModuleModel, site: GradientSite) -> ShapeMismatch | None:
    """A gradient reduced to another shape than its input's (over every axis, or the wrong ones)
    at every shape the forward accepts that is tried: each input at a full sample shape; each
    (of several) at the shape that broadcasts against the others (a per-channel `alpha` of shape
    (C,) against `x` of (N, C)); and, where a call of the module passes it a scalar (`beta=1.0`
    in swish), as a scalar, where a gradient summed over every axis is right. The output's
    shape is the same at each. Nothing where the grad fn or the forward does not evaluate."""
    try:
        check = Check(model, site, reads_output=False)
    except (Unknown, Skip):
        return None
    if check.dy is None or check.free:
        return None
    import numpy as np

    check.np, check.extra = np, {}
    check.lay_out()
    if any(k is not None for k in check.layout):
        return None
    scalars = [i for i in range(len(site.inputs)) if _passed_a_scalar(model, site, i)]
    with np.errstate(all="ignore"):
        for check.positive in (False, True):
            check.rng = np.random.default_rng(0)
            try:
                return _mismatch(check, scalars)
            except (Unknown, Skip, *MATHS_ERRORS):
                continue
    return None


def _mismatch(check: Check, scalars: list[int]) -> ShapeMismatch | None:
    np = check.np
    check.var_shapes = [check.var_shape(v) for v in check.site.variables]
    n = check.input_slots
    full = (4, 3)  # not square: a reduction over the wrong axis changes the shape
    try:
        check.forward([check.sample(full) for _ in range(n)] + [check.sample(s) for s in check.var_shapes], {})
    except MATHS_ERRORS:
        full = check.x_shape()
    configs = [[full[1:] if j == i else full for j in range(n)] for i in range(n)] if n > 1 and full else []
    configs += [[() if j == i else full for j in range(n)] for i in scalars] if n > 1 and full else []
    base_y, runs, found = None, 0, {}
    for shapes in [[full] * n, *configs]:
        flat = [check.sample(s) for s in shapes] + [check.sample(s) for s in check.var_shapes]
        try:
            y = check.forward(flat, {}, record=True)
        except MATHS_ERRORS:
            continue  # the forward takes no input of this shape
        base_y = y.shape if base_y is None else base_y
        if y.shape != base_y:
            continue  # the input does not broadcast into the output here
        runs += 1
        grads = check.grads(flat, check.sample(y.shape), {})
        named = dict(zip(check.slots, (tuple(np.shape(a)) for a in flat)))
        for slot, g in enumerate(grads):
            # Reduced (fewer elements than the output) to another shape than the input's. A
            # gradient left at the output's shape is code written for inputs of one shape;
            # zeros are a stop.
            if (g is not None and np.shape(g) != np.shape(flat[slot]) and np.size(g) < y.size
                    and np.any(np.asarray(g) != 0.0)):
                found.setdefault(slot, []).append(ShapeMismatch(
                    slot, check.slots[slot], tuple(np.shape(g)), tuple(np.shape(flat[slot])), named))
    # Wrong at every shape tried (a sum over the broadcast axis is right where the input
    # broadcasts, though not where it has the output's shape); a broadcast one is shown.
    wrong = [hits for hits in found.values() if len(hits) == runs]
    return ([h for h in wrong[0] if h.want != ()] or wrong[0])[-1] if wrong else None


def _passed_a_scalar(model: ModuleModel, site: GradientSite, index: int) -> bool:
    """Whether a call of the module passes input `index` a Python number (followed through
    names, parameter defaults and conversions: `beta = tf.cast(tf.convert_to_tensor(beta), ...)`
    for `def swish(features, beta=1.0)`), and none passes it an array the evaluator computes
    (`tf.ones([3]) * 0.25`): there a scalar gradient is wrong whatever other callers pass."""
    import numpy as np

    scalar = False
    for call, scope in model.calls_reaching(site):
        args = [a for a in call.args if a.keyword is None and not a.star]
        if len(args) <= index:
            continue
        try:
            if np.ndim(unwrap(Evaluator(model, {}).value(args[index].value, scope))) > 0:
                return False
        except (Unknown, *MATHS_ERRORS):
            pass
        scalar = scalar or _scalar(model, args[index].value, scope, 0)
    return scalar


def _scalar(model: ModuleModel, expr: cst.BaseExpression, scope, depth: int) -> bool:
    if depth > 6:
        return False
    if isinstance(expr, (cst.Integer, cst.Float)):
        return True
    if isinstance(expr, cst.UnaryOperation):
        return _scalar(model, expr.expression, scope, depth + 1)
    if isinstance(expr, cst.Call) and expr.args and expr.args[0].keyword is None:
        name = (model.qualname(expr.func) or "").rsplit(".", 1)[-1]
        return name in _SAME_SHAPE and _scalar(model, expr.args[0].value, _scope_of(model, expr, scope), depth + 1)
    if isinstance(expr, cst.Name):
        values = model.resolve(expr, scope)
        return bool(values) and all(_scalar_binding(model, v, expr, scope, depth) for v in values)
    return False


def _scalar_binding(model: ModuleModel, value, read: cst.Name, scope, depth: int) -> bool:
    """A name's binding holds a number: a parameter's default, or an expression."""
    if isinstance(value, Param):
        return value.node.default is not None and _scalar(model, value.node.default, scope, depth + 1)
    return (isinstance(value, cst.BaseExpression) and value is not read
            and _scalar(model, value, _scope_of(model, value, scope), depth + 1))


def _scope_of(model: ModuleModel, node: cst.CSTNode, default):
    """The scope an expression is read in: its innermost def's or lambda's."""
    while node is not None and node not in model.scope_of:
        node = model.parent(node)
    return model.scope_of[node] if node is not None else default
