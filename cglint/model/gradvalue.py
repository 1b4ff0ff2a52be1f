"""A grad fn judged by the values of its gradients: each against the forward's vector-Jacobian
product, at a few sample points (`cglint.model.vjp`'s samples), in every world where both
evaluate. The VJP is taken whole, by float64 central differences of <dy, forward> per element;
custom and VJP then go to the runtime's own decision (`cglint.runtime.verdict.decide`, pure
NumPy), so a deliberate estimator (reversal, straight-through, clipping, a stop) is told apart
from a wrong formula exactly as `--runtime` tells it. Anything Unknown claims nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cglint.model.upstream import every_world
from cglint.model.vjp import _POINTS, _Check, _Skip

if TYPE_CHECKING:
    from cglint.model.module import ModuleModel
    from cglint.model.sites import GradientSite

_STEPS = (1e-6, 1e-4)  # two central differences per element: where they disagree, no point
# Differences reach ~1e-9 here; a wrong formula is off by far more than this.
_RTOL = 1e-5


@dataclass
class ValueMismatch:
    """Gradients that differ from the VJP at every sample point: (slot, its name, the
    runtime's detail) for each."""

    slots: list[tuple[int, str, str]]


def gradient_value_mismatch(model: ModuleModel, site: GradientSite, intentional: bool = False) -> ValueMismatch | None:
    """The inputs and variables whose returned gradient the runtime's decision calls a
    mismatch against the forward's VJP, at every sample point of every world that evaluates."""
    found: dict[str, tuple[int, str, str]] = {}

    def test(check: _Check) -> set[int]:
        wrong = _mismatched(check, intentional)
        found.update({check.slots[k]: (k, check.slots[k], d) for k, d in wrong.items()})
        return set(wrong)

    names = every_world(model, site, test)
    return ValueMismatch([found[n] for n in names]) if names else None


def _mismatched(check: _Check, intentional: bool) -> dict[int, str]:
    from cglint.runtime import verdict as V  # pure NumPy, no TensorFlow

    np = check.np
    shapes = [check._x_shape()] * check.input_slots + list(check.var_shapes)
    probes = []
    for _ in range(3 * _POINTS):
        if len(probes) == _POINTS:
            break
        flat = [check._sample(s) for s in shapes]
        frozen: dict = {}
        y = check._forward(flat, frozen, record=True)
        if not np.all(np.isfinite(y)):
            continue
        dy = check._sample(y.shape)
        auto = _vjp(check, flat, dy, frozen)
        if auto is not None:
            probes.append((flat, dy, frozen, _custom(check, flat, dy), auto))
    if len(probes) < _POINTS:
        raise _Skip
    args = [V.Arg(name, "input" if i < check.input_slots else "variable", tuple(np.shape(a)), "float64")
            for i, (name, a) in enumerate(zip(check.slots, probes[0][0]))]
    m = V.Measurements(args, [[dy] for _, dy, *_ in probes], [p[3] for p in probes], [p[4] for p in probes])
    report = V.decide(m, _Measure(check, probes[0]), V.Options(rtol=_RTOL, intentional=intentional))
    if report.verdict != "mismatch":
        return {}
    out = {}
    for k, (arg, result) in enumerate(zip(args, report.args)):
        # Wrong at every sample point, not at one unlucky one.
        if result.verdict == "mismatch" and all(
                not V.close(p[3][k], p[4][k], arg, V.Options(rtol=_RTOL), 0.0)[0] for p in probes):
            out[k] = result.detail
    return out


def _custom(check: _Check, flat: list, dy) -> list:
    """The returned gradients as float64 arrays of their slots' shapes (None: no gradient); a
    gradient of another shape is CG018's to judge, so nothing is claimed."""
    np = check.np
    out = []
    for g, a in zip(check._grads(flat, dy, {}), flat):
        if g is not None:
            g = np.asarray(g)
            if np.iscomplexobj(g) or g.shape != np.shape(a):
                raise _Skip
            g = g.astype(float)
        out.append(g)
    return out


def _phi(check: _Check, flat: list, dy, frozen: dict) -> float:
    """<dy, forward>, with each `stop_gradient` held at its value in `frozen`."""
    return float(check.np.sum(dy * check._forward(flat, frozen)))


def _vjp(check: _Check, flat: list, dy, frozen: dict) -> list | None:
    """The forward's VJP with `dy` for every slot, one element at a time; None near a kink or a
    pole, where the two step sizes disagree."""
    np = check.np
    out = []
    for slot, base in enumerate(flat):
        g = np.zeros(np.shape(base))
        for i in np.ndindex(g.shape):
            slopes = []
            for h in _STEPS:
                ends = []
                for sign in (1.0, -1.0):
                    moved = np.array(base, dtype=float)
                    moved[i] += sign * h
                    ends.append(_phi(check, [moved if j == slot else a for j, a in enumerate(flat)], dy, frozen))
                slopes.append((ends[0] - ends[1]) / (2 * h))
            if not (np.isfinite(slopes[0]) and abs(slopes[0] - slopes[1]) <= 1e-6 * max(1.0, abs(slopes[0]))):
                return None
            g[i] = slopes[0]
        out.append(g)
    return out


class _Measure:
    """`verdict.Measure` from the evaluated forward at the first probe: what explains a
    disagreement (finite differences of the forward itself, a small upstream, staircases)."""

    def __init__(self, check: _Check, probe: tuple) -> None:
        self.check, (self.flat, self.dy, self.frozen, self.custom, self.auto) = check, probe

    def _at(self, k: int, step) -> list:
        return [a + step if j == k else a for j, a in enumerate(self.flat)]

    def _output(self, flat: list):
        return self.check._forward(flat, {}, record=True)  # stop_gradient holds nothing here

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
