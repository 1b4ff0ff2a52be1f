"""Deciding a runtime verdict from measured gradients. Pure NumPy: no TensorFlow here.

`cglint.gradcheck.check` runs TensorFlow and measures, per input and per variable, the custom
vector-Jacobian product and autodiff's for the same upstream gradients (plus a zero upstream, a
repeated call and calls with `variables` permuted). `decide` turns those numbers into a
`GradientReport`. The few measurements that cost extra passes and are needed only to explain a
disagreement (finite differences, a small-upstream probe) are asked for through a `Measure`
object, so a check that matches pays nothing for them and tests can supply them from NumPy.

Error measure, per argument: ||c - a|| / ||a|| for custom c and autodiff a. That is the
Cauchy-Schwarz-normalised error of the projection on the worst direction, and it needs no extra
passes because both VJPs are whole vectors. Against finite differences (one projection per
pass) the Cauchy-Schwarz form |<c, v> - fd| / ||c|| is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .report import ArgResult, GradientReport

# Relative tolerances on ||custom - reference|| / ||reference|| per argument. Measured floors for
# correct gradients are ~1e-7 (float32) and ~1e-16 (float64); the margins leave room for
# mathematically equal but differently rounded formulas while still catching a 1e-3 error.
DEFAULT_RTOL = {"float16": 1e-2, "bfloat16": 3e-2, "float32": 2e-5, "float64": 1e-10,
                "complex64": 2e-5, "complex128": 1e-10}
WRONG_DTYPE = "TensorFlow accepts the gradient in the wrong dtype"  # an argument detail others look for
# Finite differences are only as good as their dtype: central differences in float64 with
# h ~ 1e-6 reach ~1e-8; float32 ones are coarse and only used when float64 is impossible.
FD_TOL = {"float64": 1e-5, "other": 3e-2}
# An argument whose reference gradient is this small relative to the largest one is compared
# against that scale, so a negligible gradient cannot produce a spurious 100% error.
SCALE_FLOOR = 1e-4
# A float32 comparison whose error is above this (but under the tolerance) is near the float32
# noise floor, where one wrong Jacobian entry in 10^4 hides: worth a float64 re-run.
NOISE_FLOOR = {"float32": 1e-6, "complex64": 1e-6}


@dataclass
class Arg:
    """One differentiated argument: an input (position among differentiable inputs) or a
    variable (position in `variables`)."""

    name: str
    kind: str  # "input" or "variable"
    shape: tuple
    dtype: str  # NumPy/TensorFlow dtype name: "float32", "complex64", ...


@dataclass
class Measurements:
    """What the checker measured in one mode. Gradients are NumPy arrays, None for no gradient;
    lists run over probes, then over `args` (inputs first, then variables)."""

    args: list[Arg]
    upstreams: list[list[np.ndarray]]  # per probe, per flattened output
    customs: list[list]
    autos: list[list]
    zero: list | None = None  # custom VJP for a zero upstream
    again: list | None = None  # custom VJP for upstreams[0], called a second time
    # (permutation of the variables, custom VJP with `variables` in that order), as the grad fn
    # returned it: entry j of the variable part answers for variable perm[j].
    orders: list = field(default_factory=list)
    # Where these numbers were measured: "eager", "tf.function", "second-order" (Hessian-vector
    # products; `args` as for first order) or "forward" (JVPs; `args` are the outputs).
    mode: str = "eager"


class Measure(Protocol):
    """Extra measurements, taken only when a disagreement needs explaining."""

    def fd(self, k: int, direction: np.ndarray) -> tuple[float, bool]:
        """Central difference of <upstreams[0], f> along unit `direction` of argument k:
        (value, precise), precise meaning it was taken in float64. May raise."""

    def small(self, factor: float) -> tuple[list, list]:
        """(custom VJP, autodiff VJP) for upstreams[0] * factor."""

    def locally_constant(self, k: int) -> bool:
        """True if the forward's output does not move for tiny steps of argument k."""

    def quantised(self, k: int) -> bool:
        """True if tiny steps of argument k leave the output unchanged or only rescale it."""

    # The random ops the forward ran (a sampler): its finite differences measure the jumps of
    # its samples, not a derivative, so they are no reference.
    random_ops: list[str]


@dataclass
class Options:
    rtol: float | None = None
    atol: float = 0.0
    intentional: bool = False  # a `# cglint: intentional` comment


skipped = GradientReport.skipped


# ------------------------------------------------------------------ small numeric helpers

def as64(g):
    """float64 (complex128 for complex) copy; None stays None."""
    if g is None:
        return None
    g = np.asarray(g)
    return g.astype(np.complex128 if np.iscomplexobj(g) else np.float64)


def norm(g) -> float:
    return 0.0 if g is None else float(np.linalg.norm(as64(g).ravel()))


def finite(g) -> bool:
    return g is None or bool(np.all(np.isfinite(g)))


def zero(g) -> bool:
    """No finite nonzero entry: a non-finite value is not evidence of an ignored upstream."""
    return g is None or not np.any(np.isfinite(g) & (np.asarray(g) != 0))


def fmt(x: float) -> str:
    return f"{x:.1g}" if x < 1e-2 else f"{x:.2g}"


def pct(x: float) -> str:
    """"off by N%": the relative error as reports store it (3 significant digits, as JSON's
    `max_rel_error`), so every view that prints one number prints the same percentage."""
    if x is None or not np.isfinite(x):
        return "an unbounded amount"
    x = float(f"{x:.3g}")
    return f"{100 * x:.0f}%" if x >= 0.1 else f"{100 * x:.2g}%"


def rtol_for(dtype: str, opts: Options) -> float:
    if opts.rtol is not None:
        return float(opts.rtol)
    return DEFAULT_RTOL.get(dtype, 1e-5)


def close(c, a, arg: Arg, opts: Options, scale_floor: float) -> tuple[bool, float]:
    """(||c - a|| <= atol + rtol * ||a||, relative error ||c - a|| / ||a||); None is a zero
    gradient, and ||a|| is floored at `scale_floor` so negligible gradients stay quiet."""
    a64 = np.zeros(()) if a is None else as64(a)
    c64 = np.zeros(()) if c is None else as64(c)
    num = float(np.linalg.norm((c64 - a64).ravel()))
    den = max(float(np.linalg.norm(a64.ravel())), scale_floor)
    if num == 0.0:
        return True, 0.0
    err = num / den if den > 0 else float("inf")
    return num <= opts.atol + rtol_for(arg.dtype, opts) * den, err


def _count_nonfinite(g) -> str:
    g = np.asarray(g)
    bad = ~np.isfinite(g)
    kinds = [k for k, m in (("nan", np.isnan(g)), ("inf", np.isinf(g))) if np.any(m)]
    where = "" if g.ndim == 0 else f" at {int(bad.sum())} of {g.size} elements"
    return f"{' and '.join(kinds)}{where}"


def _broadcasts_to(small: tuple, big: tuple) -> bool:
    if len(small) > len(big):
        return False
    return all(s in (1, b) for s, b in zip(reversed(small), reversed(big)))


# ------------------------------------------------------------------ the decision

class _Decider:
    def __init__(self, m: Measurements, measure: Measure | None, opts: Options):
        self.m, self.measure, self.opts = m, measure, opts
        self.args = m.args
        self.n_inputs = sum(1 for a in m.args if a.kind == "input")

    def report(self, verdict, detail, args, reference=None, emax=None) -> GradientReport:
        if verdict in ("match", "mismatch", "intentional") and reference is None:
            reference = "autodiff"
        if emax is None and verdict == "mismatch":
            emax = max((a.max_rel_error for a in args if a.verdict == "mismatch"
                        and a.max_rel_error is not None), default=None)
        return GradientReport(verdict=verdict, detail=detail, reference=reference,
                              max_rel_error=emax, args=args)

    def arg_results(self, results) -> list[ArgResult]:
        out = []
        for k, arg in enumerate(self.args):
            v, ref, e, d = results.get(k, ("match", "autodiff", None, ""))
            out.append(ArgResult(arg.name, arg.kind, arg.shape, arg.dtype, v, ref, e, d))
        return out

    def plain_results(self, flagged: dict, verdict="mismatch") -> list[ArgResult]:
        """Per-argument results when a whole-function problem decides the verdict: the plain
        comparison with autodiff, with the arguments the problem concerns marked."""
        results = {}
        for k, arg in enumerate(self.args):
            errs = []
            for cs, as_ in zip(self.m.customs, self.m.autos):
                c, a = cs[k], as_[k]
                if (c is None or tuple(np.shape(c)) == arg.shape) and finite(a) and finite(c):
                    errs.append(close(c, a, arg, self.opts, 0.0))
            emax = max((e for _, e in errs), default=None)
            bad = k in flagged or not errs or not all(ok for ok, _ in errs)
            results[k] = (verdict if bad else "match", "autodiff", emax, flagged.get(k, ""))
        return self.arg_results(results)

    # -------------------------------------------------------------- whole-function problems
    def variable_order(self) -> GradientReport | None:
        """The grad fn was called with `variables` permuted: the list it returns must follow.
        TensorFlow builds `variables` from a set eagerly and sorts it by name under
        `tf.function`, so a hard-coded order swaps gradients in one mode or the other."""
        base = self.n_inputs
        canonical = self.m.customs[0]
        for perm, got in self.m.orders:
            for j, src in enumerate(perm):
                want, have = canonical[base + src], got[base + j]
                if want is None and have is None:
                    continue
                arg = self.args[base + src]
                if (want is None) != (have is None) or np.shape(want) != np.shape(have) or \
                        not close(have, want, arg, self.opts, 0.0)[0]:
                    detail = ("gradients do not follow the order of variables: hard-coded order "
                              f"(asked for {arg.name} at position {j}, got another variable's "
                              "gradient)")
                    flagged = {k: detail for k in range(base, len(self.args))}
                    return self.report("mismatch", detail, self.plain_results(flagged))
        return None

    def apart_from_order(self) -> dict:
        """A hard-coded variable order decides the function's verdict, but a finding about the
        gradient's values (CG005, CG009, ...) makes its own claim: the same comparison with each
        variable's gradient paired with its variable by shape (when every variable's shape is its
        own), else on the inputs alone. `{"values": summary}`, or {} when nothing is left to judge."""
        base = self.n_inputs
        variables = self.args[base:]
        shapes = [a.shape for a in variables]
        order = None
        if len(set(shapes)) == len(shapes):
            returned = [tuple(np.shape(g)) if g is not None else None for g in self.m.customs[0][base:]]
            if sorted(map(str, returned)) == sorted(map(str, shapes)):
                order = [returned.index(s) for s in shapes]  # returned position of each variable's gradient
        if order is None and not base:
            return {}

        def aligned(vjp):
            if vjp is None:
                return None
            return list(vjp[:base]) + ([vjp[base + j] for j in order] if order is not None else [])

        keep = self.args if order is not None else self.args[:base]
        m = Measurements(keep, self.m.upstreams, [aligned(c) for c in self.m.customs],
                         [list(a[:len(keep)]) for a in self.m.autos], zero=aligned(self.m.zero),
                         again=aligned(self.m.again), mode=self.m.mode)
        report = _Decider(m, self.measure, self.opts).decide()
        how = ("each variable's gradient paired with its variable by shape" if order is not None and variables
               else "on the inputs alone")
        return {"values": {"verdict": report.verdict, "reference": report.reference,
                           "max_rel_error": report.max_rel_error,
                           "detail": f"{report.detail} (apart from the variable order: {how})"}}

    def shapes_and_dtypes(self) -> tuple[GradientReport | None, dict]:
        """TensorFlow checks neither in eager mode: a gradient that broadcasts to its input's
        shape (a scalar for a `(2,)` parameter, tensorflow#127690) is silently accepted and
        wrong; a float32 gradient for a float64 input silently loses precision."""
        flagged = {}
        for k, arg in enumerate(self.args):
            c = self.m.customs[0][k]
            if c is None:
                continue
            shape = tuple(np.shape(c))
            if shape != arg.shape:
                if not _broadcasts_to(shape, arg.shape):
                    detail = (f"the gradient for {arg.name} has shape {shape} but {arg.name} "
                              f"has shape {arg.shape}")
                    return self.report("error", detail, []), {}
                how = "broadcast-collapsed" if len(shape) < len(arg.shape) or \
                    int(np.prod(shape)) < int(np.prod(arg.shape)) else "broadcast"
                flagged[k] = (f"d/{arg.name} has shape {shape} but {arg.name} has shape "
                              f"{arg.shape}: a {how} gradient, which TensorFlow silently "
                              "broadcasts")
            elif np.asarray(c).dtype.name != arg.dtype and arg.dtype in DEFAULT_RTOL:
                flagged[k] = (f"d/{arg.name} is {np.asarray(c).dtype.name} but {arg.name} is "
                              f"{arg.dtype}: {WRONG_DTYPE}")
        return None, flagged

    def upstream_ignored(self) -> GradientReport | None:
        if self.m.zero is None:
            return None
        ignored = [k for k, g in enumerate(self.m.zero) if not zero(g)]
        if not ignored:
            return None
        detail = ("upstream gradient ignored: nonzero gradient for zero upstream "
                  f"(d/{', d/'.join(self.args[k].name for k in ignored)})")
        return self.report("mismatch", detail, self.plain_results(
            {k: "nonzero gradient for zero upstream" for k in ignored}))

    def nondeterministic(self) -> GradientReport | None:
        if self.m.again is None:
            return None
        for k, (arg, c1, c2) in enumerate(zip(self.args, self.m.customs[0], self.m.again)):
            if not (finite(c1) and finite(c2)):
                continue
            if (c1 is None) != (c2 is None) or np.shape(c1) != np.shape(c2):
                ok, e = False, float("inf")
            else:
                ok, e = close(c2, c1, arg, self.opts, 0.0)
            if not ok:
                detail = (f"nondeterministic gradient: two calls with the same upstream differ "
                          f"by {pct(e)} in d/{arg.name}")
                return self.report("mismatch", detail, self.plain_results({k: detail}))
        return None

    # -------------------------------------------------------------- per-argument comparison
    def classify(self, pre: dict) -> GradientReport:
        results: dict[int, tuple] = {}  # arg index -> (verdict, reference, error, detail)
        self.scale_floor = SCALE_FLOOR * max(
            [norm(g) for gs in self.m.autos for g in gs if g is not None and finite(g)] + [0.0])
        for k, arg in enumerate(self.args):
            if k in pre:
                results[k] = ("mismatch", "autodiff", None, pre[k])
                continue
            cs = [c[k] for c in self.m.customs]
            as_ = [a[k] for a in self.m.autos]
            bad_c = [i for i, c in enumerate(cs) if not finite(c)]
            bad_a = [i for i, a in enumerate(as_) if not finite(a)]
            if bad_c:
                i = bad_c[0]
                if not finite(as_[i]):
                    results[k] = ("skipped", None, None,
                                  f"inconclusive for {arg.name}: the custom gradient "
                                  f"({_count_nonfinite(cs[i])}) and autodiff "
                                  f"({_count_nonfinite(as_[i])}) are both not finite here")
                else:
                    results[k] = ("mismatch", "autodiff", float("inf"),
                                  f"d/{arg.name} is not finite ({_count_nonfinite(cs[i])}) "
                                  "where autodiff is finite")
                continue
            if not bad_a:
                errs = [close(c, a, arg, self.opts, self.scale_floor) for c, a in zip(cs, as_)]
                emax = max(e for _, e in errs)
                if all(ok for ok, _ in errs):
                    results[k] = ("match", "autodiff", emax, "")
                    continue
            else:
                emax = float("inf")
            results[k] = self.explain(k, arg, cs, as_, emax)
        return self.summarise(results)

    def _fd_verdict(self, k, arg, c, a):
        """Compares custom and autodiff with finite differences along a random direction and
        along the custom gradient itself (Cauchy-Schwarz-normalised: |<c,v> - fd| / ||c||).
        Returns (custom_ok, autodiff_ok, custom_err, fd_zero, precise) or None if FD failed."""
        if self.measure is None or np.iscomplexobj(c) or "complex" in arg.dtype or (
                self.random_ops() and not self.replayed()):
            return None
        rng = np.random.default_rng(k)
        v1 = rng.standard_normal(arg.shape)
        v1 /= max(np.linalg.norm(v1), 1e-300)
        dirs = [v1]
        cn = norm(c)
        if c is not None and cn > 0 and finite(c):
            dirs.append(as64(c) / cn)
        try:
            fds = [self.measure.fd(k, d) for d in dirs]
        except Exception:
            return None
        if not all(np.isfinite(fd) for fd, _ in fds):  # e.g. a float32 forward overflowing
            return None
        precise = all(p for _, p in fds)
        tol = FD_TOL["float64" if precise else "other"]
        an = norm(a) if a is not None and finite(a) else 0
        scale = max(cn, an, 1e-300)
        c_err, a_err, fd_zero = 0.0, 0.0, True
        for d, (fd, _) in zip(dirs, fds):
            cd = 0.0 if c is None else float(np.sum(as64(c) * d))
            c_err = max(c_err, abs(cd - fd) / scale)
            if a is not None and finite(a):
                a_err = max(a_err, abs(float(np.sum(as64(a) * d)) - fd) / scale)
            elif a is not None:
                a_err = float("inf")
            fd_zero = fd_zero and abs(fd) <= tol * scale
        return c_err <= tol, a_err <= tol, c_err, fd_zero, precise

    def explain(self, k, arg, cs, as_, emax):
        """Custom and autodiff disagree on this argument: ask finite differences and the
        runtime signatures of intentional estimators."""
        finite_ad = all(finite(a) for a in as_)
        what = {"second-order": "second derivative ", "forward": "JVP "}.get(self.m.mode, "")
        if self.m.mode in ("second-order", "forward"):
            # No intentional estimators at higher order: a missing or different derivative here
            # is what higher-order users silently get.
            if all(c is None for c in cs):
                return ("mismatch", "autodiff", emax,
                        f"no {what}for {arg.name} (None) where autodiff's is nonzero")
            if not finite_ad:
                return ("skipped", None, None, f"inconclusive for {arg.name}: autodiff's {what}"
                        "is not finite")
            what = f"JVP of {arg.name}" if self.m.mode == "forward" else f"d/{arg.name}"
            return ("mismatch", "autodiff", emax, f"{what} off by {pct(emax)} vs autodiff")
        if all(c is None for c in cs):
            return ("intentional", "autodiff", emax,
                    f"gradient stopped: the grad fn returns None for {arg.name}")
        # A quantiser with a computed scale (`mean(|w|) * sign(w)`, where autodiff's gradient is
        # only the scale's) or with no autodiff at all: the estimator passes the upstream through.
        quantiser = ("intentional", "autodiff", emax,
                     f"straight-through estimator: the forward quantises {arg.name} (tiny steps leave its "
                     "output unchanged or only rescale it), the custom gradient passes the upstream through")
        fd = None if (self.replayed() and not finite_ad) else self._fd_verdict(k, arg, cs[0], as_[0])
        if fd is not None:
            c_ok, a_ok, c_err, fd_zero, precise = fd
            # Overrule a finite autodiff only with float64 differences; float32 ones are too
            # coarse to side against it (they would let a 1e-3 error through).
            # No autodiff at all (None: `numpy_function`, an integer cast) is no reference: finite
            # differences are, in any precision.
            no_reference = all(a is None for a in as_)
            if c_ok and (not finite_ad or no_reference or (precise and not a_ok)):
                return ("match", "finite-differences", c_err, "")
            if all(zero(a) for a in as_) and not c_ok and fd_zero:
                return ("intentional", "autodiff", emax,
                        f"straight-through estimator: autodiff and finite differences give zero "
                        f"for {arg.name}, the custom gradient passes one through")
            if all(zero(a) for a in as_) and not c_ok and self._staircase(k):
                return ("intentional", "autodiff", emax,
                        f"straight-through estimator: the forward is piecewise constant in {arg.name} "
                        "(tiny steps leave it unchanged or make it jump; autodiff gives zero or none), the custom gradient "
                        "passes one through")
            if self.passes_masked_upstream(k) and self._quantised(k):
                return quantiser
            if not finite_ad or no_reference:
                if no_reference:
                    return ("mismatch", "finite-differences", c_err,
                            f"d/{arg.name} off by {pct(c_err)} vs finite differences (autodiff has no "
                            "gradient here)")
                return ("mismatch", "finite-differences", c_err,
                        f"d/{arg.name} off by {pct(c_err)} vs finite differences")
            if precise and not a_ok and not c_ok:
                return ("skipped", None, emax,
                        f"inconclusive for {arg.name}: autodiff and finite differences disagree "
                        "(a kink or non-smooth point?)")
        elif self.random_ops() and (not finite_ad or all(a is None for a in as_)):
            return ("skipped", None, None,
                    f"inconclusive for {arg.name}: the forward draws random numbers ({', '.join(self.random_ops())}), so "
                    "finite differences measure the jumps of its samples, not a derivative, and autodiff "
                    f"{'is not finite' if not finite_ad else 'has no gradient'} here"
                    + ("" if self.replayed() else "; a random forward whose draws no seed replays (a generator "
                       "made from non-deterministic state?)"))
        elif not finite_ad:
            i = next(i for i, a in enumerate(as_) if not finite(a))
            return ("skipped", None, None, f"inconclusive for {arg.name}: autodiff is not finite "
                    f"here ({_count_nonfinite(as_[i])}) and finite differences could not be taken")
        elif all(zero(a) for a in as_):
            return ("intentional", "autodiff", emax,
                    f"straight-through estimator: autodiff gives zero for {arg.name}, the custom "
                    "gradient passes one through")
        elif self.passes_masked_upstream(k) and self._quantised(k):
            return quantiser
        return ("mismatch", "autodiff", emax, f"d/{arg.name} off by {pct(emax)} vs autodiff")

    def random_ops(self) -> list[str]:
        """The forward's random ops where they make finite differences no reference: all of them
        when its draws cannot be replayed, else only where autodiff is not finite either (a
        sampler's acceptance jumps, which replayed draws do not remove)."""
        return list(getattr(self.measure, "random_ops", None) or ())

    def replayed(self) -> bool:
        return bool(getattr(self.measure, "replayed", False))

    def _quantised(self, k) -> bool:
        try:
            return bool(self.measure is not None and self.measure.quantised(k))
        except Exception:
            return False

    def passes_masked_upstream(self, k) -> bool:
        """The custom gradient of argument k is the single upstream, where kept, and zero
        elsewhere, on every probe: a straight-through estimator, clipped or not."""
        for ups in self.m.upstreams:
            if len(ups) != 1:
                return False
        for ups, customs in zip(self.m.upstreams, self.m.customs):
            c, u = customs[k], ups[0]
            if c is None or np.shape(c) != np.shape(u):
                return False
            c, u = as64(c), as64(u)
            kept = np.isclose(c, u, rtol=1e-5, atol=1e-7)
            if not kept.any() or not np.all(kept | (np.abs(c) <= 1e-7)):
                return False
        return True

    def _staircase(self, k) -> bool:
        """A piecewise-constant forward: finite differences with a step wide enough to measure
        cross its steps (not zero), yet tiny steps leave the output unchanged."""
        try:
            return bool(self.measure.locally_constant(k))
        except Exception:
            return False

    @staticmethod
    def scaled(cs, as_):
        """Constant real ratio c != 1 between custom and autodiff on every probe (reversal:
        c < 0)."""
        ratios = []
        for c, a in zip(cs, as_):
            if c is None or a is None or np.shape(c) != np.shape(a):
                return None
            a64, c64 = as64(a).ravel(), as64(c).ravel()
            aa = float(np.real(np.vdot(a64, a64)))
            if aa == 0:
                return None
            r = np.vdot(a64, c64) / aa
            if abs(np.imag(r)) > 1e-3 * abs(r):
                return None
            r = float(np.real(r))
            if np.linalg.norm(c64 - r * a64) > 1e-3 * np.linalg.norm(c64):
                return None
            ratios.append(r)
        r0 = ratios[0]
        if abs(r0 - 1) < 1e-2 or any(abs(r - r0) > 1e-3 * abs(r0) for r in ratios):
            return None
        return r0

    @staticmethod
    def scaled_per_element(cs, as_) -> tuple[float, float] | None:
        """custom = s * autodiff elementwise, with the same real factors s on every probe (so s
        does not depend on the upstream) and s not 1 everywhere: a gradient multiplier whose
        strength is another input or a schedule (`-strength * dy`). Returns s's range."""
        if len(cs) < 2:
            return None
        ratio = None
        for c, a in zip(cs, as_):
            if c is None or a is None or np.shape(c) != np.shape(a) or np.iscomplexobj(c) or np.iscomplexobj(a):
                return None
            a64, c64 = as64(a).ravel(), as64(c).ravel()
            if not (np.all(np.isfinite(a64)) and np.all(np.isfinite(c64))) or not np.all(np.abs(a64) > 1e-6 * norm(a64)):
                return None
            r = c64 / a64
            if ratio is not None and not np.allclose(r, ratio, rtol=1e-4, atol=1e-6):
                return None
            ratio = r
        if ratio is None or ratio.size == 0 or np.allclose(ratio, 1.0, rtol=1e-3):
            return None
        return float(ratio.min()), float(ratio.max())

    def passes_upstream(self, ks) -> bool:
        """Autodiff's gradient for arguments `ks` is the upstream itself on every probe: the
        forward is the identity there (`tf.identity(x)`), as in a gradient multiplier or a
        gradient-reversal layer."""
        for ups, autos in zip(self.m.upstreams, self.m.autos):
            if len(ups) != 1:
                return False
            for k in ks:
                a = autos[k]
                if a is None or np.shape(a) != np.shape(ups[0]) or not np.allclose(as64(a), as64(ups[0]), rtol=1e-5, atol=1e-7):
                    return False
        return True

    def returns_upstream(self, k) -> bool:
        """The custom gradient of argument k is the (single) upstream itself on every probe, where
        autodiff's is not: the op's derivative was dropped (a pass-through of a non-identity)."""
        if self.m.mode in ("second-order", "forward"):
            return False
        for ups, customs, autos in zip(self.m.upstreams, self.m.customs, self.m.autos):
            c, a = customs[k], autos[k]
            if len(ups) != 1 or c is None or np.shape(c) != np.shape(ups[0]) or \
                    not np.allclose(as64(c), as64(ups[0]), rtol=1e-5, atol=1e-7):
                return False
            if a is not None and np.shape(a) == np.shape(c) and np.allclose(as64(a), as64(c), rtol=1e-5, atol=1e-7):
                return False
        return True

    def clipping(self) -> bool:
        """Nonlinear in the upstream and equal to autodiff for a small upstream (clipping)."""
        if self.measure is None:
            return False
        total = np.sqrt(sum(norm(u) ** 2 for u in self.m.upstreams[0]))
        if total == 0:
            return False
        for size in (1e-3, 1e-6):
            factor = size / total
            try:
                cs, as_ = self.measure.small(factor)
            except NotImplementedError:
                return False
            if all(finite(c) and close(c, a, arg, self.opts, self.scale_floor * factor)[0]
                   for arg, c, a in zip(self.args, cs, as_)):
                return True
        return False

    def swapped(self, bad) -> dict:
        """{k: j} when the custom gradient of variable k equals autodiff's for variable j != k
        on every probe: a variable order mix-up rather than a wrong formula."""
        out = {}
        for k in bad:
            if self.args[k].kind != "variable":
                continue
            for j, arg in enumerate(self.args):
                if j == k or arg.kind != "variable" or arg.shape != self.args[k].shape:
                    continue
                pairs = [(c[k], a[j]) for c, a in zip(self.m.customs, self.m.autos)]
                if all(c is not None and a is not None and finite(c) and finite(a) and norm(a) > 0
                       and close(c, a, arg, self.opts, 0.0)[0] for c, a in pairs):
                    out[k] = j
                    break
        return out

    def conjugated(self, ks) -> list:
        """Complex inputs whose custom gradient is the conjugate of autodiff's on every probe:
        TensorFlow's gradient for a complex input is upstream * conj(f'(z))."""
        out = []
        for k in ks:
            # Elementwise ops only (one upstream of the input's shape): custom u*g against
            # autodiff u*conj(g) means c*conj(u) == conj(a)*u.
            probes = [(c[k], a[k], ups[0] if len(ups) == 1 else None)
                      for c, a, ups in zip(self.m.customs, self.m.autos, self.m.upstreams)]
            if all(c is not None and a is not None and u is not None and np.iscomplexobj(a)
                   and np.iscomplexobj(u) and finite(c) and finite(a) and norm(np.imag(a)) > 0
                   and np.shape(c) == np.shape(a) == np.shape(u)
                   and close(np.asarray(c) * np.conj(u), np.conj(a) * np.asarray(u), self.args[k], self.opts, 0.0)[0]
                   for c, a, u in probes):
                out.append(k)
        return out

    def conjugated_real(self, ks) -> list:
        """Real inputs of a complex output (a phase) whose custom gradient is Re(u * g) where
        TensorFlow's is Re(u * conj(g)), g = d out / d x, on every probe. Elementwise only: g is
        solved per element from autodiff's probes (a = Re(u) Re(g) + Im(u) Im(g)), which must fit
        them all, so at least three probes are needed for the claim."""
        if len(self.m.customs) < 3:
            return []
        out = []
        for k in ks:
            probes = [(c[k], a[k], ups[0] if len(ups) == 1 else None)
                      for c, a, ups in zip(self.m.customs, self.m.autos, self.m.upstreams)]
            if not all(c is not None and a is not None and u is not None and not np.iscomplexobj(a)
                       and np.iscomplexobj(u) and finite(c) and finite(a)
                       and np.shape(c) == np.shape(a) == np.shape(u) for c, a, u in probes):
                continue
            us = np.stack([np.ravel(u) for _, _, u in probes])  # probes x elements
            a_s = np.stack([np.ravel(as64(a)) for _, a, _ in probes])
            c_s = np.stack([np.ravel(as64(c)) for c, _, _ in probes])
            # per element: [Re u, Im u] . [Re g, Im g] = a, least squares over the probes
            m = np.stack([us.real, us.imag], axis=-1).transpose(1, 0, 2)  # elements x probes x 2
            g = np.stack([np.linalg.lstsq(m[i], a_s[:, i], rcond=None)[0] for i in range(m.shape[0])])
            fitted = np.einsum("epj,ej->pe", m, g)
            if norm(g[:, 1]) == 0 or not close(fitted, a_s, self.args[k], self.opts, 0.0)[0]:
                continue
            unconjugated = us.real * g[:, 0] - us.imag * g[:, 1]
            if close(c_s, unconjugated, self.args[k], self.opts, 0.0)[0]:
                out.append(k)
        return out

    def summarise(self, results) -> GradientReport:
        bad = [k for k, r in results.items() if r[0] == "mismatch"]
        ref_mismatch = [k for k in bad if results[k][1] == "autodiff"
                        and results[k][2] is not None and np.isfinite(results[k][2])]
        if self.m.mode in ("second-order", "forward"):
            ref_mismatch = []
        for k in self.conjugated(ref_mismatch):
            v, ref, e, d = results[k]
            results[k] = (v, ref, e, f"{d}: the complex conjugate of autodiff's gradient (TensorFlow's "
                          "gradient for a complex input is upstream * conj(f'(z)): tf.math.conj missing or extra)")
            ref_mismatch.remove(k)
        for k in self.conjugated_real(ref_mismatch):
            v, ref, e, d = results[k]
            results[k] = (v, ref, e, f"{d}: Re(upstream * d out/d {self.args[k].name}) where TensorFlow's gradient "
                          f"of a complex output for a real input is Re(upstream * conj(d out/d {self.args[k].name})): "
                          "tf.math.conj missing or extra")
            ref_mismatch.remove(k)
        if ref_mismatch and all(zero(c) and (c is None or np.all(np.asarray(c) == 0))
                                for cs in self.m.customs for c in cs):
            # Exact zeros for every input and variable on every probe: a stop written out
            # (`tf.zeros_like(x)` for each), as deliberate as returning None. One gradient zeroed
            # beside others that flow is not this: that is the dropped-term bug.
            names = ", ".join(self.args[k].name for k in ref_mismatch)
            for k in ref_mismatch:
                results[k] = ("intentional", "autodiff", results[k][2],
                              f"gradient stopped: the grad fn returns zeros for every input ({names})")
            ref_mismatch, bad = [], [k for k in bad if k not in ref_mismatch]
        swaps = self.swapped(bad)
        if swaps:
            where = (" (`variables` comes sorted by name here)"
                     if self.m.mode == "tf.function" else "")
            detail = ("gradients swapped between variables" + where + ": " +
                      ", ".join(f"d/{self.args[k].name} is {self.args[j].name}'s gradient"
                                for k, j in swaps.items()))
            for k in swaps:
                results[k] = ("mismatch", "autodiff", results[k][2], detail)
            ref_mismatch = [k for k in ref_mismatch if k not in swaps]
        if ref_mismatch:
            # Intentional estimators are recognised by how they behave, not by their names.
            ratios = {k: self.scaled([c[k] for c in self.m.customs], [a[k] for a in self.m.autos])
                      for k in ref_mismatch}
            # A scaling/reversal layer scales every gradient alike; one argument off by a
            # constant factor while the others match is a bug (e.g. a bias gradient x1.001).
            nonzero = [k for k in range(len(self.args))
                       if not all(zero(a[k]) for a in self.m.autos)]
            uniform = (set(nonzero) <= set(ratios) and
                       all(r is not None for r in ratios.values()) and
                       max(ratios.values()) - min(ratios.values()) <=
                       1e-3 * max(abs(r) for r in ratios.values()))
            if uniform and self.passes_upstream(ratios):
                r = next(iter(ratios.values()))
                what = ("gradient reversal" if abs(r + 1) < 1e-3 else
                        f"gradient reversed and scaled by {abs(r):.3g}" if r < 0 else
                        f"gradient scaled by {r:.3g}")
                names = ", ".join(self.args[k].name for k in ratios)
                for k in ratios:
                    results[k] = ("intentional", "autodiff", results[k][2],
                                  f"{what}: custom = {r:.3g} x autodiff for {names}")
                bad = [k for k in bad if k not in ratios]
            elif set(nonzero) <= set(ref_mismatch) and self.passes_upstream(ref_mismatch) and all((
                    spans := {k: self.scaled_per_element([c[k] for c in self.m.customs], [a[k] for a in self.m.autos])
                              for k in ref_mismatch}).values()):
                # The identity forward again, its gradient scaled by factors that vary per element
                # but not with the upstream: a reversal whose strength is an input or a schedule.
                lo, hi = min(v[0] for v in spans.values()), max(v[1] for v in spans.values())
                names = ", ".join(self.args[k].name for k in spans)
                what = "gradient reversed and scaled" if hi < 0 else "gradient scaled"
                for k in spans:
                    results[k] = ("intentional", "autodiff", results[k][2],
                                  f"{what} per element by factors in [{lo:.3g}, {hi:.3g}] that do not depend on "
                                  f"the upstream (an identity forward: a gradient multiplier) for {names}")
                bad = [k for k in bad if k not in spans]
            elif uniform:
                # The same factor on every gradient of a forward that computes something (a
                # layer, a loss): what a forgotten constant or a sign error gives. Gradient
                # multipliers and reversal layers wrap an identity forward (the branch above).
                r = next(iter(ratios.values()))
                for k in ratios:
                    v, ref, e, d = results[k]
                    results[k] = (v, ref, e, f"{d}: custom = {r:.3g} x autodiff, "
                                  f"{'a sign error' if abs(r + 1) < 1e-3 else 'a constant factor missing or extra'}? "
                                  "(a deliberate multiplier wraps an identity forward; or, if deliberate, "
                                  "add the line `# cglint: intentional` above its def)")
            elif len(ref_mismatch) == len(bad) and self.clipping():
                names = ", ".join(self.args[k].name for k in ref_mismatch)
                for k in ref_mismatch:
                    results[k] = ("intentional", "autodiff", results[k][2],
                                  f"gradient clipping ({names}): matches autodiff for a small "
                                  "upstream, nonlinear in it for a large one")
                bad = []
        for k in bad:
            if results[k][0] == "mismatch" and self.returns_upstream(k):
                v, ref, e, d = results[k]
                results[k] = (v, ref, e, f"{d}: the grad fn returns the upstream unchanged, without the "
                              "forward's own derivative")
        if bad and self.opts.intentional and self.m.mode not in ("second-order", "forward"):
            for k in bad:
                v, ref, e, d = results[k]
                results[k] = ("intentional", ref, e, f"declared intentional: {d}")
            bad = []

        args = self.arg_results(results)
        errors = [r[2] for r in results.values() if r[2] is not None]
        emax = max(errors) if errors else None
        uses_fd = any(r[1] == "finite-differences" for r in results.values())
        reference = "finite-differences" if uses_fd else "autodiff"
        for verdict in ("mismatch", "skipped", "intentional"):
            ks = [k for k, r in results.items() if r[0] == verdict]
            if ks:
                ks.sort(key=lambda k: -(results[k][2] or 0.0) if verdict == "mismatch" else k)
                details = list(dict.fromkeys(results[k][3] for k in ks))
                detail = "; ".join(details[:2])
                if len(details) > 2:
                    detail += f"; and {len(details) - 2} more"
                if verdict == "mismatch" and len(ks) < len(results):
                    fine = [self.args[k].name for k, r in results.items() if r[0] == "match"]
                    if fine:
                        detail += f" (d/{', d/'.join(fine)} match)"
                return self.report(verdict, detail, args, reference, emax)
        return self.report("match", f"matches {reference} to {fmt(emax or 0.0)}", args,
                           reference, emax)

    def decide(self) -> GradientReport:
        if not self.args:
            return skipped("nothing to differentiate: no floating-point inputs or trainable "
                           "variables")
        if self.m.mode == "tf.function":
            # The custom side went through TensorFlow itself here: what it computes, swapped
            # variables included, is compared first; the permuted calls only after.
            structural, pre = self.shapes_and_dtypes()
            if structural:
                return structural
            report = self.classify(pre)
            if report.verdict in ("match", "intentional"):
                return self.variable_order() or report
            return report
        found = self.variable_order()
        if found:
            found.claims = self.apart_from_order()
            return found
        structural, pre = self.shapes_and_dtypes()
        if structural:
            return structural
        for check in (self.upstream_ignored, self.nondeterministic):
            found = check()
            if found:
                if pre:  # a wrong shape or dtype is the same gradient's bug too: say it as well
                    found.detail = "; ".join([found.detail, *pre.values()])
                return found
        return self.classify(pre)


def decide(m: Measurements, measure: Measure | None = None,
           opts: Options | None = None) -> GradientReport:
    """The verdict for one mode's measurements. `measure` supplies finite differences and the
    small-upstream probe when a disagreement needs them (None: those explanations are off)."""
    return _Decider(m, measure, opts or Options()).decide()


def same_gradients(a: Measurements, b: Measurements, opts: Options | None = None) -> bool:
    """The two modes' custom gradients agree on every probe, argument and permuted call."""
    opts = opts or Options()
    pairs = [(x, y) for ca, cb in zip(a.customs, b.customs) for x, y in zip(ca, cb)]
    pairs += [(x, y) for (pa, oa), (pb, ob) in zip(a.orders, b.orders) for x, y in zip(oa, ob)]
    for arg_pairs in [pairs]:
        for x, y in arg_pairs:
            if (x is None) != (y is None):
                return False
            if x is None:
                continue
            if np.shape(x) != np.shape(y) or not (finite(x) and finite(y)):
                if not np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True):
                    return False
                continue
            dtype = np.asarray(y).dtype.name
            if not close(x, y, Arg("", "", np.shape(y), dtype), opts, 0.0)[0]:
                return False
    return len(a.orders) == len(b.orders)


def near_noise_floor(report: GradientReport) -> bool:
    """A float32 `match` whose worst error is well above float32 rounding: a float64 re-run can
    tell a diluted wrong entry from rounding."""
    if report.verdict != "match":
        return False
    return any(a.max_rel_error is not None and a.dtype in NOISE_FLOOR and
               a.max_rel_error > NOISE_FLOOR[a.dtype] for a in report.args)


def combine(eager: GradientReport, graph: GradientReport | None) -> GradientReport:
    """One verdict from the eager and the `tf.function` measurements; the detail says in which
    mode the custom gradient differs."""
    if graph is None:
        return eager
    if eager.verdict in ("mismatch", "error"):
        if graph.verdict in ("match", "intentional"):
            eager.detail += " (eagerly; under tf.function it matches)"
        elif graph.detail != eager.detail:
            eager.detail += f"; under tf.function: {graph.detail}"
        return eager
    if graph.verdict in ("mismatch", "error"):
        graph.detail = (f"under tf.function (model.fit) only: {graph.detail} "
                        f"(eager: {eager.detail})")
        return graph
    return eager
