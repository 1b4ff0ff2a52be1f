"""Numeric check of a `tf.custom_gradient` against TensorFlow's own autodiff.

The reference is autodiff of the *undecorated* forward: calling it under a GradientTape records
the real ops (so autodiff sees through the custom gradient) and returns the user's grad fn in the
same call. Both sides are analytic vector-Jacobian products, so they agree to rounding when the
custom gradient is right; finite differences (float64 when the function accepts it) are only a
tie-breaker where autodiff is not finite or disagrees. The cost is a constant number of
forward/backward passes whatever the input size.

Error measure: per input and per variable, ||c - a|| / ||a|| for the custom VJP c and the
autodiff VJP a of the same upstream. Projecting both on a direction v and normalising by
Cauchy-Schwarz (|<c - a, v>| / (||a|| ||v||)) can only be smaller, so this is that error at its
worst direction, and it needs no extra passes because both VJPs are whole vectors. Against
finite differences, which give one projection per pass, the Cauchy-Schwarz form is used.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf

from .report import ArgResult, GradientReport

# Relative tolerances on ||custom - reference|| / ||reference|| per argument. Measured floors
# for correct gradients are ~1e-7 (float32) and ~1e-16 (float64); the margins leave room for
# mathematically equal but differently rounded formulas while still catching a 1e-3 error.
DEFAULT_RTOL = {tf.float16: 1e-2, tf.bfloat16: 3e-2, tf.float32: 2e-5, tf.float64: 1e-10}
# Finite differences are only as good as their dtype: central differences in float64 with
# h ~ 1e-6 reach ~1e-8; float32 ones are coarse and only used when float64 is impossible.
FD_TOL = {"float64": 1e-5, "other": 3e-2}
# An argument whose reference gradient is this small relative to the largest one is compared
# against that scale, so a negligible gradient cannot produce a spurious 100% error.
SCALE_FLOOR = 1e-4


class _Structural(Exception):
    """The custom gradient is structurally wrong (message is user-facing)."""


class _NotRunnable(Exception):
    """The forward cannot be run on the given inputs (message is user-facing)."""


_VAR_REPR = re.compile(r"<tf\.Variable '([^']*)'.*?>", re.DOTALL)


def _first_line(exc: BaseException, limit: int = 240) -> str:
    # Variable reprs carry multi-line numpy arrays; their names are what a reader needs.
    text = _VAR_REPR.sub(lambda m: repr(m.group(1)), str(exc))
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    msg = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


def resolve(fn):
    """Returns (forward, decorated): the function `tf.custom_gradient` wraps, and a callable
    that goes through TensorFlow's custom-gradient machinery.

    Follows `tf.function` (`python_function`) and other wrappers (`__wrapped__`) down to the
    `custom_gradient` decorator. A raw forward returning `(y, grad_fn)` is accepted too; it is
    decorated here so TensorFlow still gets to reject what it would reject.
    """
    obj = fn
    for _ in range(16):
        dec = getattr(obj, "_tf_decorator", None)
        if dec is not None and getattr(dec, "decorator_name", "") == "custom_gradient":
            return obj.__wrapped__, fn
        nxt = getattr(obj, "python_function", None) or getattr(obj, "__wrapped__", None)
        if nxt is None or nxt is obj:
            break
        obj = nxt
    return fn, tf.custom_gradient(fn)


def _is_float(dtype) -> bool:
    return dtype.is_floating


def _to_numpy(g):
    if g is None:
        return None
    if isinstance(g, tf.IndexedSlices):
        g = tf.convert_to_tensor(g)
    return np.asarray(g.numpy() if hasattr(g, "numpy") else g)


def _arg_names(forward, args) -> list[str]:
    """One display name per flattened positional input: parameter names, `x[0]` for nests."""
    try:
        params = [p.name for p in inspect.signature(forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    except (TypeError, ValueError):
        params = []
    names = []
    for i, a in enumerate(args):
        base = params[i] if i < len(params) else f"arg{i}"
        flat = tf.nest.flatten(a)
        names += [base] if len(flat) == 1 else [f"{base}[{j}]" for j in range(len(flat))]
    return names


def _var_names(variables) -> list[str]:
    names = [v.name.split(":")[0] for v in variables]
    return [n if names.count(n) == 1 else f"{n}#{i}" for i, n in enumerate(names)]


def _fmt(x: float) -> str:
    return f"{x:.1g}" if x < 1e-2 else f"{x:.2g}"


def _pct(x: float) -> str:
    if not np.isfinite(x):
        return "an unbounded amount"
    return f"{100 * x:.0f}%" if x >= 0.1 else f"{100 * x:.2g}%"


@dataclass
class _Arg:
    name: str
    kind: str
    index: int  # position in flat inputs, or in variables
    shape: tuple
    dtype: object
    errors: list = field(default_factory=list)


class _Checker:
    def __init__(self, fn, inputs, rtol, atol, seed, probes, variables, intentional, graph=True):
        self.fn, self.inputs = fn, inputs
        self.graph = graph
        self.seed, self.probes = seed, max(1, int(probes))
        self.user_rtol, self.atol = rtol, (atol or 0.0)
        self.user_variables = variables
        self.declared_intentional = intentional
        self.rng = np.random.default_rng(seed)

    # ------------------------------------------------------------------ set-up
    def _prepare_inputs(self):
        flat = tf.nest.flatten(list(self.inputs))
        conv = [x if isinstance(x, tf.Variable) else tf.convert_to_tensor(x) for x in flat]
        self.flat_in = conv
        self.args = tf.nest.pack_sequence_as(list(self.inputs), conv)
        self.diff_idx = [i for i, x in enumerate(conv) if _is_float(x.dtype)]

    def _run_forward(self):
        """Runs the undecorated forward under a persistent tape: y, grad fn, variables read."""
        tape = tf.GradientTape(persistent=True)
        try:
            with tape:
                for i in self.diff_idx:
                    tape.watch(self.flat_in[i])
                out = self.forward(*self.args)
        except Exception as e:  # the inputs do not fit this function
            raise _NotRunnable(f"forward raised on these inputs: {_first_line(e)}") from e
        if not (isinstance(out, (tuple, list)) and len(out) == 2 and callable(out[1])):
            raise _Structural("the forward must return (y, grad_fn); it returned "
                              f"{type(out).__name__}")
        self.tape, (self.y, self.grad_fn) = tape, out
        self.flat_y = tf.nest.flatten(self.y)
        if self.user_variables is not None:
            self.variables = list(self.user_variables)
        else:
            # As TensorFlow does: trainable variables the forward read, minus the inputs.
            self.variables = [v for v in tape.watched_variables()
                              if all(v is not x for x in self.flat_in)]

    def _tf_path(self):
        """Runs the decorated function through TensorFlow once, so structural errors carry
        TensorFlow's own message (missing `variables`, unpacking, counts, upstream arity)."""
        u = self._upstream()
        try:
            with tf.GradientTape() as tape:
                for i in self.diff_idx:
                    tape.watch(self.flat_in[i])
                y = self.decorated(*self.args)
            targets = [self.flat_in[i] for i in self.diff_idx] + list(tape.watched_variables())
            if targets:
                tape.gradient(tf.nest.flatten(y), targets, output_gradients=u)
        except Exception as e:
            raise _Structural(_first_line(e)) from e

    def _graph_path(self) -> str | None:
        """The same as `_tf_path`, traced by `tf.function` as `model.fit` would: eager-only code
        (NumPy, `.numpy()`) and variables created in the forward fail only there."""
        u = self._upstream()

        def step():
            with tf.GradientTape() as tape:
                for i in self.diff_idx:
                    tape.watch(self.flat_in[i])
                y = self.decorated(*self.args)
            targets = [self.flat_in[i] for i in self.diff_idx] + list(tape.watched_variables())
            return tape.gradient(tf.nest.flatten(y), targets, output_gradients=u) if targets else []

        try:
            tf.function(step)()
        except Exception as e:
            # Errors raised while tracing read "in user code: <frames> ... <the message>".
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            message = lines[-1] if lines else type(e).__name__
            if not message.startswith(type(e).__name__):
                message = f"{type(e).__name__}: {message}"
            return f"under tf.function: {message[:240]}"
        return None

    def _upstream(self, scale: float = 1.0):
        """Signed Gaussian upstream gradients, one per flattened output (fixed seed)."""
        us = []
        for y in self.flat_y:
            y = tf.convert_to_tensor(y)
            if _is_float(y.dtype):
                us.append(tf.constant(scale * self.rng.standard_normal(y.shape.as_list()),
                                      dtype=y.dtype))
            else:
                us.append(tf.zeros_like(y))
        return us

    # ------------------------------------------------------------------ the two VJPs
    def _autodiff(self, u):
        targets = [self.flat_in[i] for i in self.diff_idx] + self.variables
        grads = self.tape.gradient(self.flat_y, targets, output_gradients=u,
                                   unconnected_gradients=tf.UnconnectedGradients.NONE)
        return [_to_numpy(g) for g in grads]

    def _custom(self, u, order=None):
        """Calls the user's grad fn exactly as TensorFlow would; returns numpy grads aligned with
        [differentiable inputs] + [variables in `order`]."""
        variables = self.variables if order is None else [self.variables[i] for i in order]
        try:
            if variables:
                res = self.grad_fn(*u, variables=variables)
                input_grads, var_grads = res
                if len(var_grads) != len(variables):
                    raise ValueError("Must return gradient for each variable from "
                                     "@custom_gradient grad_fn.")
                var_grads = list(var_grads)
            else:
                input_grads, var_grads = self.grad_fn(*u), []
            flat = tf.nest.flatten(input_grads)
            if len(flat) != len(self.flat_in):
                raise ValueError(f"custom_gradient function expected to return "
                                 f"{len(self.flat_in)} gradients, but returned {len(flat)} "
                                 "instead.")
            return [_to_numpy(flat[i]) for i in self.diff_idx] + [_to_numpy(g) for g in var_grads]
        except Exception as e:
            raise _Structural(_first_line(e)) from e

    # ------------------------------------------------------------------ comparisons
    def _rtol(self, dtype) -> float:
        if self.user_rtol is not None:
            return float(self.user_rtol)
        return DEFAULT_RTOL.get(tf.as_dtype(dtype), 1e-5)

    def _close(self, c, a, arg, scale_floor) -> tuple[bool, float]:
        """(||c - a|| <= atol + rtol * ||a||, relative error ||c - a|| / ||a||); None is a zero
        gradient, and ||a|| is floored at `scale_floor` so negligible gradients stay quiet."""
        a64 = np.zeros(()) if a is None else a.astype(np.float64)
        c64 = np.zeros(()) if c is None else c.astype(np.float64)
        num = float(np.linalg.norm((c64 - a64).ravel()))
        den = max(float(np.linalg.norm(a64.ravel())), scale_floor)
        if num == 0.0:
            return True, 0.0
        err = num / den if den > 0 else float("inf")
        return num <= self.atol + self._rtol(arg.dtype) * den, err

    @staticmethod
    def _finite(g) -> bool:
        return g is None or bool(np.all(np.isfinite(g)))

    @staticmethod
    def _zero(g) -> bool:
        return g is None or not np.any(g)

    # ------------------------------------------------------------------ finite differences
    def _fd_setup(self):
        """Decides how to difference: float64 copies of the inputs when the forward accepts
        them (variables cannot be cast, so only their own dtype is possible)."""
        if hasattr(self, "fd_cast"):
            return
        self.fd_cast = False
        if any(v.dtype != tf.float64 for v in self.variables):
            return
        try:
            out = self.forward(*self._args_with(None, None, cast=True))
            ys = tf.nest.flatten(out[0])
            self.fd_cast = all(tf.convert_to_tensor(y).dtype == tf.float64
                               for y in ys if _is_float(tf.convert_to_tensor(y).dtype))
        except Exception:
            self.fd_cast = False

    def _args_with(self, pos, delta, cast):
        flat = []
        for i, x in enumerate(self.flat_in):
            t = tf.convert_to_tensor(x)
            if cast and _is_float(t.dtype):
                t = tf.cast(t, tf.float64)
            if i == pos:
                t = t + tf.constant(delta, dtype=t.dtype)
            flat.append(t)
        return tf.nest.pack_sequence_as(list(self.inputs), flat)

    def _phi(self, args, u):
        out = self.forward(*args)
        total = 0.0
        for y, uk in zip(tf.nest.flatten(out[0]), u):
            y = tf.convert_to_tensor(y)
            if _is_float(y.dtype):
                total += float(tf.reduce_sum(tf.cast(uk, tf.float64) * tf.cast(y, tf.float64)))
        return total

    def _fd(self, arg: _Arg, v: np.ndarray, u) -> tuple[float, bool]:
        """Central difference of <u, f> along unit direction v of one argument.
        Returns (value, precise) where precise means it was taken in float64."""
        self._fd_setup()
        if arg.kind == "input":
            x = tf.convert_to_tensor(self.flat_in[self.diff_idx[arg.index]])
            cast = self.fd_cast
            precise = cast or x.dtype == tf.float64
            scale = max(1.0, float(np.max(np.abs(x.numpy()))) if x.shape.num_elements() else 1.0)
            h = (1e-6 if precise else 1e-2) * scale
            pos = self.diff_idx[arg.index]
            plus = self._phi(self._args_with(pos, h * v, cast), u)
            minus = self._phi(self._args_with(pos, -h * v, cast), u)
            return (plus - minus) / (2 * h), precise
        var = self.variables[arg.index]
        precise = var.dtype == tf.float64
        orig = var.read_value()
        scale = max(1.0, float(np.max(np.abs(orig.numpy()))) if orig.shape.num_elements() else 1.0)
        h = (1e-6 if precise else 1e-2) * scale
        try:
            var.assign(orig + tf.constant(h * v, dtype=var.dtype))
            plus = self._phi(self.args, u)
            var.assign(orig - tf.constant(h * v, dtype=var.dtype))
            minus = self._phi(self.args, u)
        finally:
            var.assign(orig)
        return (plus - minus) / (2 * h), precise

    def _fd_verdict(self, arg: _Arg, c, a, u):
        """Compares custom and autodiff with finite differences along a random direction and
        along the custom gradient itself (Cauchy-Schwarz-normalised: |<c,v> - fd| / ||c||).
        Returns (custom_ok, autodiff_ok, custom_err, fd_zero, precise) or None if FD failed."""
        shape = arg.shape
        v1 = self.rng.standard_normal(shape)
        v1 /= max(np.linalg.norm(v1), 1e-300)
        dirs = [v1]
        cn = 0.0 if c is None else float(np.linalg.norm(c.astype(np.float64)))
        if c is not None and cn > 0 and np.all(np.isfinite(c)):
            dirs.append(c.astype(np.float64) / cn)
        try:
            fds = [self._fd(arg, d, u) for d in dirs]
        except Exception:
            return None
        if not all(np.isfinite(fd) for fd, _ in fds):  # e.g. a float32 forward overflowing
            return None
        precise = all(p for _, p in fds)
        tol = FD_TOL["float64" if precise else "other"]
        an = float(np.linalg.norm(a.astype(np.float64))) if a is not None and self._finite(a) else 0
        scale = max(cn, an, 1e-300)
        c_err, a_err, fd_zero = 0.0, 0.0, True
        for d, (fd, _) in zip(dirs, fds):
            cd = 0.0 if c is None else float(np.sum(c.astype(np.float64) * d))
            c_err = max(c_err, abs(cd - fd) / scale)
            if a is not None and self._finite(a):
                a_err = max(a_err, abs(float(np.sum(a.astype(np.float64) * d)) - fd) / scale)
            elif a is not None:
                a_err = float("inf")
            fd_zero = fd_zero and abs(fd) <= tol * scale
        return c_err <= tol, a_err <= tol, c_err, fd_zero, precise

    # ------------------------------------------------------------------ main
    def run(self) -> GradientReport:
        self.forward, self.decorated = resolve(self.fn)
        self.fn_name = getattr(self.forward, "__qualname__", getattr(self.forward, "__name__", ""))
        self._prepare_inputs()
        self._run_forward()
        self._tf_path()

        arg_names = _arg_names(self.forward, self.inputs)
        self.argl = [_Arg(arg_names[i] if i < len(arg_names) else f"arg{i}", "input", k,
                          tuple(self.flat_in[i].shape), self.flat_in[i].dtype)
                     for k, i in enumerate(self.diff_idx)]
        self.argl += [_Arg(n, "variable", k, tuple(v.shape), v.dtype)
                      for k, (n, v) in enumerate(zip(_var_names(self.variables), self.variables))]
        if not self.argl:
            return self._report("skipped", "nothing to differentiate: no floating-point inputs "
                                "or trainable variables", [])

        us = [self._upstream() for _ in range(self.probes)]
        customs = [self._custom(u) for u in us]
        autos = [self._autodiff(u) for u in us]

        order_problem = self._variable_order(us[0], customs[0])
        if order_problem:
            detail, flagged = order_problem
            return self._report("mismatch", detail,
                                self._plain_results(customs, autos, {k: detail for k in flagged}))
        # TensorFlow does not check shapes in eager mode; a wrong shape only breaks later.
        for arg, c in zip(self.argl, customs[0]):
            if c is not None and tuple(c.shape) != arg.shape:
                raise _Structural(f"the gradient for {arg.name} has shape {tuple(c.shape)} but "
                                  f"{arg.name} has shape {arg.shape}")

        zero = self._custom([tf.zeros_like(u) for u in us[0]])
        ignored = [k for k, g in enumerate(zero) if not self._zero(g)]
        if ignored:
            detail = ("upstream gradient ignored: nonzero gradient for zero upstream "
                      f"(d/{', d/'.join(self.argl[k].name for k in ignored)})")
            return self._report("mismatch", detail, self._plain_results(
                customs, autos, {k: "nonzero gradient for zero upstream" for k in ignored}))

        again = self._custom(us[0])
        for k, (arg, c1, c2) in enumerate(zip(self.argl, customs[0], again)):
            ok, e = self._close(c2, c1, arg, 0.0)
            if not ok:
                detail = (f"nondeterministic gradient: two calls with the same upstream differ "
                          f"by {_pct(e)} in d/{arg.name}")
                return self._report("mismatch", detail,
                                    self._plain_results(customs, autos, {k: detail}))

        report = self._classify(us, customs, autos)
        if self.graph and report.verdict in ("match", "intentional"):
            failure = self._graph_path()
            if failure:
                return self._report("error", f"{failure} (eager: {report.detail})", report.args)
        return report

    def _variable_order(self, u, canonical) -> str | None:
        """Calls the grad fn with `variables` reversed and rotated: the returned list must follow.
        TensorFlow builds `variables` from a set, so a hard-coded order swaps gradients."""
        n = len(self.variables)
        if n < 2:
            return None
        base = len(self.diff_idx)
        perms = {tuple(reversed(range(n))), tuple(list(range(1, n)) + [0])}
        for perm in sorted(perms):
            got = self._custom(u, order=list(perm))
            for j, src in enumerate(perm):
                want, have = canonical[base + src], got[base + j]
                if want is None and have is None:
                    continue
                if (want is None) != (have is None) or want.shape != have.shape or \
                        not self._close(have, want, self.argl[base + src], 0.0)[0]:
                    return ("gradients do not follow the order of variables: hard-coded order "
                            f"(asked for {self.argl[base + src].name} at position {j}, got "
                            "another variable's gradient)", range(base, base + n))
        return None

    def _plain_results(self, customs, autos, flagged: dict) -> list[ArgResult]:
        """Per-argument results when a whole-function problem decides the verdict: the plain
        comparison with autodiff, with the arguments the problem concerns marked."""
        results = {}
        for k, arg in enumerate(self.argl):
            errs = []
            for c, a in zip((cs[k] for cs in customs), (as_[k] for as_ in autos)):
                if (c is None or c.shape == arg.shape) and self._finite(a) and self._finite(c):
                    errs.append(self._close(c, a, arg, 0.0))
            emax = max((e for _, e in errs), default=None)
            bad = k in flagged or not errs or not all(ok for ok, _ in errs)
            results[k] = ("mismatch" if bad else "match", "autodiff", emax, flagged.get(k, ""))
        return self._arg_results(results)

    def _classify(self, us, customs, autos) -> GradientReport:
        results: dict[int, tuple] = {}  # arg index -> (verdict, reference, error, detail)
        scale_floor = SCALE_FLOOR * max(
            [float(np.linalg.norm(g.astype(np.float64))) for gs in autos for g in gs
             if g is not None and self._finite(g)] + [0.0])
        for k, arg in enumerate(self.argl):
            cs = [c[k] for c in customs]
            as_ = [a[k] for a in autos]
            if any(not self._finite(c) for c in cs):
                results[k] = ("mismatch", "autodiff", float("inf"),
                              f"d/{arg.name} is not finite (nan or inf)")
                continue
            if all(self._finite(a) for a in as_):
                errs = [self._close(c, a, arg, scale_floor) for c, a in zip(cs, as_)]
                emax = max(e for _, e in errs)
                if all(ok for ok, _ in errs):
                    results[k] = ("match", "autodiff", emax, "")
                    continue
            else:
                emax = float("inf")
            results[k] = self._explain(k, arg, us, cs, as_, emax, scale_floor)
        return self._summarise(results, us, customs, autos, scale_floor)

    def _explain(self, k, arg, us, cs, as_, emax, scale_floor):
        """Custom and autodiff disagree on this argument: ask finite differences and the
        runtime signatures of intentional estimators."""
        finite_ad = all(self._finite(a) for a in as_)
        if all(c is None for c in cs):
            return ("intentional", "autodiff", emax,
                    f"gradient stopped: the grad fn returns None for {arg.name}")
        fd = self._fd_verdict(arg, cs[0], as_[0], us[0])
        if fd is not None:
            c_ok, a_ok, c_err, fd_zero, precise = fd
            # Overrule a finite autodiff only with float64 differences; float32 ones are too
            # coarse to side against it (they would let a 1e-3 error through).
            if c_ok and (not finite_ad or (precise and not a_ok)):
                return ("match", "finite-differences", c_err, "")
            if all(self._zero(a) for a in as_) and fd_zero and not c_ok:
                return ("intentional", "autodiff", emax,
                        f"straight-through estimator: autodiff and finite differences give zero "
                        f"for {arg.name}, the custom gradient passes one through")
            if not finite_ad:
                return ("mismatch", "finite-differences", c_err,
                        f"d/{arg.name} off by {_pct(c_err)} vs finite differences")
            if precise and not a_ok and not c_ok:
                return ("skipped", None, emax,
                        f"inconclusive for {arg.name}: autodiff and finite differences disagree "
                        "(a kink or non-smooth point?)")
        elif not finite_ad:
            return ("skipped", None, None, f"inconclusive for {arg.name}: autodiff is not finite "
                    "here and finite differences could not be taken")
        elif all(self._zero(a) for a in as_):
            return ("intentional", "autodiff", emax,
                    f"straight-through estimator: autodiff gives zero for {arg.name}, the custom "
                    "gradient passes one through")
        return ("mismatch", "autodiff", emax, f"d/{arg.name} off by {_pct(emax)} vs autodiff")

    def _scaled(self, k, cs, as_):
        """Constant ratio c != 1 between custom and autodiff on every probe (reversal: c < 0)."""
        ratios = []
        for c, a in zip(cs, as_):
            if c is None or a is None:
                return None
            a64, c64 = a.astype(np.float64).ravel(), c.astype(np.float64).ravel()
            aa = float(a64 @ a64)
            if aa == 0:
                return None
            r = float(c64 @ a64) / aa
            if np.linalg.norm(c64 - r * a64) > 1e-3 * np.linalg.norm(c64):
                return None
            ratios.append(r)
        r0 = ratios[0]
        if abs(r0 - 1) < 1e-2 or any(abs(r - r0) > 1e-3 * abs(r0) for r in ratios):
            return None
        return r0

    def _clipping(self, us, scale_floor) -> bool:
        """Nonlinear in the upstream and equal to autodiff for a small upstream (clipping)."""
        for norm in (1e-3, 1e-6):
            u0 = us[0]
            total = np.sqrt(sum(float(tf.reduce_sum(tf.square(tf.cast(u, tf.float64))))
                                for u in u0))
            if total == 0:
                return False
            small = [u * tf.cast(norm / total, u.dtype) for u in u0]
            cs, as_ = self._custom(small), self._autodiff(small)
            if all(self._close(c, a, arg, scale_floor * norm / total)[0]
                   for arg, c, a in zip(self.argl, cs, as_)):
                return True
        return False

    def _summarise(self, results, us, customs, autos, scale_floor) -> GradientReport:
        bad = [k for k, r in results.items() if r[0] == "mismatch"]
        ref_mismatch = [k for k in bad if results[k][1] == "autodiff"]
        if ref_mismatch:
            # Intentional estimators are recognised by how they behave, not by their names.
            ratios = {k: self._scaled(k, [c[k] for c in customs], [a[k] for a in autos])
                      for k in ref_mismatch}
            # A scaling/reversal layer scales every gradient alike; one argument off by a
            # constant factor while the others match is a bug (e.g. a bias gradient x1.001).
            nonzero = [k for k in range(len(self.argl))
                       if not all(self._zero(a[k]) for a in autos)]
            uniform = (set(nonzero) <= set(ratios) and
                       all(r is not None for r in ratios.values()) and
                       max(ratios.values()) - min(ratios.values()) <=
                       1e-3 * max(abs(r) for r in ratios.values()))
            if uniform:
                r = next(iter(ratios.values()))
                what = ("gradient reversal" if abs(r + 1) < 1e-3 else
                        f"gradient reversed and scaled by {abs(r):.3g}" if r < 0 else
                        f"gradient scaled by {r:.3g}")
                names = ", ".join(self.argl[k].name for k in ratios)
                for k in ratios:
                    results[k] = ("intentional", "autodiff", results[k][2],
                                  f"{what}: custom = {r:.3g} x autodiff for {names}")
                bad = [k for k in bad if k not in ratios]
            elif len(ref_mismatch) == len(bad) and self._clipping(us, scale_floor):
                names = ", ".join(self.argl[k].name for k in ref_mismatch)
                for k in ref_mismatch:
                    results[k] = ("intentional", "autodiff", results[k][2],
                                  f"gradient clipping ({names}): matches autodiff for a small "
                                  "upstream, nonlinear in it for a large one")
                bad = []
        if bad and self.declared_intentional:
            for k in bad:
                v, ref, e, d = results[k]
                results[k] = ("intentional", ref, e, f"declared intentional: {d}")
            bad = []

        args = self._arg_results(results)
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
                    fine = [self.argl[k].name for k, r in results.items() if r[0] == "match"]
                    if fine:
                        detail += f" (d/{', d/'.join(fine)} match)"
                return self._report(verdict, detail, args, reference, emax)
        return self._report("match", f"matches {reference} to {_fmt(emax or 0.0)}", args,
                            reference, emax)

    def _arg_results(self, results) -> list[ArgResult]:
        out = []
        for k, arg in enumerate(self.argl):
            v, ref, e, d = results.get(k, ("match", "autodiff", None, ""))
            out.append(ArgResult(arg.name, arg.kind, arg.shape, arg.dtype.name, v, ref, e, d))
        return out

    def _report(self, verdict, detail, args, reference=None, emax=None) -> GradientReport:
        if verdict in ("match", "mismatch", "intentional") and reference is None:
            reference = "autodiff"
        if emax is None and verdict == "mismatch":
            emax = max((a.max_rel_error for a in args if a.verdict == "mismatch"
                        and a.max_rel_error is not None), default=None)
        return GradientReport(verdict=verdict, detail=detail, reference=reference,
                              max_rel_error=emax, seed=self.seed, args=args,
                              function=getattr(self, "fn_name", ""))


def check_gradient(fn, *inputs, rtol=None, atol=None, seed=0, probes=3, variables=None,
                   intentional=False, graph=True) -> GradientReport:
    """Checks the custom gradient of `fn` at `inputs` against TensorFlow autodiff.

    `fn` is a `tf.custom_gradient`-decorated function (or the raw forward returning
    `(y, grad_fn)`). `variables`, if given, replaces the trainable variables discovered by
    watching the forward. `intentional=True` (from a `# cglint: intentional` comment) turns a
    mismatch into `intentional`. With `graph` (the default), a gradient that is right eagerly is
    also computed once under `tf.function`, where eager-only code fails (`error`). Never raises
    for problems in the checked code: they become the verdict.
    """
    checker = _Checker(fn, inputs, rtol, atol, seed, probes, variables, intentional, graph)
    try:
        return checker.run()
    except _Structural as e:
        return checker._report("error", str(e), [])
    except _NotRunnable as e:
        return checker._report("skipped", str(e), [])
    except Exception as e:  # a failure of the checker itself must not become a traceback
        return checker._report("skipped", f"the check itself failed: {_first_line(e)}", [])


def forward_runs(fn, *inputs) -> bool:
    """True if the undecorated forward runs on `inputs` and returns `(y, grad_fn)`."""
    forward, _ = resolve(fn)
    try:
        out = forward(*inputs)
    except Exception:
        return False
    return isinstance(out, (tuple, list)) and len(out) == 2 and callable(out[1])


def assert_gradient_matches(fn, *inputs, allow_intentional=False, **kw) -> GradientReport:
    """Raises AssertionError with the report's detail unless the verdict is `match` (or
    `intentional` when `allow_intentional`). Returns the report."""
    report = check_gradient(fn, *inputs, **kw)
    allowed = {"match"} | ({"intentional"} if allow_intentional else set())
    if report.verdict not in allowed:
        raise AssertionError(f"custom gradient {report.verdict}: {report.detail}")
    return report
