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

import contextlib
import inspect
import re
from dataclasses import dataclass, field, replace

import numpy as np
import tensorflow as tf

from . import verdict as V
from .report import GradientReport, first_line
from .verdict import DEFAULT_RTOL, FD_TOL, SCALE_FLOOR  # noqa: F401 - re-exported


class _Structural(Exception):
    """The custom gradient is structurally wrong (message is user-facing)."""


class _NotRunnable(Exception):
    """The forward cannot be run on the given inputs (message is user-facing)."""


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
            # The decorator's own record of what it wraps: `functools.wraps` copies
            # `_tf_decorator` onto a user's wrapper, whose `__wrapped__` is then the decorated one.
            return getattr(dec, "decorated_target", None) or obj.__wrapped__, fn
        nxt = getattr(obj, "python_function", None) or getattr(obj, "__wrapped__", None) or _closed_over(obj)
        if nxt is None or nxt is obj:
            break
        obj = nxt
    return fn, tf.custom_gradient(fn)


def _closed_over(fn):
    """The one custom-gradient function a user's wrapper closes over (`def inner(*a): return
    fn(*a)` without `functools.wraps`), or None."""
    found = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        dec = getattr(value, "_tf_decorator", None)
        if callable(value) and dec is not None and getattr(dec, "decorator_name", "") == "custom_gradient":
            found.append(value)
    return found[0] if len(found) == 1 else None


# TensorFlow's messages for a tensor used outside the graph that made it. A forward or grad fn
# holding a tensor of the tf.function, Keras model or TF1 graph it was built in runs only there:
# called again on other inputs (as a check does) it raises this, which says nothing of its gradient.
_OTHER_GRAPH = re.compile(r"is out of scope and cannot be used here|must be from the same graph as|"
                          r"is not an element of this graph|Attempting to capture an EagerTensor without")


def _other_graph(e: BaseException) -> str | None:
    """The `skipped` detail when `e` (or what it wraps) is a tensor used outside its graph."""
    found = None
    while e is not None:  # TensorFlow's own exception, not the checker's wrapper of it
        found = e if _OTHER_GRAPH.search(str(e)) else found
        e = e.__cause__
    if found is None:
        return None
    return ("the forward or its grad fn uses a tensor of the graph it was built in (a tf.function, a Keras "
            f"model, a TF1 graph), which it cannot use outside that graph, on the check's inputs: {first_line(found)}")


def _no_autodiff(e: Exception) -> bool:
    """TensorFlow's autodiff cannot differentiate through an op of the forward."""
    return (isinstance(e, LookupError) and "No gradient defined" in str(e)) or (
        isinstance(e, tf.errors.UnknownError) and "KeyError: b'pyfunc_" in str(e))


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
        sig = list(inspect.signature(forward).parameters.values())
    except (TypeError, ValueError):
        sig = []
    params = [p.name for p in sig if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    star = next((p.name for p in sig if p.kind == p.VAR_POSITIONAL), None)
    names = []
    for i, a in enumerate(args):
        base = params[i] if i < len(params) else \
            f"{star}[{i - len(params)}]" if star else f"arg{i}"
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


# Ops that draw random numbers: stateful, stateless (seeded by an input) and the generators'.
_RANDOM_OP = re.compile(r"Random|TruncatedNormal|Multinomial|^Stateful|^Rng")


class _RandomOps:
    """Notes the random ops run while it is entered (TensorFlow's op callbacks are per thread
    and see eager execution and graph building alike)."""

    def __enter__(self):
        from tensorflow.python.framework import op_callbacks

        self.found: list[str] = []
        op_callbacks.add_op_callback(self)
        return self

    def __call__(self, op_type, inputs, attrs, outputs, op_name=None, graph=None):
        name = op_type.decode() if isinstance(op_type, bytes) else str(op_type)
        if _RANDOM_OP.search(name) and name not in self.found:
            self.found.append(name)
        return None  # the outputs unchanged

    def __exit__(self, *exc):
        from tensorflow.python.framework import op_callbacks

        op_callbacks.remove_op_callback(self)
        return False


class _SameDraws:
    """Each forward run inside it draws the random numbers the first run drew: TensorFlow's
    global and op seeds are set to the check's seed and the global generator's state is put
    back, so a random forward differenced or re-run sees the samples autodiff's tape recorded.
    (A generator made from non-deterministic state inside the forward cannot be replayed.)"""

    def __init__(self, seed: int):
        from tensorflow.python.ops import stateful_random_ops

        self.seed = seed
        gen = stateful_random_ops.global_generator
        self.gen, self.state = gen, (gen.state.numpy() if gen is not None else None)

    def __enter__(self):
        tf.random.set_seed(self.seed)
        if self.gen is not None:
            self.gen.state.assign(self.state)
        return self

    def __exit__(self, *exc):
        return False


# A straight-through estimator's forward quantises; its grad fn differentiates the forward as if
# these ops were the identity. `_QUANTISING` must be among those a forward used for the relaxed
# comparison to speak: a clip or a stop alone relaxed would excuse a forgotten mask (relu6's).
_QUANTISING = ("round", "floor", "ceil", "rint", "sign", "cast", "saturate_cast")
_ALSO_RELAXED = ("stop_gradient", "clip_by_value")


class _Relaxed:
    """Within it, the forward's non-differentiable ops (`_QUANTISING`, `_ALSO_RELAXED`) are the
    identity: a cast of a float to an integer or bool keeps the float, `round(x)` is `x`. Patched
    where a user's code finds them: TensorFlow's public namespaces (`tf.round`, `tf.math.round`;
    Keras's TensorFlow backend calls those too) and the forward's own module; TensorFlow's
    internals keep theirs. Checks run one at a time, with the program waiting."""

    def __init__(self, forward, float8_casts_only=False):
        self.forward, self.used, self.undo = forward, [], []
        # a grad fn's relaxation: only its casts of floats to 8-bit floats (float8 training)
        self.float8_casts_only = float8_casts_only

    def _relaxed(self, name, original):
        used, float8 = self.used, self.float8_casts_only

        def relaxed(x, *args, **kwargs):
            if name in ("cast", "saturate_cast"):
                dtype = tf.as_dtype(args[0] if args else kwargs.get("dtype"))
                t = tf.convert_to_tensor(x) if not isinstance(x, tf.Variable) else x
                wanted = (dtype.is_floating and dtype.size == 1) if float8 else (dtype.is_integer or dtype == tf.bool)
                if not (t.dtype.is_floating and wanted):
                    return original(x, *args, **kwargs)
            if name not in used:
                used.append(name)
            return tf.identity(x)
        return relaxed

    def __enter__(self):
        import sys as _sys

        # a float8 quantiser saturates before it casts (Keras's quantize_and_dequantize clips to
        # the format's largest value): its clip is relaxed with it, and only counts with a cast
        names = ("cast", "saturate_cast", "clip_by_value") if self.float8_casts_only else _QUANTISING + _ALSO_RELAXED
        originals = {id(fn): (name, fn) for name in names
                     if (fn := getattr(tf, name, None) or getattr(tf.math, name, None)) is not None}
        originals.update({id(getattr(tf.math, n)): (n, getattr(tf.math, n)) for n in names
                          if n in _QUANTISING and hasattr(tf.math, n)})
        spaces = [vars(m) for name, m in list(_sys.modules.items())
                  if m is not None and (name == "tensorflow" or name.startswith("tensorflow._api."))]
        spaces.append(getattr(self.forward, "__globals__", {}))
        swaps: dict[int, object] = {}
        for space in spaces:
            for key, value in list(space.items()):
                if id(value) in originals and callable(value):
                    name, fn = originals[id(value)]
                    relaxed = swaps.setdefault(id(value), self._relaxed(name, fn))
                    self.undo.append((space, key, value))
                    space[key] = relaxed
        return self

    def __exit__(self, *exc):
        for space, key, value in reversed(self.undo):
            space[key] = value
        self.undo.clear()
        return False


class _FiniteDifferencesOnly:
    """A `verdict.Measure` without the small-upstream probe."""

    def __init__(self, checker):
        self.fd = checker.fd
        self.random_ops = checker.random_ops
        self.replayed = checker.replayed

    def small(self, factor):
        raise NotImplementedError


class _Checker:
    def __init__(self, fn, inputs, rtol, atol, seed, probes, variables, intentional, graph=True,
                 order=1, replay=True, overwritten=()):
        self.fn, self.inputs, self.replay = fn, inputs, replay
        self.overwritten = frozenset(overwritten)  # flat input positions: see check_gradient
        self.graph, self.order = graph, int(order or 1)
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
        self.draws, self.replayed = contextlib.nullcontext(), False
        try:
            tape, out, self.random_ops = self._taped_forward()
            if self.random_ops and self.replay:
                # Run again from TensorFlow's seed (which resets its random kernels: never in a
                # traced program, whose own streams must not move), so that every later run
                # replays these draws: finite differences then see the samples the tape recorded
                # (a stochastic rounding's straight-through gradient is measurable).
                self.draws = _SameDraws(self.seed)
                tape, out, self.random_ops = self._taped_forward()
                self.replayed = self._replays(out)
        except Exception as e:  # the inputs do not fit this function
            raise _NotRunnable(f"forward raised on these inputs: {first_line(e)}") from e
        if not (isinstance(out, (tuple, list)) and len(out) == 2 and callable(out[1])):
            raise _Structural("the forward must return (y, grad_fn); it returned "
                              f"{type(out).__name__}")
        self.tape, (self.y, self.grad_fn) = tape, out
        self.grad_fn_called = self.one_shot = self.autodiff_blind = False
        self.flat_y = tf.nest.flatten(self.y)
        if self.user_variables is not None:
            self.variables = list(self.user_variables)
        else:
            # As TensorFlow does: trainable variables the forward read, minus the inputs.
            self.variables = [v for v in tape.watched_variables()
                              if all(v is not x for x in self.flat_in)]

    def _taped_forward(self):
        tape = tf.GradientTape(persistent=True)
        with tape, _RandomOps() as random_ops, self.draws:
            for i in self.diff_idx:
                tape.watch(self.flat_in[i])
            out = self.forward(*self.args)
        return tape, out, random_ops.found

    def _replays(self, out) -> bool:
        """Whether two more runs under `_SameDraws` give the recorded run's outputs exactly."""
        try:
            runs = []
            for _ in range(2):
                with self.draws:
                    runs.append([np.asarray(tf.convert_to_tensor(y)) for y in tf.nest.flatten(self.forward(*self.args)[0])])
            first = [np.asarray(tf.convert_to_tensor(y)) for y in tf.nest.flatten(out[0])]
            return all(len(r) == len(first) and all(np.array_equal(a, b, equal_nan=True) for a, b in zip(r, first))
                       for r in runs)
        except Exception:
            return False

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
            raise _Structural(first_line(e)) from e

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
        try:
            grads = self.tape.gradient(self.flat_y, self._targets(), output_gradients=u,
                                       unconnected_gradients=tf.UnconnectedGradients.NONE)
        except Exception as e:
            if not _no_autodiff(e):
                raise
            # An op autodiff cannot go through (NumPy or a C extension behind `tf.py_function`:
            # the first gradient is zero, NumPy being invisible to the tape, and TensorFlow has
            # dropped the Python body by the next; an op with no registered gradient): no
            # reference from autodiff at all, finite differences are one.
            self.autodiff_blind = True
            return [None] * len(self._targets())
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
        # what the grad fn returns for an overwritten variable is its next value, not a gradient
        return ([None if i in self.overwritten else flat[i] for i in self.diff_idx] + var_grads,
                [flat[i] for i in self.int_idx])

    def _grad_fn_once(self, u, variables):
        """`_call_grad_fn` on the forward's grad fn. TensorFlow calls a grad fn once per forward
        call, and some can be called only once (they consume a non-persistent tape the forward
        made, as RevNet's reversible blocks do): when a later call raises where the first did
        not, every call from then on gets a grad fn of its own forward run."""
        if self.one_shot:
            return self._call_grad_fn(self.forward(*self.args)[1], u, variables)
        try:
            out = self._call_grad_fn(self.grad_fn, u, variables)
        except Exception:
            if not self.grad_fn_called:
                raise
            self.one_shot = True
            return self._grad_fn_once(u, variables)
        self.grad_fn_called = True
        return out

    def _back_to_first_upstream(self) -> None:
        """Run the grad fn for the first upstream again: it leaves `int_grads` as the verdict's
        other measures read them, after a probe with other upstreams."""
        try:
            self._custom(self.us[0])
        except Exception:
            pass

    def _custom(self, u, order=None):
        """The user's grad fn on upstream `u`, as NumPy, aligned with [differentiable inputs] +
        [variables in `order`]."""
        variables = self.variables if order is None else [self.variables[i] for i in order]
        try:
            grads, int_grads = self._grad_fn_once(u, variables)
        except Exception as e:
            raise _Structural(first_line(e)) from e
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
        with self.draws:
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

    def _float_input(self, k: int):
        """(position, tensor) of argument k when it is a non-empty floating input, else None."""
        arg = self.argl[k]
        if arg.kind != "input":
            return None
        pos = self.diff_idx[arg.index]
        x = tf.convert_to_tensor(self.flat_in[pos])
        return (pos, x) if x.dtype.is_floating and x.shape.num_elements() else None

    def locally_constant(self, k: int) -> bool:
        """`verdict.Measure`: the forward's output does not move at all for tiny steps of input k
        (a staircase: sign, round, floor, quantisation, argmax), in the input's own dtype, or moves
        by jumps that do not shrink with the step; two of three directions."""
        if (found := self._float_input(k)) is None:
            return False
        pos, x = found
        scale = max(1.0, float(np.max(np.abs(x.numpy()))))
        base = self._phi(self._args_with(None, None, False), self.us[0])
        rng = np.random.default_rng(k + 7)
        stairs = 0
        for _ in range(3):
            v = rng.standard_normal(x.shape.as_list())
            v *= scale / max(np.linalg.norm(v), 1e-300)
            flat = True
            for sign in (1.0, -1.0):  # both ways: a kink (relu at 0) is flat on one side only
                far, near = (self._phi(self._args_with(pos, sign * t * v, False), self.us[0]) - base
                             for t in (1e-5, 3e-6))
                # Unchanged, or changed by the same jump at a third of the step (inputs on a
                # step's edge, as quantisers' zeros often are): a smooth forward moves 3x less.
                flat = flat and (far == near == 0 or (far != 0 and abs(near / far) > 0.7))
            stairs += flat
        return stairs >= 2

    def quantised(self, k: int) -> bool:
        """`verdict.Measure`: tiny steps of input k leave the forward's output unchanged or only
        rescale it: `alpha * sign(w)` with alpha = mean(|w|), `scale * round(x / scale)`, ternary
        and binary weights. The output is a fixed pattern times a scale, as a quantiser's is; a
        smooth function's change points along the output only by accident. Two of three directions."""
        if (found := self._float_input(k)) is None:
            return False
        pos, x = found

        def outputs(args) -> np.ndarray:
            with self.draws:
                ys = [tf.convert_to_tensor(y) for y in tf.nest.flatten(self.forward(*args)[0])]
            return np.concatenate([np.ravel(tf.cast(y, tf.float64).numpy()) for y in ys if _is_float(y.dtype)] or
                                  [np.zeros(0)])

        base = outputs(self._args_with(None, None, False))
        if np.count_nonzero(base) < 3:
            return False  # one number always moves along itself, two often nearly do
        scale = max(1.0, float(np.max(np.abs(x.numpy()))))
        rng = np.random.default_rng(k + 11)
        stairs = 0
        for _ in range(3):
            v = rng.standard_normal(x.shape.as_list())
            v *= 1e-5 * scale / max(np.linalg.norm(v), 1e-300)
            d = outputs(self._args_with(pos, v, False)) - base
            # Along the output to within the forward's own rounding (a float32 scale recomputed
            # from the input moves the output by ~1e-5 with ~1e-7 noise): cos >= 0.995.
            along = abs(float(d @ base)) >= 0.995 * float(np.linalg.norm(d) * np.linalg.norm(base))
            stairs += bool(not d.any() or along)
        return stairs >= 2

    def small(self, factor: float) -> tuple[list, list]:
        """`verdict.Measure`: custom and autodiff VJPs for a scaled-down first upstream."""
        small = [u * tf.cast(factor, u.dtype) for u in self.us[0]]
        return self._custom(small), self._autodiff(small)

    def _eager(self) -> V.Measurements:
        us = self.us
        customs = [self._custom(u) for u in us]
        autos = [self._autodiff(u) for u in us]
        if self.autodiff_blind:  # the first call's zeros too
            autos = [[None] * len(a) for a in autos]
        orders = [(perm, self._custom(us[0], order=list(perm))) for perm in self._perms()]
        zero = self._custom([tf.zeros_like(u) for u in us[0]])
        again = self._custom(us[0])
        self._custom(us[0])  # leaves int_grads for the first upstream
        return V.Measurements(self.vargs, [[np.asarray(u) for u in p] for p in us], customs,
                              autos, zero=zero, again=again, orders=orders, mode="eager")

    def _graph(self) -> V.Measurements:
        """The same comparison traced by `tf.function`, as `model.fit` runs it: the custom side
        goes through TensorFlow's own machinery (which passes `variables` sorted by name), compared
        with the eager autodiff reference, and the grad fn is also called with
        `variables` permuted. Eager-only code (NumPy, `.numpy()`, variables created in the
        forward) raises here."""
        diff = [self.flat_in[i] for i in self.diff_idx]
        # One upstream is enough to see whether this mode computes something else, and the
        # reference is the same math in either mode: autodiff comes from the eager tape.
        variables, perms, us = self.variables, self._perms(), self.us[:1]

        def dense(gs):
            return [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in gs]

        def step():
            customs, autos, orders = [], [], []
            for u in us:
                with tf.GradientTape() as tape:
                    for x in diff:
                        tape.watch(x)
                    y = self.decorated(*self.args)
                got = dense(tape.gradient(tf.nest.flatten(y), diff + variables, output_gradients=u,
                                          unconnected_gradients=tf.UnconnectedGradients.NONE))
                customs.append([None if j < len(diff) and self.diff_idx[j] in self.overwritten else g
                                for j, g in enumerate(got)])
            grad_fn = None
            for perm in perms:
                if grad_fn is None or self.one_shot:  # a grad fn callable once: a forward per call
                    _, grad_fn = self.forward(*self.args)
                grads, _ = self._call_grad_fn(grad_fn, us[0], [variables[i] for i in perm])
                orders.append(dense(grads))
            return customs, autos, orders

        customs, _, orders = tf.function(step)()
        as_np = lambda gs: [_to_numpy(g) for g in gs]  # noqa: E731
        return V.Measurements(self.vargs, [[np.asarray(u) for u in p] for p in us],
                              [as_np(c) for c in customs], [self._autodiff(u) for u in us],
                              orders=[(p, as_np(o)) for p, o in zip(perms, orders)],
                              mode="tf.function")

    def _straight_through(self, em: V.Measurements, eager: GradientReport) -> GradientReport | None:
        """The custom gradient compared with autodiff of the forward with its quantising ops
        relaxed to the identity (`_Relaxed`): equal on every argument and probe is a
        straight-through estimator (Keras's int8/int4/float8 layers: the forward rounds its
        input at an abs-max scale, the grad fn is the float product's gradient). None otherwise."""
        relax = _Relaxed(self.forward)
        try:
            tape = tf.GradientTape(persistent=True)
            with tape, self.draws, relax:
                for i in self.diff_idx:
                    tape.watch(self.flat_in[i])
                ys = tf.nest.flatten(self.forward(*self.args)[0])
            if not any(n in _QUANTISING for n in relax.used) or len(ys) != len(self.flat_y) or any(
                    tuple(tf.convert_to_tensor(a).shape) != tuple(tf.convert_to_tensor(b).shape)
                    for a, b in zip(ys, self.flat_y)):
                return None
            autos = [[_to_numpy(g) for g in tape.gradient(ys, self._targets(), output_gradients=u,
                                                           unconnected_gradients=tf.UnconnectedGradients.ZERO)]
                     for u in self.us]
        except Exception:  # the relaxed forward does not run (an integer op after the cast)
            return None
        floor = V.SCALE_FLOOR * max([V.norm(g) for gs in autos for g in gs if g is not None] + [0.0])
        # A stopped gradient (None for a quantiser's scale) keeps the verdict it has as a stop.
        wrong = {(a.name, a.kind) for a in eager.args if a.verdict == "mismatch"}
        for customs, relaxed in zip(em.customs, autos):
            for arg, c, a in zip(self.vargs, customs, relaxed):
                if c is None and (arg.name, arg.kind) not in wrong:
                    continue
                if c is None or a is None or not V.finite(c) or np.shape(c) != np.shape(a) \
                        or not V.close(c, a, arg, self.opts, floor)[0]:
                    return None
        ops = ", ".join(f"`{n}`" for n in relax.used)
        detail = f"straight-through estimator: matches autodiff of the forward with {ops} relaxed to the identity"
        args = [replace(a, verdict="intentional", detail=detail) if a.verdict == "mismatch" else a for a in eager.args]
        return replace(eager, verdict="intentional", detail=detail, args=args)

    def _quantised_gradient(self, em: V.Measurements, eager: GradientReport) -> GradientReport | None:
        """A grad fn that rounds the gradient it returns to an 8-bit float format (float8 training:
        Keras's `quantize_and_dequantize` of the upstream in float8_e5m2) is intentional when,
        with those casts relaxed to the identity, it equals autodiff on every mismatched argument
        and probe. Only such casts are relaxed: a clip or a round in a grad fn stays what it is."""
        wrong = {(a.name, a.kind) for a in eager.args if a.verdict == "mismatch"}
        relax = _Relaxed(self.forward, float8_casts_only=True)
        try:
            with self.draws, relax:
                customs = [self._custom(u) for u in self.us]
        except Exception:
            return None
        finally:
            self._back_to_first_upstream()
        if "cast" not in relax.used and "saturate_cast" not in relax.used:
            return None
        for cs, autos in zip(customs, em.autos):
            for arg, c, a in zip(self.vargs, cs, autos):
                if (arg.name, arg.kind) not in wrong:
                    continue
                if c is None or a is None or not V.finite(c) or np.shape(c) != np.shape(a) \
                        or not V.close(c, a, arg, self.opts, 0.0)[0]:
                    return None
        ops = " and ".join(f"`{n}`" for n in relax.used)
        detail = (f"quantised gradient: matches autodiff with the grad fn's 8-bit float quantiser ({ops}) "
                  "relaxed to the identity (float8 training)")
        args = [replace(a, verdict="intentional", detail=detail) if a.verdict == "mismatch" else a for a in eager.args]
        return replace(eager, verdict="intentional", detail=detail, args=args)

    def _sorted_key_order(self, em: V.Measurements, eager: GradientReport) -> GradientReport | None:
        """A dict output whose keys were written in another order than sorted: TensorFlow passes
        the grad fn its upstreams in sorted-key order (`tf.nest.flatten`). A grad fn that equals
        autodiff on every probe once given them in the dict's written order names its
        upstreams in that order: said so, with both orders. None otherwise."""
        written, names = _written_order(self.y)
        if written is None:
            return None
        wrong = {(a.name, a.kind) for a in eager.args if a.verdict == "mismatch"}
        try:
            for u, autos in zip(self.us, em.autos):
                customs = self._custom([u[i] for i in written])
                for arg, c, a in zip(self.vargs, customs, autos):
                    if (arg.name, arg.kind) not in wrong:
                        continue
                    if c is None or a is None or not V.finite(c) or np.shape(c) != np.shape(a) \
                            or not V.close(c, a, arg, self.opts, 0.0)[0]:
                        return None
        except Exception:  # upstreams of other shapes in the other order
            return None
        finally:
            self._back_to_first_upstream()
        given = ", ".join(names[i] for i in range(len(names)))
        detail = (f"the grad fn takes its upstreams in the dict's written order "
                  f"({', '.join(names[i] for i in written)}), but TensorFlow passes them in sorted-key order "
                  f"({given}): given them in the written order it matches autodiff")
        args = [replace(a, detail=f"{a.detail}: {detail}") if a.verdict == "mismatch" else a for a in eager.args]
        return replace(eager, detail=f"{eager.detail}: {detail}", args=args)

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

    # ------------------------------------------------------------------ higher order
    def _tangents(self, targets):
        out = []
        for t in targets:
            t = tf.convert_to_tensor(t)
            z = self.rng.standard_normal(t.shape.as_list())
            if t.dtype.is_complex:
                z = z + 1j * self.rng.standard_normal(t.shape.as_list())
            out.append(tf.constant(z, dtype=t.dtype))
        return out

    def _second_order(self) -> V.Measurements:
        """Hessian-vector products d/dθ <VJP(u), v> by nested tapes: through TensorFlow's
        custom-gradient machinery (the grad fn differentiated, or its own custom gradient
        used: the documented higher-order pattern) against autodiff of the undecorated forward."""
        diff = [self.flat_in[i] for i in self.diff_idx]
        targets = diff + self.variables

        def hvp(fn, u, vs):
            with tf.GradientTape() as outer:
                for x in diff:
                    outer.watch(x)
                with tf.GradientTape() as inner:
                    for x in diff:
                        inner.watch(x)
                    out = fn(*self.args)
                    y = out[0] if fn is self.forward else out
                g = inner.gradient(tf.nest.flatten(y), targets, output_gradients=u,
                                   unconnected_gradients=tf.UnconnectedGradients.ZERO)
                total = tf.add_n([tf.reduce_sum(tf.cast(gi, vi.dtype) * vi)
                                  for gi, vi in zip(g, vs)])
            return [_to_numpy(h) for h in outer.gradient(
                total, targets, unconnected_gradients=tf.UnconnectedGradients.NONE)]

        customs, autos, ups = [], [], []
        for u in self.us[:2]:
            vs = self._tangents(targets)
            try:
                customs.append(hvp(self.decorated, u, vs))
            except Exception as e:
                raise _Structural(f"second derivative: {first_line(e)}") from e
            autos.append(hvp(self.forward, u, vs))
            ups.append([np.asarray(x) for x in u])
        return V.Measurements(self.vargs, ups, customs, autos, mode="second-order")

    def _forward_mode(self) -> tuple[V.Measurements, float]:
        """JVPs through `tf.autodiff.ForwardAccumulator`: of the decorated function called as a
        `tf.function` (where TensorFlow builds the JVP from the grad fn by transposing it at an
        upstream of ones) against the undecorated forward's. Also returns the duality error
        |<u, JVP(t)> - <VJP(u), t>| / (|u| |JVP(t)|), which is ~0 for any grad fn linear in its
        upstream, right or wrong."""
        diff = [self.flat_in[i] for i in self.diff_idx]
        primals = diff + self.variables
        ts = self._tangents(primals)

        # Called through a `tf.function` (as a compiled model step calls it), the function is
        # one op to the accumulator, whose JVP TensorFlow builds by transposing its gradient:
        # the custom one. (Traced inline, the accumulator differentiates the inner ops.)
        op = tf.function(self.decorated)
        try:
            with tf.autodiff.ForwardAccumulator(primals, ts) as acc:
                y = op(*self.args)
            jvp_c = [_to_numpy(acc.jvp(yi, unconnected_gradients=tf.UnconnectedGradients.ZERO))
                     for yi in tf.nest.flatten(y)]
        except Exception as e:
            raise _Structural(f"forward mode: {first_line(e)}") from e
        with tf.autodiff.ForwardAccumulator(primals, ts) as acc:
            y, _ = self.forward(*self.args)
        jvp_a = [_to_numpy(acc.jvp(yi, unconnected_gradients=tf.UnconnectedGradients.ZERO))
                 for yi in tf.nest.flatten(y)]
        names = ["y"] if len(jvp_a) == 1 else [f"y[{i}]" for i in range(len(jvp_a))]
        outs = [V.Arg(n, "output", tuple(np.shape(a)), np.asarray(a).dtype.name)
                for n, a in zip(names, jvp_a)]
        # Duality with the custom VJP at the first upstream.
        u = [np.asarray(x) for x in self.us[0]]
        vjp = self._custom(self.us[0])
        lhs = sum(complex(np.vdot(ui, ji)) for ui, ji in zip(u, jvp_c) if ji is not None)
        rhs = sum(complex(np.vdot(g, np.asarray(t))) for g, t in zip(vjp, ts) if g is not None)
        scale = max(np.sqrt(sum(V.norm(x) ** 2 for x in u)) *
                    np.sqrt(sum(V.norm(j) ** 2 for j in jvp_c)), 1e-30)
        return V.Measurements(outs, [u], [jvp_c], [jvp_a], mode="forward"), abs(lhs - rhs) / scale

    def _elementwise(self) -> bool:
        """One input, one output of its shape, no variables: an activation, whose second
        derivative costs two more passes of its size."""
        if len(self.diff_idx) != 1 or self.variables or len(self.flat_y) != 1:
            return False
        x, y = self.flat_in[self.diff_idx[0]], tf.convert_to_tensor(self.flat_y[0])
        return x.dtype.is_floating and y.dtype == x.dtype and tuple(y.shape) == tuple(x.shape)

    def _second_order_note(self, report: GradientReport, modes: dict) -> None:
        """By default, for an elementwise forward: the second derivative TensorFlow takes through
        the grad fn against autodiff's. A first-order custom gradient that drops it (NumPy, a
        stop_gradient, a constant) trains right and silently breaks what differentiates twice
        (gradient penalties, Hessian-vector products): said on the verdict, not made it."""
        try:
            second = V.decide(self._second_order(), None, self.opts)
        except _Structural as e:
            modes["second-order"] = "error"
            report.detail += f"; note: {e} (the first derivative is right; differentiating it again fails)"
            return
        except Exception:
            return
        modes["second-order"] = second.verdict
        if second.verdict == "mismatch":
            report.detail += (f"; note: second derivative: {second.detail} (the first derivative is right; "
                              "what differentiates twice, a gradient penalty, gets the wrong one)")

    def _higher_order(self, report: GradientReport, modes: dict) -> GradientReport:
        """Second derivative and forward mode: with `order=2`, or when the VJP check found a
        grad fn that is not linear in its upstream (clipping, declared intentional)."""
        nonlinear = report.verdict == "intentional" and (
            "clipping" in report.detail or "declared" in report.detail)
        if self.order < 2 and report.verdict == "match" and self._elementwise():
            self._second_order_note(report, modes)
        if report.verdict not in ("match", "intentional") or not (self.order >= 2 or nonlinear):
            return report
        if self.order >= 2 and report.verdict == "match":
            # (After a deliberately different first derivative the second differs too.)
            second = V.decide(self._second_order(), None, self.opts)
            modes["second-order"] = second.verdict
            if second.verdict in ("mismatch", "error"):
                return self._report(second.verdict, f"second derivative: {second.detail} "
                                    f"(first order: {report.detail})", second.args,
                                    second.reference, second.max_rel_error, modes)
        m, duality = self._forward_mode()
        fwd = V.decide(m, None, self.opts)
        modes["forward"] = fwd.verdict
        linear = duality <= 10 * V.rtol_for(self.vargs[0].dtype, self.opts)
        if fwd.verdict not in ("mismatch", "error") or (report.verdict == "intentional" and linear):
            return report
        why = ("" if linear else ": TensorFlow builds forward-mode JVPs by transposing the grad fn "
               "at an upstream of ones, which is wrong for a grad fn not linear in its upstream")
        detail = f"forward mode (tf.autodiff.ForwardAccumulator): {fwd.detail}{why}"
        if report.verdict == "intentional" and self.order < 2:
            report.detail += f"; {detail}"
            return report
        return self._report("mismatch", f"{detail} (reverse mode: {report.detail})", report.args,
                            "autodiff", fwd.max_rel_error, modes)

    # ------------------------------------------------------------------ the report's plot
    def line_sample(self, name: str, kind: str, points: int = 41) -> dict | None:
        """The custom gradient and autodiff of one argument along the line x0 + t·d through the
        checked point, for the HTML report's plot: at each t the forward runs again under a tape
        (a fresh grad fn each time, as TensorFlow calls it), and both VJPs of the first upstream
        are projected on d, so the autodiff curve is d/dt <u, f(x0 + t·d)>. d is where the two
        differ at x0 (c - a, scaled to a largest entry of 1), so the gap at t = 0 is the largest
        a line can show. Also the two VJPs at x0 per element (the first 256). None for an argument
        that is not real floating point, or when autodiff gives no reference."""
        k = next((i for i, a in enumerate(self.argl) if a.name == name and a.kind == kind), None)
        if k is None or not self.argl[k].dtype.is_floating:
            return None
        arg, u = self.argl[k], self.us[0]
        c0, a0 = self._custom(u)[k], self._autodiff(u)[k]
        if a0 is None or self.autodiff_blind:
            return None
        c0 = np.zeros(a0.shape) if c0 is None else V.as64(c0)
        a0 = V.as64(a0)
        if c0.shape != a0.shape:  # a broadcast scalar gradient: its own entries are what it returned
            c0 = np.broadcast_to(c0, a0.shape) if c0.size == 1 else None
        if c0 is None:
            return None
        d = c0 - a0
        if not np.all(np.isfinite(d)) or not np.any(d):
            d = np.random.default_rng(self.seed + 3).standard_normal(a0.shape)
        d = d / max(float(np.max(np.abs(d))), 1e-300) if d.size else d
        if arg.kind == "input":
            pos = self.diff_idx[arg.index]
            x0 = tf.convert_to_tensor(self.flat_in[pos])
        else:
            pos, x0 = None, self.variables[arg.index].read_value()
        top = float(np.max(np.abs(x0.numpy()))) if x0.shape.num_elements() else 0.0
        span = 0.25 * max(1.0, top)
        ts = np.linspace(-span, span, points)
        step = lambda t: tf.constant(t * d, dtype=x0.dtype)  # noqa: E731

        def both(t):
            flat = list(self.flat_in)
            if pos is not None:
                flat[pos] = x0 + step(t)
            else:
                self.variables[arg.index].assign(x0 + step(t))
            args = tf.nest.pack_sequence_as(list(self.inputs), flat)
            with tf.GradientTape() as tape:
                for i in self.diff_idx:
                    tape.watch(flat[i])
                y, grad_fn = self.forward(*args)
            targets = [flat[i] for i in self.diff_idx] + self.variables
            auto = tape.gradient(tf.nest.flatten(y), targets, output_gradients=u,
                                 unconnected_gradients=tf.UnconnectedGradients.ZERO)[k]
            custom = self._call_grad_fn(grad_fn, u, self.variables)[0][k]
            return [None if g is None else float(np.sum(np.broadcast_to(V.as64(_to_numpy(g)), d.shape) * d))
                    for g in (custom, auto)]

        curves: list[list] = [[], []]
        try:
            for t in ts:
                for curve, value in zip(curves, both(float(t))):
                    curve.append(_short(value))
        finally:
            if pos is None:
                self.variables[arg.index].assign(x0)

        def head(a):
            return [_short(v) for v in np.ravel(a)[:256]]

        return {"arg": arg.name, "kind": arg.kind, "dtype": arg.dtype.name, "shape": list(arg.shape),
                "t": [_short(t) for t in ts], "custom": curves[0], "autodiff": curves[1],
                "elements": {"custom": head(c0), "autodiff": head(a0), "total": int(a0.size)}}

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
        em = self._eager()
        eager = V.decide(em, self, self.opts)
        if eager.verdict == "mismatch" and not self.opts.intentional:
            eager = self._straight_through(em, eager) or self._quantised_gradient(em, eager) or eager
        if eager.verdict == "mismatch":
            eager = self._sorted_key_order(em, eager) or eager
        modes = {"eager": eager.verdict}
        graph = None
        if self.graph and eager.verdict != "error":
            try:
                gm = self._graph()
                if V.same_gradients(gm, em, self.opts):
                    graph = eager  # tf.function computes what eager does: the same verdict
                else:
                    # Something differs under tf.function: judge it on its own numbers (the
                    # small-upstream probe is eager, so it cannot speak for this mode).
                    graph = V.decide(gm, _FiniteDifferencesOnly(self), self.opts)
            except Exception as e:
                # Failing under tf.function is what training (fit, a compiled step) hits first,
                # whatever eager mode says (a mismatch included: NumPy in a grad fn runs eagerly;
                # an inconclusive one too: the forward ran eagerly on these very inputs).
                if eager.verdict in ("match", "intentional", "mismatch", "skipped"):
                    modes["tf.function"] = "error"
                    return self._report("error", f"{self._graph_failure(e)} (eager: "
                                        f"{eager.detail})", eager.args, modes=modes)
            if graph is not None:
                modes["tf.function"] = graph.verdict
        report = V.combine(eager, None if graph is eager else graph)
        report = self._higher_order(report, modes)
        dropped = self._dropped_integer_gradients()
        if dropped and report.verdict in ("match", "intentional"):
            report.verdict, report.detail = "mismatch", f"{dropped} ({report.detail})"
        report.seed, report.function, report.modes = self.seed, self.fn_name, modes
        report.modes = modes
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
                   intentional=False, graph=True, order=1, complex_probe=False,
                   float64_rerun=True, half_probe: str | None = None, own_inputs=False,
                   replay_draws=True, overwritten=()) -> GradientReport:
    """Checks the custom gradient of `fn` at `inputs` against TensorFlow autodiff.

    `fn` is a `tf.custom_gradient`-decorated function (or the raw forward returning
    `(y, grad_fn)`). `variables`, if given, replaces the trainable variables discovered by
    watching the forward. `intentional=True` (from a `# cglint: intentional` comment) turns a
    mismatch into `intentional`. With `graph` (the default) the comparison and the variable-order
    probe also run under `tf.function`, where eager-only code fails (`error`) and `variables`
    comes sorted by name. `order=2` also compares the second derivative (nested tapes) and the
    forward-mode JVP with autodiff's. `complex_probe` re-runs with complex inputs when the forward
    accepts them. `half_probe` ("float16"/"bfloat16", for modules that train in mixed precision)
    re-runs with float32 inputs cast to it, where a grad fn that fixes float32 returns a gradient in
    the wrong dtype. `replay_draws` lets a random forward be re-run from TensorFlow's seed, which
    resets its random kernels (not for a traced program's own streams). `own_inputs` says the inputs are the values the user's code passes: a gradient
    that breaks only far outside them (the wide probe) is then a note on the verdict, not the verdict. A float32 match near the float32 noise floor is re-run in float64 when the
    function accepts it (`float64_rerun`). `overwritten`: positions of flattened inputs that are
    Keras variables marked `overwrite_with_gradient` (float8 training's scales and amax
    histories): what the grad fn returns for them is the value Keras's optimizer assigns to the
    variable, not a gradient, and is not compared. `report.modes` says what ran and its verdict.
    Never raises for problems in the checked code: they become the verdict.
    """
    checker = _Checker(fn, inputs, rtol, atol, seed, probes, variables, intentional, graph,
                       order, replay_draws, overwritten)
    try:
        report = _name_overwritten(checker.run(), checker)
    except (_Structural, _NotRunnable) as e:
        other = _other_graph(e)
        if other is not None or isinstance(e, _NotRunnable):
            return V.skipped(other or str(e), seed, getattr(checker, "fn_name", ""))
        return checker._report("error", str(e), [])
    except Exception as e:  # a failure of the checker itself must not become a traceback
        return V.skipped(f"the check itself failed: {first_line(e)}", seed,
                         getattr(checker, "fn_name", ""))
    kw = dict(rtol=rtol, atol=atol, seed=seed, probes=probes, variables=variables,
              intentional=intentional, graph=False, order=1, complex_probe=False,
              float64_rerun=False, replay_draws=replay_draws)
    if float64_rerun and V.near_noise_floor(report):
        report = _rerun_float64(fn, inputs, report, checker, kw)
    if complex_probe and report.verdict == "match":
        report = _complex_probe(fn, inputs, report, checker, kw)
    if half_probe and report.verdict in ("match", "intentional"):
        report = _half_probe(fn, inputs, report, kw, half_probe)
    if float64_rerun and ((report.verdict, report.reference) == ("match", "autodiff") or _both_not_finite(report)):
        report = _float64_reference(fn, report, checker)
    if float64_rerun and report.verdict == "match":
        report = _wide_probe(fn, inputs, report, kw, own_inputs)
    if report.verdict == "mismatch" and float64_rerun:  # the top-level check, not a re-run's
        report.sample = _sample(checker, report)
    return report


def _short(x) -> float | None:
    """A number for the report's JSON: 6 significant digits; None for NaN or inf."""
    if x is None or not np.isfinite(x):
        return None
    return float(f"{float(x):.6g}")


def _sample(checker: "_Checker", report: GradientReport) -> dict | None:
    """`line_sample` for the argument the mismatch is worst in (None if it cannot be taken)."""
    ranked = sorted((a for a in report.args if a.verdict == "mismatch"),
                    key=lambda a: -(a.max_rel_error if a.max_rel_error is not None else float("inf")))
    if not getattr(checker, "argl", None):
        return None
    for arg in ranked:  # the worst argument a line can be drawn for (a misshapen gradient has none)
        try:
            sample = checker.line_sample(arg.name, arg.kind)
        except Exception:  # a plot is a bonus: the verdict stands without it
            continue
        if sample is not None:
            sample["seed"], sample["mode"] = checker.seed, "eager"
            return sample
    return None


def _both_not_finite(report: GradientReport) -> bool:
    return report.verdict == "skipped" and "are both not finite here" in (report.detail or "")


_LOW_PRECISION = (tf.float16, tf.bfloat16, tf.float32)
_UNSTABLE_RTOL = 0.1  # rounding never explains 10%; underflow, overflow and cancellation do


def _float64_reference(fn, report: GradientReport, checker: "_Checker") -> GradientReport:
    """Autodiff of the same forward in float64, at the same inputs, against the custom gradient
    in its own precision. A custom gradient that underflows, overflows or cancels in float32
    is often matched by float32 autodiff of the same formula (both wrong, or both NaN), which
    is no evidence that it is right: many custom gradients exist to be stable where autodiff
    is not. Only for forwards without variables (they cannot be recast) that compute in float64
    when given float64 inputs."""
    try:
        if getattr(checker, "variables", None) or not checker.diff_idx:
            return report
        low = [checker.flat_in[i] for i in checker.diff_idx]
        if not any(x.dtype in _LOW_PRECISION for x in low):
            return report
        cast = [tf.cast(x, tf.float64) if _is_float(x.dtype) and i not in checker.python_numbers else x
                for i, x in enumerate(checker.flat_in)]
        args = tf.nest.pack_sequence_as(list(checker.inputs), cast)
        targets = [cast[i] for i in checker.diff_idx]
        with tf.GradientTape() as tape:
            for t in targets:
                tape.watch(t)
            out = checker.forward(*args)
        ys = [tf.convert_to_tensor(y) for y in tf.nest.flatten(out[0])]
        if any(_is_float(y.dtype) and y.dtype != tf.float64 for y in ys) or len(ys) != len(checker.us[0]):
            return report  # the forward computes in its own precision whatever it is given
        u64 = [tf.cast(u, y.dtype) if _is_float(y.dtype) else None for u, y in zip(checker.us[0], ys)]
        pairs = [(y, u) for y, u in zip(ys, u64) if u is not None]
        refs = tape.gradient([y for y, _ in pairs], targets, output_gradients=[u for _, u in pairs])
        customs = checker._custom(checker.us[0])
        autos = checker._autodiff(checker.us[0])
    except Exception:  # no float64 path: the first verdict stands
        return report
    limit = max(_UNSTABLE_RTOL, checker.opts.rtol or 0.0)
    for arg, c, a, ref in zip(checker.argl, customs, autos, refs):
        if ref is None:
            continue
        r = _to_numpy(ref)
        if not np.all(np.isfinite(r)):
            continue
        if c is None:
            continue
        if not V.finite(c):
            detail = (f"d/{arg.name} is not finite ({V._count_nonfinite(c)}) in {arg.dtype.name} where float64 "
                      f"autodiff of the same forward is finite: the custom gradient overflows or underflows "
                      f"(float32 autodiff shares the failure, so it is no reference here)")
            err = float("inf")
        else:
            scale = max(V.norm(r), 1e-30)
            err = float(np.linalg.norm((V.as64(c) - r).ravel())) / scale
            shared = a is not None and V.finite(a) and float(np.linalg.norm((V.as64(a) - r).ravel())) / scale > _UNSTABLE_RTOL
            if err <= limit or not (shared or (a is not None and not V.finite(a))):
                continue  # within tolerance, or a formula error float32 autodiff already measured
            detail = (f"d/{arg.name} off by {V.pct(err)} vs float64 autodiff of the same forward "
                      f"({arg.dtype.name} autodiff shares the error: underflow, overflow or cancellation)")
        fixed = GradientReport(**{**report.__dict__})
        fixed.verdict, fixed.detail, fixed.max_rel_error = "mismatch", detail, err
        fixed.reference = "float64-autodiff"
        fixed.modes = {**report.modes, "float64": "mismatch"}
        return fixed
    return report


def _recast(inputs, dtype_map):
    """`inputs` with floating tensors cast by `dtype_map` (float32 -> ...), or None."""
    out = []
    for x in inputs:
        if isinstance(x, tf.Variable):
            return None
        if tf.is_tensor(x) or isinstance(x, np.ndarray):
            t = tf.convert_to_tensor(x)
            if t.dtype in dtype_map:
                t = dtype_map[t.dtype](t)
            out.append(t)
        else:
            out.append(x)
    return out


def _rerun_float64(fn, inputs, report, checker, kw) -> GradientReport:
    """One wrong Jacobian entry in 10^4 hides under float32 rounding; in float64 the margin is
    ~10^10. Only when the function takes float64 inputs (variables cannot be recast)."""
    if any(v.dtype != tf.float64 for v in getattr(checker, "variables", [])):
        return report
    cast = _recast(inputs, {tf.float32: lambda t: tf.cast(t, tf.float64)})
    if cast is None or forward_failure(fn, *cast) is not None:
        return report
    again = check_gradient(fn, *cast, **kw)
    worst = V.fmt(report.max_rel_error or 0.0)
    if again.verdict == "mismatch":
        again.detail = (f"in float64 (the float32 comparison, {worst}, was at its noise floor): "
                        f"{again.detail}")
        again.modes = {**report.modes, "float64": "mismatch"}
        return again
    if again.verdict == "match":
        report.detail += f" (float32 at its noise floor; float64 re-run: {again.detail})"
        report.modes = {**report.modes, "float64": "match"}
    return report


_WIDE = 100.0  # |x| where exp overflows float32 (88.7) and naive log(1 + e^x) / e^x / (1 + e^x) fail


def _wide_probe(fn, inputs, report, kw, own_inputs=False) -> GradientReport:
    """The same check at inputs of large magnitude (the sample rescaled to |x| up to 100), where a
    forward written to be stable stays finite: a grad fn that is NaN or inf there (e^x / (1 + e^x)
    for a stable softplus) poisons training once activations grow. Claimed only for a non-finite
    custom gradient where the reference is finite; a smaller relative error there may be
    harmless underflow (a gradient of 1e-44 returned as 0)."""

    def widen(t):
        top = float(tf.reduce_max(tf.abs(t))) if tf.size(t) else 0.0
        return t * tf.cast(_WIDE / top, t.dtype) if top > 0 else t

    wide = _recast(inputs, {tf.float32: widen, tf.float64: widen})
    if wide is None or all(w is x for w, x in zip(wide, inputs)):
        return report
    try:
        forward, _ = resolve(fn)
        ys = [tf.convert_to_tensor(y) for y in tf.nest.flatten(forward(*wide)[0])]
        if not all(bool(tf.reduce_all(tf.math.is_finite(y))) for y in ys if _is_float(y.dtype)):
            return report  # the forward itself overflows there: nothing to say of its gradient
    except Exception:
        return report
    again = check_gradient(fn, *wide, **{**kw, "probes": 1})
    if again.verdict == "mismatch" and any(
            a.verdict == "mismatch" and "is not finite" in a.detail for a in again.args):
        where = f"at inputs of large magnitude (|x| up to {_WIDE:.0f}), where the forward is finite"
        if own_inputs:
            # Measured right at the values the user's code passes; the rescaled sample is not
            # evidence that the code ever sees such values: said, not claimed.
            report.detail += f"; note: {where}, {again.detail}"
            report.modes = {**report.modes, "wide": "mismatch"}
            return report
        again.detail = f"{where}: {again.detail} (at the first sample it {report.detail})"
        again.modes = {**report.modes, "wide": "mismatch"}
        return again
    report.modes = {**report.modes, "wide": again.verdict}
    return report


def _half_probe(fn, inputs, report, kw, dtype: str) -> GradientReport:
    """The module trains in mixed precision: the same check with float32 inputs cast to float16
    (or bfloat16), as a mixed policy's layers hand them over. Only a gradient returned in another
    dtype than its input is claimed there; values were compared in float32 already."""
    half = getattr(tf, dtype)
    cast = _recast(inputs, {tf.float32: lambda t: tf.cast(t, half)})
    if cast is None or all(c is x for c, x in zip(cast, inputs)) or forward_failure(fn, *cast) is not None:
        return report
    again = check_gradient(fn, *cast, **{**kw, "probes": 2})
    report.modes = {**report.modes, dtype: again.verdict}
    if again.verdict == "mismatch" and any(V.WRONG_DTYPE in a.detail for a in again.args):
        again.detail = f"with {dtype} inputs (the module uses mixed precision): {again.detail}"
        again.modes = report.modes
        return again
    return report


def _complex_probe(fn, inputs, report, checker, kw) -> GradientReport:
    """Complex inputs, when the forward takes them: a grad fn right for real inputs can still
    miss the conjugate TensorFlow's convention needs (grad = conj(df/dz) * upstream)."""
    rng = np.random.default_rng(checker.seed + 1)

    def to_complex(t):
        imag = tf.constant(0.5 * rng.standard_normal(t.shape.as_list()), t.dtype)
        return tf.complex(t, imag)

    cast = _recast(inputs, {tf.float32: to_complex, tf.float64: to_complex})
    if cast is None or all(tf.is_tensor(a) and not a.dtype.is_complex for a in cast) or \
            forward_failure(fn, *cast) is not None:
        return report
    again = check_gradient(fn, *cast, **kw)
    report.modes = {**report.modes, "complex": again.verdict}
    if again.verdict == "mismatch":
        again.detail = (f"with complex inputs: {again.detail}; real inputs match, so the grad fn "
                        "probably misses the conjugate (TensorFlow's convention: "
                        "grad = conj(df/dz) * upstream, tensorflow#57357)")
        again.modes = report.modes
        return again
    return report


def forward_failure(fn, *inputs) -> str | None:
    """None if the undecorated forward runs on `inputs` and returns `(y, grad_fn)`, else why
    not (the exception's first line)."""
    forward, _ = resolve(fn)
    try:
        out = forward(*inputs)
    except Exception as e:
        return first_line(e)
    if isinstance(out, (tuple, list)) and len(out) == 2 and callable(out[1]):
        return None
    return f"the forward must return (y, grad_fn); it returned {type(out).__name__}"


_OVERWRITTEN = ("not a gradient: Keras assigns what the grad fn returns for it to the variable "
                "(`overwrite_with_gradient`)")


def _name_overwritten(report: GradientReport, checker) -> GradientReport:
    """The overwritten variables' entries say what they are (the check saw them as stopped)."""
    if not checker.overwritten:
        return report
    names = {a.name for a, i in zip(checker.argl, checker.diff_idx) if i in checker.overwritten}
    args = [replace(a, verdict="intentional", detail=_OVERWRITTEN, max_rel_error=None) if a.name in names else a
            for a in report.args]
    said = f"{', '.join(sorted(names))}: {_OVERWRITTEN}"
    detail = report.detail
    if report.verdict == "intentional" and all(a.verdict != "intentional" or a.name in names for a in args):
        detail = said
    else:  # the stop the check saw, said as what it is
        stopped = re.match(r"(.*?)(?:; )?gradient stopped: the grad fn returns None for ([\w, ]+)$", detail or "")
        if stopped and set(stopped.group(2).split(", ")) <= names:
            detail = f"{stopped.group(1)}; {said}" if stopped.group(1) else said
    return replace(report, args=args, detail=detail)


def _written_order(y) -> tuple[list[int] | None, list[str]]:
    """(for each output leaf in the order the code wrote its dicts' keys, its position in
    `tf.nest.flatten(y)`, or None when the two orders agree; each flattened leaf's name)."""
    flat = tf.nest.flatten(y)
    if len(flat) < 2:
        return None, []
    positions = tf.nest.pack_sequence_as(y, list(range(len(flat))))  # keeps the dicts' own key order
    names = [""] * len(flat)
    written: list[int] = []

    def walk(node, path):
        if isinstance(node, dict):
            for key in node:  # the written order
                walk(node[key], f"{path}[{key!r}]" if path else str(key))
        elif isinstance(node, (list, tuple)):
            for i, item in enumerate(node):
                walk(item, f"{path}[{i}]" if path else f"[{i}]")
        else:
            names[node] = path
            written.append(node)

    try:
        walk(positions, "")
    except Exception:
        return None, []
    if written == sorted(written) or len(written) != len(flat):
        return None, names
    return written, names


def forward_footprint(fn, *inputs) -> tuple[int, int]:
    """(bytes, ops): what one run of the undecorated forward makes, summed over every op it runs,
    with no tape recording it. A check's tape keeps about this much (an eager `tf.while_loop`
    runs its body op by op, each iteration's tensors kept for autodiff), where the program's own
    run under the custom gradient keeps only its outputs."""
    from tensorflow.python.framework import op_callbacks

    forward, _ = resolve(fn)
    seen = [0, 0]

    def count(op_type, inputs, attrs, outputs, op_name=None, graph=None):
        seen[1] += 1
        for t in outputs or ():
            n = t.shape.num_elements() if t.shape.is_fully_defined() else None
            seen[0] += (n or 0) * (t.dtype.size if t.dtype != tf.string else 0)
        return None

    op_callbacks.add_op_callback(count)
    try:
        forward(*inputs)
    finally:
        op_callbacks.remove_op_callback(count)
    return seen[0], seen[1]


def forward_runs(fn, *inputs) -> bool:
    """True if the undecorated forward runs on `inputs` and returns `(y, grad_fn)`."""
    return forward_failure(fn, *inputs) is None


# TensorFlow's own custom-gradient contract, as its messages word it: failing on every input
# the same way is the function's fault, not the inputs'.
_CONTRACT = re.compile(r"custom_gradient|grad_fn|compatible with tf\.function|"
                       r"must return zero or more Tensors|must return \(y, grad_fn\)")


# Errors that say the inputs were of the wrong kind (integer indices, booleans, structures):
# the search's float tensors were wrong, not the forward.
_WANTS_OTHER_INPUTS = re.compile(r"expected to be a (u?int|bool|string)|indices|must be (an )?int|"
                                 r"not subscriptable|missing \d+ required|unexpected keyword|iterat|"
                                 r"object is not|has no attribute|unhashable|Only integers")


def no_inputs_report(failures: list, seed: int = 0) -> GradientReport:
    """The verdict when no candidate input ran the forward: `error` with TensorFlow's message
    when every candidate failed with the same custom-gradient contract error, else `skipped`."""
    failures = [f for f in failures if f]
    if contract := [f for f in failures if _CONTRACT.search(f)]:
        # The forward ran to its return on these inputs and broke TensorFlow's contract there
        # (other candidates may have failed earlier, on their shapes): the function's fault.
        every = "every input" if len(contract) == len(failures) else "every input it runs on"
        return GradientReport(verdict="error", seed=seed, detail=f"the forward fails on {every}: {contract[0]}")
    if len(failures) > 1 and len(set(failures)) == 1 and not _WANTS_OTHER_INPUTS.search(failures[0]):
        # The same error whatever the shape: the forward itself is broken (a constant of the
        # wrong dtype, a misspelt op), not the inputs the search tried.
        return GradientReport(verdict="error", seed=seed,
                              detail=f"the forward fails on every input tried, whatever its shape: {failures[0]}")
    last = f" (last: {failures[-1]})" if failures else ""
    return V.skipped(f"no inputs could be built: the forward failed on all {len(failures)} "
                     f"candidate shapes{last}", seed)


def assert_gradient_matches(fn, *inputs, allow_intentional=False, **kw) -> GradientReport:
    """Raises AssertionError with the report's detail unless the verdict is `match` (or
    `intentional` when `allow_intentional`). Returns the report."""
    report = check_gradient(fn, *inputs, **kw)
    allowed = {"match"} | ({"intentional"} if allow_intentional else set())
    if report.verdict not in allowed:
        raise AssertionError(f"custom gradient {report.verdict}: {report.detail}")
    return report
