"""A grad fn judged by how its gradients depend on the upstream: a vector-Jacobian product is
linear in it, so each gradient is zero for a zero upstream and scales with it. Evaluated with
`cglint.model.vjp`'s samples; anything Unknown claims nothing."""

from __future__ import annotations

from itertools import product
from typing import TYPE_CHECKING, Callable

from cglint.model.vjp import _MATHS_ERRORS, _POINTS, Unknown, _Check, _Skip

if TYPE_CHECKING:
    from cglint.model.module import ModuleModel
    from cglint.model.sites import GradientSite

# Upstreams this small, and scaled by -2: clipping (`clip_by_value(dy, -1, 1)`, `clip_by_norm`)
# is the identity there, so only maths nonlinear at every scale (`dy**2`, `sign(dy)`, `abs(dy)`,
# `dy + c * dy**2`) fails to scale.
_SMALL = 1e-3
_SCALE = -2.0


def nonzero_at_zero_upstream(model: ModuleModel, site: GradientSite) -> list[str] | None:
    """The inputs and variables whose gradient is not zero when the upstream is zero, at every
    sample point and in every world where the grad fn evaluates: such a gradient adds something
    to the upstream (`dy + local`) instead of multiplying. Clipping (`clip_by_value(dy, ...)`)
    is nonlinear on purpose but zero at zero: not claimed."""
    return every_world(model, site, _at_zero)


def not_scaling_with_upstream(model: ModuleModel, site: GradientSite) -> list[str] | None:
    """The inputs and variables whose gradient for a (small) upstream scaled by -2 is not -2
    times the gradient, at every sample point and in every world where the grad fn evaluates."""
    return every_world(model, site, _not_scaling)


def every_world(model: ModuleModel, site: GradientSite, test: Callable[[_Check], set[int]]) -> list[str] | None:
    try:
        check = _Check(model, site, reads_output=False)
    except (Unknown, _Skip):
        return None
    if check.dy is None or len(check.free) > 2:
        return None
    import numpy as np

    check.np = np
    check._layout()
    found: set[int] | None = None
    with np.errstate(all="ignore"):
        for check.positive in (False, True):
            for values in product((0.0, 1.0, -1.0), repeat=len(check.free)):
                check.extra = {id(p): v for p, v in zip(check.free, values)}
                check.rng = np.random.default_rng(0)
                try:
                    check.var_shapes = [check._var_shape(v) for v in site.variables]
                    bad = test(check)
                except (Unknown, _Skip, *_MATHS_ERRORS):
                    continue  # not evaluable here
                if not bad:
                    return None
                found = bad if found is None else found & bad
    return [check.slots[i] for i in sorted(found)] if found else None


def _gradients(check: _Check, upstreams: Callable) -> list[list]:
    """At a few sample points, the gradients (as float arrays, None as 0) for each upstream
    `upstreams(np, output_shape)` gives; a gradient not finite is not judged."""
    np = check.np
    x_shape = check._x_shape()
    points = []
    for _ in range(_POINTS):
        flat = [check._sample(x_shape) for _ in range(check.input_slots)] + [check._sample(s) for s in check.var_shapes]
        y = check._forward(flat, {}, record=True)
        runs = []
        for dy in upstreams(y.shape):
            grads = [np.asarray(0.0 if g is None else g, dtype=float) for g in check._grads(flat, dy, {})]
            if not all(np.all(np.isfinite(g)) for g in grads):
                raise _Skip
            runs.append(grads)
        points.append(runs)
    return points


def _at_zero(check: _Check) -> set[int]:
    """The slots whose gradient is nonzero for a zero upstream at some sample point."""
    points = _gradients(check, lambda shape: [check.np.zeros(shape)])
    return {i for (grads,) in points for i, g in enumerate(grads) if check.np.any(g != 0.0)}


def _not_scaling(check: _Check) -> set[int]:
    """The slots whose gradient does not scale with a small upstream at every sample point."""
    np = check.np

    def upstreams(shape):
        dy = _SMALL * check._sample(shape)
        return [dy, _SCALE * dy]

    bad: set[int] | None = None
    for one, scaled in _gradients(check, upstreams):
        here = {i for i, (g, h) in enumerate(zip(one, scaled))
                if np.shape(g) != np.shape(h) or not np.allclose(h, _SCALE * g, rtol=1e-6, atol=1e-12)}
        bad = here if bad is None else bad & here
    return bad or set()
