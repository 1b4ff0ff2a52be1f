"""A grad fn judged by the values of its gradients: each against the forward's vector-Jacobian
product, at a few sample points (`cglint.samples.vjp`'s samples), in every world where both
evaluate. The VJP is taken whole, by float64 central differences of <dy, forward> per element;
custom and VJP then go to the runtime's own decision (`cglint.gradcheck.verdict.decide`, pure
NumPy), so a deliberate estimator (reversal, straight-through, clipping, a stop) is told apart
from a wrong formula exactly as `--runtime` tells it. Anything Unknown claims nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cglint.samples.upstream import every_world
from cglint.samples.vjp import MATHS_ERRORS, POINTS, Check, Skip

if TYPE_CHECKING:
    from cglint.model.module import ModuleModel
    from cglint.model.sites import GradientSite

_STEPS = (1e-6, 1e-4)  # central differences, and a wider one to check them: where they disagree, no point
# Differences reach ~1e-9 here; a wrong formula is off by far more than this.
_RTOL = 1e-5
_SMALL = 1e-3  # an upstream this small: clipping (by value or norm, at 1 or more) is the identity


@dataclass
class ValueMismatch:
    """Gradients that differ from the VJP at every sample point: (slot, its name, the
    runtime's detail) for each."""

    slots: list[tuple[int, str, str]]


def gradient_value_mismatch(model: ModuleModel, site: GradientSite, intentional: bool = False) -> ValueMismatch | None:
    """The inputs and variables whose returned gradient the runtime's decision calls a
    mismatch against the forward's VJP, at every sample point of every world that evaluates."""
    found: dict[str, tuple[int, str, str]] = {}
    signed: set[tuple] = set()  # the worlds judged with samples of both signs

    def test(check: Check) -> tuple[set[int]]:
        # Positive samples only where both signs judge nothing, as the runtime's probes are
        # signed: at positive samples alone a PReLU is the identity, and its sign error a reversal.
        world = tuple(sorted(check.extra.items()))
        if check.positive and world in signed:
            raise Skip
        wrong = _every_shape(check, intentional)
        if not check.positive:
            signed.add(world)
        for k, d in wrong.items():  # the first world's words: its samples are of both signs
            found.setdefault(check.slots[k], (k, check.slots[k], d))
        return (set(wrong),)

    (names,) = every_world(model, site, test, any_output=True)
    return ValueMismatch([found[n] for n in names]) if names else None


def _every_shape(check: Check, intentional: bool) -> dict[int, str]:
    """The slots wrong at every shape the forward takes that is tried: every input at one
    sample shape; each (of several) at the shape that broadcasts against the others (a
    per-channel `temperature` of (C,) against `x` of (N, C)); and as a scalar (a temperature,
    a multiplier: `scale_gradient(x, -0.3)`). Code written for one of these is right there; a
    shape where the gradients have other shapes than their inputs judges nothing (CG018's)."""
    x_shape, n = check.x_shape(), check.input_slots
    configs = [[x_shape] * n]
    if n > 1 and x_shape and n == len(check.site.inputs):  # inputs read by string keys: one shape
        configs += [[x_shape[1:] if j == i else x_shape for j in range(n)] for i in range(n)]
        configs += [[() if j == i else x_shape for j in range(n)] for i in range(n)]
    bad = None
    for shapes, data in [(c, d) for c in configs for d in _DATA]:
        try:
            here = _mismatched(check, shapes + list(check.var_shapes), intentional, data)
        except (Skip, *MATHS_ERRORS):
            continue
        bad = here if bad is None else {k: d for k, d in bad.items() if k in here}
        if not bad:
            return {}
    if bad is None:
        raise Skip
    return bad


# Inputs the grad fn gives no gradient are data (labels, targets, masks), whose values the code
# may assume: a softmax cross-entropy's `softmax - labels` is its derivative only where each row
# of labels sums to 1. Such inputs are also sampled as rows of probabilities and as 0/1 masks.
_DATA = {None: None, "probabilities": lambda np, a: np.abs(a) / np.sum(np.abs(a), axis=-1, keepdims=True),
         "mask": lambda np, a: (a > 0).astype(float)}


def _mismatched(check: Check, shapes: list[tuple], intentional: bool, data: str | None = None) -> dict[int, str]:
    """The slots the runtime's decision calls wrong at each of a few sample points, each
    judged as the runtime judges one (two upstreams at the same inputs); with `data`, the
    inputs without a gradient sampled so (None: nothing to sample so, `Skip`)."""
    # The runtime's decision (pure NumPy, no TensorFlow) and its probes' domains, by name.
    from cglint.gradcheck import verdict as V
    from cglint.gradcheck.domain import positive_domain

    np = check.np
    positive = [positive_domain(name) for name in check.slots]
    bad, points = None, 0
    for _ in range(3 * POINTS):
        if points == POINTS:
            break
        flat = [abs(check.sample(s)) if pos else check.sample(s) for s, pos in zip(shapes, positive)]
        if data is not None:
            stopped = [k for k, g in enumerate(_custom(check, flat, check.sample(check.forward(flat, {}).shape)))
                       if g is None and k < check.input_slots and np.ndim(flat[k])]
            if not stopped:
                raise Skip
            flat = [_DATA[data](np, a) if k in stopped else a for k, a in enumerate(flat)]
        frozen: dict = {}
        y = check.forward(flat, frozen, record=True)
        if not np.all(np.isfinite(y)):
            continue
        dys = [check.sample(y.shape) for _ in range(2)]
        customs = [_custom(check, flat, dys[0])]
        small = _SMALL * dys[0]
        if _agrees_along(check, flat, dys[0], customs[0], frozen) or _agrees_along(
                check, flat, small, _custom(check, flat, small), frozen, _SMALL):
            # Right here, by a random projection, or right for a small upstream: clipping, which
            # the runtime's decision calls intentional. The whole Jacobian is for what differs.
            return {}
        jacobian = _jacobian(check, flat, frozen, y)
        if jacobian is None:
            continue  # a pole or a kink: differences say nothing reliable here
        points += 1
        customs.append(_custom(check, flat, dys[1]))
        autos = [[np.tensordot(dy, j, axes=dy.ndim) for j in jacobian] for dy in dys]
        args = [V.Arg(name, "input" if i < check.input_slots else "variable", tuple(np.shape(a)), "float64")
                for i, (name, a) in enumerate(zip(check.slots, flat))]
        m = V.Measurements(args, [[dy] for dy in dys], customs, autos)
        report = V.decide(m, _Measure(check, (flat, dys[0], customs[0], autos[0])),
                          V.Options(rtol=_RTOL, intentional=intentional))
        here = {k: r.detail for k, (arg, r) in enumerate(zip(args, report.args))
                if report.verdict == "mismatch" and r.verdict == "mismatch"
                and not any(V.close(c[k], a[k], arg, V.Options(rtol=_RTOL), 0.0)[0] for c, a in zip(customs, autos))}
        bad = here if bad is None else {k: d for k, d in bad.items() if k in here}
        if not bad:
            return {}  # right at a point: wrong at every one is the claim
    if points < POINTS:
        raise Skip
    return bad


def _custom(check: Check, flat: list, dy) -> list:
    """The returned gradients as float64 arrays of their slots' shapes (None: none, or zeros); a
    gradient of another shape is CG018's to judge, so nothing is claimed."""
    np = check.np
    out = []
    for g, a in zip(check.grads(flat, dy, {}), flat):
        if g is not None:
            g = np.asarray(g)
            if np.iscomplexobj(g) or g.shape != np.shape(a):
                raise Skip
            g = g.astype(float)
        out.append(None if g is None or not g.any() else g)  # zeros stop the gradient, as `None` does
    return out


def _agrees_along(check: Check, flat: list, dy, custom: list, frozen: dict, scale: float = 1.0) -> bool:
    """Every returned gradient's projection on a random direction is the slope of <dy, forward>
    along it (central differences; both over `scale`, the upstream's): a gradient that differs
    agrees only by accident."""
    np = check.np
    # One direction moving every slot at once: its slope is the sum of the slots' projections,
    # which a wrong gradient matches only by accident (two forwards, not two per slot).
    vs = [check.sample(np.shape(base)) for base in flat]
    ends = [float(np.sum(dy * check.forward([a + s * _STEPS[0] * v for a, v in zip(flat, vs)], frozen)))
            for s in (1.0, -1.0)]
    slope = (ends[0] - ends[1]) / (2 * _STEPS[0] * scale)
    got = sum(0.0 if g is None else float(np.sum(g * v)) for g, v in zip(custom, vs)) / scale
    return abs(got - slope) <= 1e-5 * max(1.0, abs(slope))


def _jacobian(check: Check, flat: list, frozen: dict, y) -> list | None:
    """d forward / d slot for every slot (of shape y.shape + the slot's), by central differences
    one element at a time, each `stop_gradient` held at its value in `frozen`; None where a
    wider step along a random direction disagrees (a kink or a pole nearby)."""
    np = check.np

    def diff(slot: int, step) -> np.ndarray:
        ends = [check.forward([a + sign * step if k == slot else a for k, a in enumerate(flat)], frozen)
                for sign in (1.0, -1.0)]
        return (ends[0] - ends[1]) / 2.0

    out = []
    for slot, base in enumerate(flat):
        j = np.zeros(np.shape(y) + np.shape(base))
        for i in np.ndindex(np.shape(base)):
            step = np.zeros(np.shape(base))
            step[i] = _STEPS[0]
            j[(Ellipsis, *i)] = diff(slot, step) / _STEPS[0]
        v = check.sample(np.shape(base))
        along, wide = np.tensordot(j, v, axes=np.ndim(base)), diff(slot, _STEPS[1] * v) / _STEPS[1]
        if np.shape(wide) != np.shape(y) or not (np.all(np.isfinite(j)) and np.all(np.abs(along - wide) <= 1e-6 * np.maximum(1.0, np.abs(along)))):
            return None
        out.append(j)
    return out


class _Measure:
    """`verdict.Measure` from the evaluated forward at the first probe: what explains a
    disagreement (finite differences of the forward itself, a small upstream, staircases)."""

    def __init__(self, check: Check, probe: tuple) -> None:
        self.check, (self.flat, self.dy, self.custom, self.auto) = check, probe

    def _at(self, k: int, step) -> list:
        return [a + step if j == k else a for j, a in enumerate(self.flat)]

    def _output(self, flat: list):
        return self.check.forward(flat, {}, record=True)  # stop_gradient holds nothing here

    def fd(self, k: int, direction) -> tuple[float, bool]:
        h = 1e-6
        ends = [float(self.check.np.sum(self.dy * self._output(self._at(k, s * h * direction)))) for s in (1, -1)]
        return (ends[0] - ends[1]) / (2 * h), True

    def small(self, factor: float) -> tuple[list, list]:
        return _custom(self.check, self.flat, self.dy * factor), [a * factor for a in self.auto]

    def _directions(self, k: int, size: float):
        np = self.check.np
        rng = np.random.default_rng(k + 7)
        scale = max(1.0, float(np.max(np.abs(self.flat[k]))))
        for _ in range(3):
            v = rng.standard_normal(np.shape(self.flat[k]))
            yield v * size * scale / max(float(np.linalg.norm(v)), 1e-300)

    def locally_constant(self, k: int) -> bool:
        """Tiny steps leave the output unchanged, or make it jump by as much at a third of the
        step (a staircase), both ways, along two of three directions."""
        np = self.check.np
        base = self._output(self.flat)
        stairs = 0
        for v in self._directions(k, 1e-5):
            flat = True
            for sign in (1.0, -1.0):
                far, near = (float(np.sum(np.abs(self._output(self._at(k, sign * t * v)) - base))) for t in (1.0, 0.3))
                flat = flat and (far == near == 0 or (far != 0 and near / far > 0.7))
            stairs += flat
        return stairs >= 2

    def quantised(self, k: int) -> bool:
        """Tiny steps leave the output unchanged or move it along itself only (a pattern times
        a scale), along two of three directions."""
        np = self.check.np
        base = np.ravel(self._output(self.flat))
        if np.count_nonzero(base) < 3:
            return False
        stairs = 0
        for v in self._directions(k, 1e-5):
            d = np.ravel(self._output(self._at(k, v))) - base
            nd = float(np.linalg.norm(d))
            stairs += nd == 0 or abs(float(d @ base)) >= 0.995 * nd * float(np.linalg.norm(base))
        return stairs >= 2
