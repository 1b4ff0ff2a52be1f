"""A grad fn judged by how its gradients depend on the upstream: a vector-Jacobian product is
linear in it, so each gradient is zero for a zero upstream and scales with it. Evaluated with
`cglint.samples.vjp`'s samples; anything Unknown claims nothing."""

from __future__ import annotations

from itertools import product
from typing import TYPE_CHECKING, Callable

import libcst as cst

from cglint import cstwalk
from cglint.samples.vjp import MATHS_ERRORS, POINTS, Unknown, Check, Skip

if TYPE_CHECKING:
    from cglint.model.module import ModuleModel
    from cglint.model.scopes import Scope
    from cglint.model.sites import GradientSite

# Upstreams this small, and scaled by -2: clipping (`clip_by_value(dy, -1, 1)`, `clip_by_norm`)
# is the identity there, so only maths nonlinear at every scale (`dy**2`, `sign(dy)`, `abs(dy)`,
# `dy + c * dy**2`) fails to scale.
_SMALL = 1e-3
_SCALE = -2.0


def not_linear_in_upstream(model: ModuleModel, site: GradientSite) -> tuple[list[str] | None, list[str] | None]:
    """The inputs and variables whose gradient is not zero when the upstream is zero (it adds
    something to the upstream, `dy + local`, instead of multiplying), and those whose gradient
    for a small upstream scaled by -2 is not -2 times the gradient (`dy**2`, `sign(dy)`): each
    at every sample point and in every world where the grad fn evaluates. Clipping
    (`clip_by_value(dy, ...)`) is nonlinear on purpose, but zero at zero and the identity for
    small upstreams: not claimed. One evaluation serves both."""
    if _plainly_linear(site):
        return None, None
    zero, scaling = every_world(model, site, _not_linear, parts=2)
    return zero, scaling


def _plainly_linear(site: GradientSite) -> bool:
    """The grad fn's one return is, element by element, `None` or the upstream times, divided
    by, or matrix-multiplied with values that do not depend on it (sums and negations of such
    terms too): zero at a zero upstream and scaled with it, as evaluation would find at every
    point. Most grad fns read so; saying so without evaluating is most of a lint's time saved."""
    if len(site.grad_fns) != 1:
        return False
    grad = site.grad_fns[0]
    if grad.has_varargs or len(grad.upstream_params) != 1 or grad.at is not None or len(grad.returns) != 1:
        return False
    dy, value = grad.upstream_params[0], grad.returns[0].value
    if value is None or len(grad.scope.bindings.get(dy, [])) != 1:
        return False
    return _linear_elements(value, dy, grad.scope)


def _linear_elements(expr: cst.BaseExpression, dy: str, scope: Scope) -> bool:
    if isinstance(expr, (cst.Tuple, cst.List)):
        return bool(expr.elements) and all(
            isinstance(el, cst.Element) and (_is_none(el.value) or _linear_elements(el.value, dy, scope))
            for el in expr.elements)
    return _linear(expr, dy, scope)


def _is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _linear(expr: cst.BaseExpression, dy: str, scope: Scope) -> bool:
    if isinstance(expr, cst.Name):
        return expr.value == dy
    if isinstance(expr, cst.UnaryOperation):
        return isinstance(expr.operator, (cst.Minus, cst.Plus)) and _linear(expr.expression, dy, scope)
    if not isinstance(expr, cst.BinaryOperation):
        return False
    op, left, right = expr.operator, expr.left, expr.right
    if isinstance(op, (cst.Add, cst.Subtract)):
        return _linear(left, dy, scope) and _linear(right, dy, scope)
    if isinstance(op, (cst.Multiply, cst.MatrixMultiply)):
        return ((_linear(left, dy, scope) and _free(right, scope))
                or (_linear(right, dy, scope) and _free(left, scope)))
    if isinstance(op, cst.Divide):
        return _linear(left, dy, scope) and _free(right, scope)
    return False


def _free(expr: cst.BaseExpression, scope: Scope) -> bool:
    """No name in `expr` is bound in the grad fn (the upstream, its locals), and no function
    or comprehension binds names of its own inside it."""
    for node in cstwalk.nodes(expr):
        if isinstance(node, (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.NamedExpr)):
            return False
        if isinstance(node, cst.Name):
            found = scope.lookup(node.value)
            if found is not None and found[0] is scope:
                return False
    return True


def every_world(model: ModuleModel, site: GradientSite, test: Callable[[Check], tuple[set[int], ...]],
                parts: int = 1, any_output: bool = False) -> list[list[str] | None]:
    """For each of the `parts` sets of slots `test` gives: the slots in it in every world where
    the grad fn evaluates (None where one world has none)."""
    try:
        check = Check(model, site, reads_output=False, any_output=any_output)
    except (Unknown, Skip):
        return [None] * parts
    if check.dy is None or len(check.free) > 2:
        return [None] * parts
    import numpy as np

    check.np = np
    check.lay_out()
    found: list[set[int] | None] = [None] * parts
    with np.errstate(all="ignore"):
        for check.positive in (False, True):
            for values in product((0.0, 1.0, -1.0), repeat=len(check.free)):
                check.extra = {id(p): v for p, v in zip(check.free, values)}
                check.rng = np.random.default_rng(0)
                try:
                    check.var_shapes = [check.var_shape(v) for v in site.variables]
                    bad = test(check)
                except (Unknown, Skip, *MATHS_ERRORS):
                    continue  # not evaluable here
                found = [b if f is None else f & b for f, b in zip(found, bad)]
                if not any(found):
                    return [None] * parts
    return [[check.slots[i] for i in sorted(f)] if f else None for f in found]


def _not_linear(check: Check) -> tuple[set[int], set[int]]:
    """The slots whose gradient is nonzero for a zero upstream at some sample point; those whose
    gradient does not scale with a small upstream at every sample point."""
    np = check.np
    x_shape = check.x_shape()
    zero: set[int] = set()
    scaling: set[int] | None = None
    for _ in range(POINTS):
        flat = [check.sample(x_shape) for _ in range(check.input_slots)] + [check.sample(s) for s in check.var_shapes]
        y = check.forward(flat, {}, record=True)
        dy = _SMALL * check.sample(y.shape)
        # Scaling is asked while it holds at every point so far (linear code stops at the first).
        upstreams = (np.zeros(y.shape), *((dy, _SCALE * dy) if scaling is None or scaling else ()))
        at_zero, *rest = ([np.asarray(0.0 if g is None else g, dtype=float) for g in check.grads(flat, u, {})]
                          for u in upstreams)
        if not all(np.all(np.isfinite(g)) for grads in (at_zero, *rest) for g in grads):
            raise Skip  # a gradient not finite is not judged
        zero |= {i for i, g in enumerate(at_zero) if np.any(g != 0.0)}
        if rest:
            one, scaled = rest
            here = {i for i, (g, h) in enumerate(zip(one, scaled))
                    if np.shape(g) != np.shape(h) or not np.allclose(h, _SCALE * g, rtol=1e-6, atol=1e-12)}
            scaling = here if scaling is None else scaling & here
    return zero, scaling or set()
