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

from . import verdict as V
from .report import GradientReport
from .verdict import DEFAULT_RTOL, FD_TOL, SCALE_FLOOR  # noqa: F401 - re-exported


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
    """Differentiable: floating or complex (TensorFlow watches both)."""
    return dtype.is_floating or dtype.is_complex


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
        self.opts = V.Options(rtol=rtol, atol=atol or 0.0, intentional=bool(intentional))
        self.user_variables = variables
        self.rng = np.random.default_rng(seed)

    # ------------------------------------------------------------------ set-up
    def _prepare_inputs(self):
        flat = tf.nest.flatten(list(self.inputs))
        # Python numbers are converted by TensorFlow but never watched: they get no gradient,
        # so a module constant like `EPS = 1e-6` passed positionally is not differentiated.
        self.python_numbers = {i for i, x in enumerate(flat)
                               if isinstance(x, (int, float, complex)) and not isinstance(x, bool)}
        conv = [x if isinstance(x, tf.Variable) else tf.convert_to_tensor(x) for x in flat]
        self.flat_in = conv
        self.args = tf.nest.pack_sequence_as(list(self.inputs), conv)
        self.diff_idx = [i for i, x in enumerate(conv)
                         if _is_float(x.dtype) and i not in self.python_numbers]
        self.int_idx = [i for i, x in enumerate(conv)
                        if x.dtype.is_integer and i not in self.python_numbers]

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

    def _upstream(self, scale: float = 1.0):
        """Signed Gaussian upstream gradients, one per flattened output (fixed seed); complex
        outputs get complex Gaussian ones."""
        us = []
        for y in self.flat_y:
            y = tf.convert_to_tensor(y)
            shape = y.shape.as_list()
            if y.dtype.is_complex:
                z = self.rng.standard_normal(shape) + 1j * self.rng.standard_normal(shape)
                us.append(tf.constant(scale * z, dtype=y.dtype))
            elif _is_float(y.dtype):
                us.append(tf.constant(scale * self.rng.standard_normal(shape), dtype=y.dtype))
            else:
                us.append(tf.zeros_like(y))
        return us

    # ------------------------------------------------------------------ the two VJPs
    def _targets(self):
        return [self.flat_in[i] for i in self.diff_idx] + self.variables

    def _autodiff(self, u):
        grads = self.tape.gradient(self.flat_y, self._targets(), output_gradients=u,
                                   unconnected_gradients=tf.UnconnectedGradients.NONE)
        return [_to_numpy(g) for g in grads]

    def _call_grad_fn(self, grad_fn, u, variables):
        """Calls a grad fn exactly as TensorFlow would; returns its gradients aligned with
        [differentiable inputs] + [`variables`], as tensors (None where it returned None), and
        the gradients it returned for integer inputs."""
        if variables:
            res = grad_fn(*u, variables=variables)
            input_grads, var_grads = res
            if len(var_grads) != len(variables):
                raise ValueError("Must return gradient for each variable from "
                                 "@custom_gradient grad_fn.")
            var_grads = list(var_grads)
        else:
            input_grads, var_grads = grad_fn(*u), []
        flat = tf.nest.flatten(input_grads)
        if len(flat) != len(self.flat_in):
            raise ValueError(f"custom_gradient function expected to return "
                             f"{len(self.flat_in)} gradients, but returned {len(flat)} "
                             "instead.")
        return [flat[i] for i in self.diff_idx] + var_grads, [flat[i] for i in self.int_idx]

    def _custom(self, u, order=None):
        """The user's grad fn on upstream `u`, as NumPy, aligned with [differentiable inputs] +
        [variables in `order`]."""
        variables = self.variables if order is None else [self.variables[i] for i in order]
        try:
            grads, int_grads = self._call_grad_fn(self.grad_fn, u, variables)
        except Exception as e:
            raise _Structural(_first_line(e)) from e
        self.int_grads = [_to_numpy(g) for g in int_grads]
        return [_to_numpy(g) for g in grads]

    def _perms(self):
        n = len(self.variables)
        if n < 2:
            return []
        return sorted({tuple(reversed(range(n))), tuple(list(range(1, n)) + [0])})

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
            if cast and t.dtype.is_floating:
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

    # ------------------------------------------------------------------ measuring
    def fd(self, k: int, direction: np.ndarray) -> tuple[float, bool]:
        """`verdict.Measure`: finite differences along `direction` of argument k."""
        return self._fd(self.argl[k], direction, self.us[0])

    def small(self, factor: float) -> tuple[list, list]:
        """`verdict.Measure`: custom and autodiff VJPs for a scaled-down first upstream."""
        small = [u * tf.cast(factor, u.dtype) for u in self.us[0]]
        return self._custom(small), self._autodiff(small)

    def _eager(self) -> V.Measurements:
        us = self.us
        customs = [self._custom(u) for u in us]
        autos = [self._autodiff(u) for u in us]
        orders = [(perm, self._custom(us[0], order=list(perm))) for perm in self._perms()]
        zero = self._custom([tf.zeros_like(u) for u in us[0]])
        again = self._custom(us[0])
        self._custom(us[0])  # leaves int_grads for the first upstream
        return V.Measurements(self.vargs, [[np.asarray(u) for u in p] for p in us], customs,
                              autos, zero=zero, again=again, orders=orders, mode="eager")

    def _graph(self) -> V.Measurements:
        """The same comparison traced by `tf.function`, as `model.fit` runs it: the custom side
        goes through TensorFlow's own machinery (which passes `variables` sorted by name), the
        reference is autodiff of the undecorated forward, and the grad fn is also called with
        `variables` permuted. Eager-only code (NumPy, `.numpy()`, variables created in the
        forward) raises here."""
        diff = [self.flat_in[i] for i in self.diff_idx]
        variables, perms, us = self.variables, self._perms(), self.us

        def dense(gs):
            return [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in gs]

        def step():
            customs, autos, orders = [], [], []
            for u in us:
                with tf.GradientTape() as tape:
                    for x in diff:
                        tape.watch(x)
                    y = self.decorated(*self.args)
                customs.append(dense(tape.gradient(
                    tf.nest.flatten(y), diff + variables, output_gradients=u,
                    unconnected_gradients=tf.UnconnectedGradients.NONE)))
                with tf.GradientTape() as tape:
                    for x in diff:
                        tape.watch(x)
                    y, _ = self.forward(*self.args)
                autos.append(dense(tape.gradient(
                    tf.nest.flatten(y), diff + variables, output_gradients=u,
                    unconnected_gradients=tf.UnconnectedGradients.NONE)))
            if perms:
                _, grad_fn = self.forward(*self.args)
                for perm in perms:
                    grads, _ = self._call_grad_fn(grad_fn, us[0], [variables[i] for i in perm])
                    orders.append(dense(grads))
            return customs, autos, orders

        customs, autos, orders = tf.function(step)()
        as_np = lambda gs: [_to_numpy(g) for g in gs]  # noqa: E731
        return V.Measurements(self.vargs, [[np.asarray(u) for u in p] for p in us],
                              [as_np(c) for c in customs], [as_np(a) for a in autos],
                              orders=[(p, as_np(o)) for p, o in zip(perms, orders)],
                              mode="tf.function")

    def _graph_failure(self, e: Exception) -> str:
        # Errors raised while tracing read "in user code: <frames> ... <the message>".
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        message = lines[-1] if lines else type(e).__name__
        if not message.startswith(type(e).__name__):
            message = f"{type(e).__name__}: {message}"
        return f"under tf.function: {message[:240]}"

    def _dropped_integer_gradients(self) -> str | None:
        """TensorFlow does not differentiate integer tensors: a gradient the grad fn returns for
        one is silently dropped (tensorflow#73631)."""
        names = _arg_names(self.forward, self.inputs)
        dropped = [names[i] if i < len(names) else f"arg{i}"
                   for i, g in zip(self.int_idx, getattr(self, "int_grads", []))
                   if g is not None and np.any(g)]
        if not dropped:
            return None
        which = ", ".join(dropped)
        return (f"integer input {which}: TensorFlow drops the gradient the grad fn returns for "
                f"it (integer tensors are never differentiated); pass a float tensor")

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
        self.vargs = [V.Arg(a.name, a.kind, a.shape, a.dtype.name) for a in self.argl]
        if not self.argl:
            return self._report("skipped", "nothing to differentiate: no floating-point inputs "
                                "or trainable variables")

        self.us = [self._upstream() for _ in range(self.probes)]
        eager = V.decide(self._eager(), self, self.opts)
        modes = {"eager": eager.verdict}
        graph = None
        if self.graph and eager.verdict != "error":
            try:
                graph = V.decide(self._graph(), self, self.opts)
            except Exception as e:
                if eager.verdict in ("match", "intentional"):
                    modes["tf.function"] = "error"
                    return self._report("error", f"{self._graph_failure(e)} (eager: "
                                        f"{eager.detail})", eager.args, modes=modes)
            if graph is not None:
                modes["tf.function"] = graph.verdict
        report = V.combine(eager, graph)
        dropped = self._dropped_integer_gradients()
        if dropped and report.verdict in ("match", "intentional"):
            report.verdict, report.detail = "mismatch", f"{dropped} ({report.detail})"
        report.seed, report.function, report.modes = self.seed, self.fn_name, modes
        return report

    def _report(self, verdict, detail, args=(), reference=None, emax=None,
                modes=None) -> GradientReport:
        if verdict == "skipped":
            return V.skipped(detail, self.seed, getattr(self, "fn_name", ""))
        if verdict in ("match", "mismatch", "intentional") and reference is None:
            reference = "autodiff"
        return GradientReport(verdict=verdict, detail=detail, reference=reference,
                              max_rel_error=emax, seed=self.seed, args=list(args),
                              function=getattr(self, "fn_name", ""), modes=modes or {})


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
        return V.skipped(str(e), seed, getattr(checker, "fn_name", ""))
    except Exception as e:  # a failure of the checker itself must not become a traceback
        return V.skipped(f"the check itself failed: {_first_line(e)}", seed,
                         getattr(checker, "fn_name", ""))


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
