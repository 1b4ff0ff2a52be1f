"""A grad fn judged by how its variable gradients follow `variables`: TensorFlow pairs the
returned list with `variables` entry by entry, in an order that changes from process to
process, so each entry must be the gradient of the variable at that position, whatever the
order. The grad fn is evaluated (`cglint.samples.vjp`'s samples) with `variables` in its order
and reversed; anything Unknown claims nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cglint.samples.upstream import every_world

if TYPE_CHECKING:
    from cglint.model.module import ModuleModel
    from cglint.model.sites import GradientSite
    from cglint.samples.vjp import Check


def gradients_by_position(model: ModuleModel, site: GradientSite) -> list[str] | None:
    """The variables whose gradient stays at its position when `variables` is reversed (the
    list is built by position: `dict(zip(variables, grads))`, `grads[i]` for `enumerate`),
    where the gradients moved there differ, at every sample point and in every world where the
    grad fn evaluates; None when any follows its variable."""
    if len(site.variables) < 2:
        return None
    return every_world(model, site, lambda check: (_by_position(check),))[0]


def _by_position(check: Check) -> set[int]:
    np = check.np
    n, k = check.input_slots, len(check.site.variables)
    x_shape = check.x_shape()
    order = list(range(k))[::-1]

    def same(a, b) -> bool:
        return np.shape(a) == np.shape(b) and np.allclose(a, b, rtol=1e-9, atol=0.0)

    found: set[int] | None = None
    for _ in range(3):
        flat = [check.sample(x_shape) for _ in range(n)] + [check.sample(s) for s in check.var_shapes]
        dy = check.sample(check.forward(flat, {}, record=True).shape)
        ahead, behind = (check.grads(flat, dy, {}, o)[n:] for o in (list(range(k)), order))
        if len(ahead) != k or len(behind) != k or any(g is None for g in [*ahead, *behind]):
            return set()
        moved = [i for i in range(k) if not same(ahead[order[i]], ahead[i])]
        if not moved or any(not same(behind[i], ahead[i]) for i in moved):
            return set()  # nothing to tell apart, or a gradient followed its variable
        found = {n + i for i in moved} if found is None else found & {n + i for i in moved}
    return found or set()
