"""The in-process half of `cglint trace` and `pytest --cglint`: checks custom gradients where the
user's own code calls them.

Where it hooks in. Every call of a `tf.custom_gradient` function (the decorator, the call form
`tf.custom_gradient(f)`, closures built inside a Keras layer's `call`, methods — TensorFlow's
`Bind` has already bound `self` — and `keras.ops.custom_gradient`, which is
`tf.custom_gradient(f=fun)` on the TensorFlow backend) ends in one of two module-level functions
of `tensorflow/python/ops/custom_gradient.py`, looked up at call time: `_eager_mode_decorator(f,
args, kwargs)` or `_graph_mode_decorator(f, args, kwargs)`, with `f` the user's forward and `args`
the real inputs. Replacing those two names (and `record`, to see the backward functions TensorFlow
records) catches every form without touching decoration, signatures or descriptors, so what the
program sees of its functions is unchanged.

What it does there:

- eager call: the first `calls` calls per function and input signature are checked with
  `cglint.gradcheck.check.check_gradient` on the real inputs (the variables are the real ones the
  forward reads), before the real call proceeds;
- symbolic call (inside `tf.function`, `model.fit`, Keras symbolic building): the signature is
  recorded; a later eager call of a compatible signature checks it, else it is checked at exit
  on random inputs of that signature;
- an exception that TensorFlow's custom-gradient machinery raises for a user function (forward
  contract, `variables` missing, gradient counts, a grad fn that raises) is recorded as an
  `error` with TensorFlow's message and re-raised unchanged.

No side effects: a check runs in its own thread (no user tape records it, no graph being built
captures it, no Keras call context applies), with stdout/stderr silenced at the file-descriptor
level, variable creation refused, and the RNG state the program can see (TensorFlow's op seeds
and global generator, NumPy's and Python's global RNGs) saved and restored. Nothing here raises
into the user's program: a failure of the instrumentation is swallowed.

Events go to a sink (a JSON-lines file per process for `cglint trace`, a list for the pytest
plugin); `cglint.trace.report` turns them into verdicts.
"""

from __future__ import annotations

import atexit
import functools
import gc
import inspect
import json
import linecache
import os
import random
import re
import sys
import threading
import types
from typing import Any, Callable

CG_MODULE = "tensorflow.python.ops.custom_gradient"
_CG_FILE = os.path.join("tensorflow", "python", "ops", "custom_gradient.py")

_tracer: "Tracer | None" = None


def message_of(exc: BaseException, limit: int = 300) -> str:
    """TensorFlow's message, one line: `TypeError: @tf.custom_gradient grad_fn must ...`.
    Errors raised while tracing a tf.function read "in user code: <frames> ... <message>":
    the message is the last line then."""
    from cglint.gradcheck.report import exception_text

    text = exception_text(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return type(exc).__name__
    line = lines[-1] if "in user code:" in text else lines[0]
    msg = line if line.startswith(type(exc).__name__ + ":") else f"{type(exc).__name__}: {line}"
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


def _code(f) -> Any:
    f = getattr(f, "__func__", f)
    f = getattr(f, "python_function", f)  # a tf.function used as the forward: the user's function
    while isinstance(f, functools.partial):
        f = f.func
    return getattr(getattr(f, "__func__", f), "__code__", None)


_LIBRARIES = ("tensorflow", "keras", "tf_keras")
_OWN_DIR = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


@functools.lru_cache(maxsize=1)
def _included(spec: str) -> tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]:
    """`cglint trace --include` (CGLINT_TRACE_INCLUDE, entries separated by os.pathsep): import
    names (`keras`, `keras.src.layers`) as path components under site-packages, and directories."""
    names, dirs = [], []
    for entry in filter(None, spec.split(os.pathsep)):
        if os.sep in entry or os.path.isdir(entry):
            dirs.append(os.path.realpath(entry).rstrip(os.sep) + os.sep)
        else:
            names.append(tuple(entry.split(".")))
    return tuple(names), tuple(dirs)


def is_library(path: str) -> bool:
    """Custom gradients of TensorFlow, Keras and cglint itself are not the user's (Keras is
    often imported after TensorFlow, so this goes by path, not by loaded packages), unless
    `cglint trace --include` names the package or directory: then they are checked too."""
    path = os.path.realpath(path)
    if path.startswith(_OWN_DIR):
        return True
    parts = path.split(os.sep)
    names, dirs = _included(os.environ.get("CGLINT_TRACE_INCLUDE", ""))
    if any(path.startswith(d) for d in dirs):
        return False
    for i in range(len(parts) - 1):
        if parts[i] in ("site-packages", "dist-packages"):
            if any(tuple(parts[i + 1:i + 1 + len(n)]) == n for n in names):
                return False
            if parts[i + 1] in _LIBRARIES:
                return True
    return False


def _is_tensor(x) -> bool:
    return hasattr(x, "dtype") and hasattr(x, "shape") and hasattr(getattr(x, "dtype"), "is_floating")


def _keyword_tensors(args, kwargs) -> list[str]:
    """`name=` for each float tensor passed by keyword, when no positional argument is a tensor."""
    from tensorflow.python.util import nest

    if not kwargs or any(_is_tensor(x) for x in nest.flatten(list(args))):
        return []
    return [f"{k}=" for k, v in kwargs.items()
            if any(_is_tensor(x) and (x.dtype.is_floating or x.dtype.is_complex) for x in nest.flatten(v))]


def signature(args) -> tuple:
    """One entry per flattened positional input: ("tensor", dtype name, shape with None for
    unknown dimensions, or None for unknown rank) for tensors and variables, ("python", type
    name, None) for anything else. Python values are not part of it: a float that changes every
    step must not make every step a new signature to check."""
    # Fast path, taken at every eager call: a flat tuple of eager tensors.
    try:
        return tuple(("tensor", x.dtype.name, x._shape_tuple()) for x in args)
    except (AttributeError, TypeError, ValueError):
        pass
    from tensorflow.python.util import nest

    out = []
    for x in nest.flatten(args):
        if _is_tensor(x):
            try:
                dims = tuple(x.shape.as_list()) if x.shape.rank is not None else None
            except ValueError:
                dims = None
            out.append(("tensor", x.dtype.name, dims))
        else:
            out.append(("python", type(x).__name__, None))
    return tuple(out)


def describe_signature(sig: tuple) -> str:
    parts = []
    for kind, name, shape in sig:
        if kind == "python":
            parts.append(name)
        elif shape is None:
            parts.append(f"{name}[unknown rank]")
        else:
            parts.append(f"{name}[{', '.join('None' if d is None else str(d) for d in shape)}]")
    return "(" + ", ".join(parts) + ")"


def _unknown_dims(sig: tuple) -> int:
    return sum(100 if kind == "tensor" and shape is None else sum(d is None for d in shape or ())
               for kind, _, shape in sig)


def _compatible(general: tuple, concrete: tuple) -> bool:
    """True if every input of `concrete` fits `general` (same dtypes, known dimensions equal)."""
    if len(general) != len(concrete):
        return False
    for (k1, n1, s1), (k2, n2, s2) in zip(general, concrete):
        if (k1, n1) != (k2, n2):
            return False
        if s1 is not None and (s2 is None or len(s1) != len(s2) or
                               any(a is not None and a != b for a, b in zip(s1, s2))):
            return False
    return True


class _Record:
    """What the tracer knows of one user function (by code object) and one closure variant."""

    def __init__(self, code, f, variant: tuple = ()):
        path, line, qualname = _source_of(code)
        self.key = {"path": path, "firstlineno": line, "qualname": qualname}
        self.variant = variant
        self.intentional = _declared_intentional(code, path, line)
        self.eager: dict[tuple, int] = {}  # signature -> eager calls checked
        self.symbolic: dict[tuple, dict] = {}  # signature -> {"f", "kwargs", "covered"}
        self.raised: set[str] = set()
        self.variants: dict[tuple, _Record] = {variant: self}  # on the first variant only: all of them


_AUTOGRAPH_FILE = "__autograph_generated_file"
_AUTOGRAPH_PREFIX = re.compile(r"^outer_factory\.<locals>\.inner_factory\.<locals>\.")


def _source_of(code) -> tuple[str, int, str]:
    """(path, first line, qualified name) of the user's own source: a function that autograph
    converted (a nested def in a `tf.function`) lives in a generated file whose lines autograph's
    source map takes back to the user's; its qualname loses the factories and the `tf__` prefix."""
    path, line, qualname = code.co_filename, code.co_firstlineno, getattr(code, "co_qualname", code.co_name)
    if _AUTOGRAPH_FILE not in os.path.basename(path):
        return path, line, qualname
    try:
        from tensorflow.python.autograph.impl import api

        for factories in list(api._TRANSPILER._cache._cache.values()):
            for factory in list(factories.values()):
                if getattr(factory.module, "__file__", None) != path:
                    continue
                for loc, origin in factory.source_map.items():
                    if loc.filename == path and loc.lineno == line:
                        name = _AUTOGRAPH_PREFIX.sub("", qualname)
                        name = ".".join(p[4:] if p.startswith("tf__") else p for p in name.split("."))
                        return origin.loc.filename, origin.loc.lineno, name
    except Exception:  # another TensorFlow's autograph: keep the generated location
        pass
    return path, line, qualname


_MAX_VARIANTS = 8  # closure variants checked per function: a layer built 10,000 times costs 8 checks
_SKIP_ATTRS = frozenset({"name", "built"})  # differ per instance without changing the maths


def _describe_value(value, depth: int = 1) -> str | None:
    """A short, stable description of a closed-over value's configuration, or None where it has
    none that could change the gradient's maths: tensors and variables are the call's inputs
    (the signature covers them), anything else by its scalar settings."""
    if value is None or isinstance(value, (bool, int, float, complex)):
        return repr(value)
    if isinstance(value, (str, bytes)):
        return repr(value[:40])
    if _is_tensor(value):
        return None
    if isinstance(value, (tuple, list)) and len(value) <= 8:
        parts = [_describe_value(v, 0) for v in value]
        return None if all(p is None for p in parts) else "(" + ", ".join(p or "?" for p in parts) + ")"
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '')}.{value.__qualname__}"
    attrs = getattr(value, "__dict__", None)
    if depth > 0 and isinstance(attrs, dict):
        parts = []
        for name in sorted(attrs)[:64]:
            if name.startswith("_") or name in _SKIP_ATTRS:
                continue
            d = _describe_value(attrs[name], 0)
            if d is not None:
                parts.append(f"{name}={d}")
        return "{" + ", ".join(parts) + "}" if parts else None
    return None


def closure_variant(f) -> tuple[str, ...]:
    """What `f` closes over, as `name=value` pairs (`self.power=3.0` for a layer's attribute): the
    same code with other values is another function to check (a layer used twice with different
    configuration)."""
    f = getattr(f, "__func__", f)
    while isinstance(f, functools.partial):
        f = f.func
    cells = getattr(f, "__closure__", None)
    code = getattr(f, "__code__", None)
    if not cells or code is None:
        return ()
    parts = []
    for name, cell in zip(code.co_freevars, cells):
        if name == "ag__":  # autograph's module of helpers, in every function it converted
            continue
        try:
            value = cell.cell_contents
        except ValueError:  # not yet assigned
            continue
        d = _describe_value(value)
        if d is None:
            continue
        if d.startswith("{"):
            parts.extend(f"{name}.{item}" for item in d[1:-1].split(", "))
        else:
            parts.append(f"{name}={d}")
    return tuple(p[:200] for p in parts[:64])


_STDLIB = os.path.dirname(os.__file__) + os.sep


def _in_stdlib(path: str) -> bool:
    # (A Python without a venv keeps its site-packages inside the standard library's directory.)
    return path.startswith(_STDLIB) and not {"site-packages", "dist-packages"} & set(path[len(_STDLIB):].split(os.sep))

_DEREFS: dict[Any, tuple[str, ...]] = {}  # code -> the free variables it reads, in order


def _wrapped(f, code):
    """The function a wrapper's generic forward runs, or None: for a forward taking `*args` (the
    shape of a wrapper's, as `tfp.math`'s custom_gradient decorator makes), the first function
    of the user's (not TensorFlow's or Keras's) among the closed-over values it reads, in the
    order its code reads them (`vjp_fwd` in `val, aux = vjp_fwd(*args)`)."""
    # Only `*args`: a forward with named inputs besides (`def cgrad(x1, x2, *kernel_args)`,
    # calling a closed-over kernel factory) is the user's own, not a wrapper's.
    if not code.co_flags & inspect.CO_VARARGS or code.co_argcount or code.co_kwonlyargcount or not code.co_freevars:
        return None
    f = getattr(f, "__func__", f)
    while isinstance(f, functools.partial):
        f = f.func
    cells = dict(zip(code.co_freevars, getattr(f, "__closure__", None) or ()))
    names = _DEREFS.get(code)
    if names is None:
        import dis

        names = _DEREFS[code] = tuple(dict.fromkeys(
            i.argval for i in dis.get_instructions(code) if i.opname == "LOAD_DEREF" and i.argval in cells))
    for name in names:
        try:
            value = cells[name].cell_contents
        except (KeyError, ValueError):
            continue
        inner = _code(value) if isinstance(value, (types.FunctionType, functools.partial)) else None
        if inner is not None and inner is not code and not is_library(inner.co_filename) \
                and not inner.co_filename.startswith("<") and not _in_stdlib(inner.co_filename):
            return value
    return None


def _declared_intentional(code, path: str, firstlineno: int) -> bool:
    """`# cglint: intentional` where cglint.directives reads it: above the function, on its
    decorator and `def` lines, or at the end of a `return` line of it or of a function defined
    in it (its grad fn). A function autograph converted is known by its user's first line only."""
    from cglint import directives

    lines = linecache.getlines(path)
    if code.co_filename == path and code.co_firstlineno == firstlineno:
        return directives.of_code(lines, code).intentional
    return directives.of_lines(lines, firstlineno, firstlineno).intentional


def _user_line(tb) -> str | None:
    """`path:line` of the innermost frame of the user's own code in a traceback (where the
    forward or grad fn raised), mapped back to the user's source when autograph generated it."""
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if not code.co_filename.startswith("<") and code.co_filename != __file__ and not is_library(code.co_filename):
            found = (code, tb.tb_lineno)
        tb = tb.tb_next
    if found is None:
        return None
    code, line = found
    return f"{code.co_filename}:{line}"


class _CreatesVariable(Exception):
    pass


class Tracer:
    def __init__(self, calls: int = 1, tolerances: dict | None = None):
        self.calls = max(1, int(calls))
        # elements a check's inputs may hold before it runs on a slice; 0: budget.MAX_ELEMENTS
        self.max_elements = int((tolerances or {}).get("max_elements") or 0)
        # bytes a check may add; None: EXTRA_MEMORY plus half the program's peak at the check
        self.memory_budget = (tolerances or {}).get("memory_budget")
        self.tolerances = {k: v for k, v in (tolerances or {}).items()
                           if v is not None and k not in ("max_elements", "memory_budget")}  # rtol, atol, probes
        self.sinks: list[Callable[[dict], None]] = []
        self.records: dict[Any, _Record | None] = {}
        self.local = threading.local()
        self.lock = threading.RLock()
        self.finished = False
        self._atexit = False

    # ------------------------------------------------------------------ events
    def emit(self, event: dict) -> None:
        ctx = os.environ.get("PYTEST_CURRENT_TEST")
        if ctx:
            event["context"] = ctx.rsplit(" (", 1)[0]
        for sink in list(self.sinks):
            try:
                sink(event)
            except Exception:
                pass

    def _record(self, f) -> _Record | None:
        if getattr(self.local, "busy", False):
            return None
        code = _code(f)
        if code is None:
            return None
        # A generic forward a wrapper makes for many functions (`def f_wrapped(*args): ...
        # vjp_fwd(*args)`) stands for the function it runs: one entry per wrapped function.
        # TensorFlow's and Keras's own (`tf.recompute_grad`) stay theirs: not checked.
        inner = None if is_library(code.co_filename) else _wrapped(f, code)
        if inner is not None:
            code = _code(inner)
        try:
            base = self.records[code]
        except KeyError:
            user = not code.co_filename.startswith("<") and not is_library(code.co_filename)
            rec = _Record(code, f, closure_variant(f)) if user else None
            with self.lock:
                return self.records.setdefault(code, rec)
        if base is None:
            return None
        variant = closure_variant(f)
        rec = base.variants.get(variant)
        if rec is None:
            with self.lock:
                if len(base.variants) >= _MAX_VARIANTS:
                    return base
                rec = base.variants.setdefault(variant, _Record(code, f, variant))
        return rec

    # ------------------------------------------------------------------ the entry point
    def call(self, original, f, args, kwargs, eager: bool):
        """Everything in one frame, hidden from pytest's tracebacks (`__tracebackhide__`) and
        taken out of uncaught ones (`_install_excepthook`), so the program's errors read as
        they do without cglint."""
        __tracebackhide__ = True  # noqa: F841 - read by pytest
        rec = self._record(f)
        if rec is None:
            return original(f, args, kwargs)
        try:
            settled = (self._on_eager if eager else self._on_symbolic)(rec, f, args, kwargs)
        except Exception:
            settled = False
        if settled:
            # A signature already checked: the call goes straight to TensorFlow (what its backward
            # could raise, the check and the first call's backward already saw), so later steps
            # of an eager loop cost only the signature.
            return original(f, args, kwargs)
        stack = self.local.__dict__.setdefault("stack", [])
        stack.append(rec)
        try:
            return original(f, args, kwargs)
        except Exception as e:
            tb = e.__traceback__
            while tb is not None and tb.tb_next is not None:
                tb = tb.tb_next
            # What TensorFlow's custom-gradient machinery raised is the contract's verdict. What
            # TensorFlow raised elsewhere (an op, tf.function's own checks) is noted as the
            # forward's failure: the verdict only if no call of the function ever ran (a user's own
            # `raise` is deliberate validation, not noted).
            if tb is not None and tb.tb_frame.f_code.co_filename.endswith(_CG_FILE):
                self.raised(rec, e, "call")
            elif tb is not None and is_library(tb.tb_frame.f_code.co_filename):
                self.raised(rec, e, "forward")
            raise
        finally:
            stack.pop()

    def wrap_backward(self, backward):
        stack = getattr(self.local, "stack", None)
        if not stack or getattr(self.local, "busy", False):
            return backward
        rec = stack[-1]

        def backward_noting(*a, **k):
            __tracebackhide__ = True  # noqa: F841 - read by pytest
            try:
                return backward(*a, **k)
            except Exception as e:
                self.raised(rec, e, "gradient")
                raise

        return backward_noting

    def override_ignored(self, op_type_map: dict, at: str | None) -> None:
        from tensorflow.python.framework import ops

        for op_type, name in op_type_map.items():
            try:
                fn = ops.gradient_registry.lookup(name)
            except LookupError:
                continue
            code = getattr(fn, "__code__", None)
            if code is None:
                continue
            path, line, qualname = _source_of(code)
            msg = (f"gradient_override_map({{{op_type!r}: {name!r}}}) was entered while TensorFlow executes eagerly, "
                   f"where it has no effect: the ops made under it keep {op_type}'s own gradient and this "
                   "registered gradient never runs (tf.custom_gradient does what it meant)")
            key = ("override", path, line, op_type)  # once, however many names a loop registers
            with self.lock:
                if key in self.records:
                    continue
                self.records[key] = None
            self.emit({"event": "raised", "function": {"path": path, "firstlineno": line, "qualname": qualname},
                       "where": "override", "message": msg, "at": at})

    def raised(self, rec: _Record, exc: BaseException, where: str) -> None:
        try:
            msg = message_of(exc)
            if msg in rec.raised:
                return
            rec.raised.add(msg)
            self.emit({"event": "raised", "function": rec.key, "where": where, "message": msg,
                       "at": _user_line(exc.__traceback__)})
        except Exception:
            pass

    # ------------------------------------------------------------------ eager and symbolic calls
    def _on_eager(self, rec: _Record, f, args, kwargs) -> bool:
        """Checks the call if its signature is still within budget; True if nothing was left to do."""
        sig = signature(args)
        covers = [s for s, entry in rec.symbolic.items() if not entry["covered"] and _compatible(s, sig)]
        n = rec.eager.get(sig, 0)
        if n >= self.calls and not covers:
            return True
        rec.eager[sig] = n + 1
        for s in covers:
            rec.symbolic[s]["covered"] = True
        by_keyword = _keyword_tensors(args, kwargs)
        if by_keyword:
            # TensorFlow's custom_gradient takes positional arguments as its inputs: with every
            # tensor passed by keyword the grad fn is never called (autodiff's gradient is used).
            report = {"verdict": "error", "reference": None, "max_rel_error": None,
                      "detail": f"called with its tensors as keyword arguments only ({', '.join(by_keyword)}): "
                                "TensorFlow's custom_gradient differentiates positional arguments only, so the "
                                "grad fn is never used and autodiff's gradient is returned; pass them positionally"}
        else:
            report = self.check(f, args, kwargs, rec.intentional)
        self.emit({"event": "check", "function": rec.key, "how": "eager", "signature": describe_signature(sig),
                   "covers": [describe_signature(s) for s in covers], "variant": list(rec.variant), "report": report})

    def _on_symbolic(self, rec: _Record, f, args, kwargs) -> None:
        sig = signature(args)
        if sig in rec.symbolic:
            return
        covered = any(_compatible(sig, s) for s in rec.eager)
        from tensorflow.python.util import nest

        python_values = [x for x in nest.flatten(args) if not _is_tensor(x)]
        # The structure only, not the symbolic tensors: they would keep their graph alive.
        structure = nest.map_structure(lambda x: None if _is_tensor(x) else x, list(args))
        rec.symbolic[sig] = {"f": f, "kwargs": {k: v for k, v in kwargs.items() if not _is_tensor(v)},
                             "covered": covered, "python": python_values, "structure": structure}
        self.emit({"event": "symbolic", "function": rec.key, "signature": describe_signature(sig),
                   "covered": covered})
        if not covered and not self._atexit:
            self._atexit = True
            atexit.register(self.finish)

    def finish(self) -> None:
        """Checks every symbolic signature no eager call covered, on random inputs of it."""
        if self.finished:
            return
        self.finished = True
        from tensorflow.python.eager import context

        # The check is eager, whatever the program set: after `tf.compat.v1.disable_eager_execution()`
        # random inputs built in graph mode would be tensors of the program's graph.
        with context.eager_mode():
            self._finish()

    def _finish(self) -> None:
        for rec in [v for r in list(self.records.values()) if r is not None for v in list(r.variants.values())]:
            # Most specific signatures first: checking (float32[4, 3]) also covers (float32[None, 3]).
            for sig, entry in sorted(rec.symbolic.items(), key=lambda kv: _unknown_dims(kv[0])):
                if entry["covered"]:
                    continue
                try:
                    inputs, concrete = _random_inputs(sig, entry["structure"], entry["python"])
                except Exception as e:
                    report = {"verdict": "skipped", "reference": None, "max_rel_error": None,
                              "detail": f"no inputs could be built for {describe_signature(sig)}: {message_of(e)}"}
                    concrete = None
                else:
                    report = self.check(entry["f"], inputs, entry["kwargs"], rec.intentional)
                covers = [s for s, e in rec.symbolic.items()
                          if not e["covered"] and (s == sig or (concrete is not None and _compatible(s, concrete)))]
                for s in covers:
                    rec.symbolic[s]["covered"] = True
                self.emit({"event": "check", "function": rec.key, "how": "exit", "variant": list(rec.variant),
                           "signature": describe_signature(sig),
                           "inputs": describe_signature(concrete) if concrete is not None else None,
                           "covers": [describe_signature(s) for s in covers], "report": report})

    # ------------------------------------------------------------------ the check itself
    def check(self, f, args, kwargs, intentional: bool) -> dict:
        """Runs `check_gradient` in a helper thread with the program's state protected; returns
        the report as a dict (never raises). Inputs over the budget are checked on a slice."""
        from tensorflow.python.eager import context

        box: dict = {}
        sliced, limit = None, self.max_elements

        def work():
            nonlocal args, sliced, limit
            self.local.busy = True
            try:
                # (eager mode is per thread, and a new one starts in the program's default mode)
                with context.eager_mode(), _quiet(), _rng_preserved(), _no_new_variables():
                    check_gradient = _import_check()
                    from cglint.gradcheck import budget

                    limit = limit or budget.MAX_ELEMENTS
                    args, sliced = budget.within_budget(args, limit)
                    fn = f
                    if kwargs:
                        # custom_gradient reads the forward's name (a bare partial has none)
                        fn = functools.partial(f, **kwargs)
                        fn.__name__ = getattr(f, "__name__", "forward")
                        fn.__qualname__ = getattr(f, "__qualname__", fn.__name__)
                    args, over, why = budget.fit_memory(fn, args, self.memory_budget)
                    if why is not None:
                        box["report"] = {"verdict": "skipped", "reference": None, "max_rel_error": None,
                                         "detail": why}
                        return
                    sliced = over or sliced
                    # replay_draws=False: seeding TensorFlow resets its random kernels, the program's too
                    box["report"] = check_gradient(fn, *args, seed=0, intentional=intentional, replay_draws=False,
                                                   overwritten=_overwritten(f, args), **self.tolerances).to_dict()
            except BaseException as e:  # the check must never reach the user's program
                box["report"] = {"verdict": "skipped", "reference": None, "max_rel_error": None,
                                 "detail": f"the check itself failed: {message_of(e)}"}

        thread = threading.Thread(target=work, name="cglint-check", daemon=True)
        with _collect_what_it_builds():
            thread.start()
            thread.join()
        report = box.get("report") or {"verdict": "skipped", "detail": "the check did not finish"}
        if "_CreatesVariable" in (report.get("detail") or ""):
            report = {**report, "verdict": "skipped", "detail": "the forward creates a tf.Variable on every "
                      "call, and running it again to check it would add variables to the program"}
        if sliced:
            report = {**report, "sliced": sliced}
            if report.get("verdict") == "skipped" and "forward raised" in (report.get("detail") or ""):
                report["detail"] = (f"the inputs exceed the check's budget of {limit:,} elements, and the "
                                    f"forward rejects them {sliced}: {report['detail']}")
        return report


def _overwritten(f, args) -> tuple[int, ...]:
    """Positions of the flattened inputs that hold a Keras variable marked
    `overwrite_with_gradient` (float8 training's scales and amax histories, whose grad fn
    returns their next value), found among the variables of the objects the forward closes
    over (the layer whose `call` built it)."""
    try:
        from tensorflow.python.util import nest

        where = {id(x): i for i, x in enumerate(nest.flatten(list(args)))}
        f = getattr(f, "__func__", f)
        while isinstance(f, functools.partial):
            f = f.func
        found = set()
        for cell in getattr(f, "__closure__", None) or ():
            try:
                owner = cell.cell_contents
            except ValueError:
                continue
            variables = getattr(type(owner), "variables", None)
            if not isinstance(variables, property):  # a Keras layer's; nothing else is read
                continue
            for v in owner.variables:
                if getattr(v, "overwrite_with_gradient", False):
                    found.update(where[id(x)] for x in (getattr(v, "_value", None), v) if id(x) in where)
        return tuple(sorted(found))
    except Exception:
        return ()


def _import_check():
    """`cglint.gradcheck.check.check_gradient`, imported from cglint's own directory (named by
    `cglint trace` in CGLINT_TRACE_PKG) when the program's environment has no cglint."""
    try:
        from cglint.gradcheck.check import check_gradient
    except ImportError:
        root = os.environ.get("CGLINT_TRACE_PKG")
        if not root:
            raise
        sys.path.insert(0, root)
        try:
            from cglint.gradcheck.check import check_gradient
        finally:
            sys.path.remove(root)
    return check_gradient


def _random_inputs(sig: tuple, structure, python_values: list):
    """Inputs for a signature recorded under tf.function, in the structure of the recorded call:
    unknown dimensions become 2, floats are uniform in [0.5, 1.5) (away from the kinks at 0 and
    the edges of log/sqrt domains), integers 1, booleans False; Python values are the recorded
    ones. Returns (inputs, the concrete signature)."""
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.util import nest

    rng = np.random.default_rng(0)
    python_values = list(python_values)
    flat, concrete = [], []
    for kind, name, shape in sig:
        if kind == "python":
            flat.append(python_values.pop(0))
            concrete.append((kind, name, None))
            continue
        if shape is None:
            raise ValueError("an input of unknown rank")
        dims = tuple(2 if d is None else d for d in shape)
        dtype = tf.as_dtype(name)
        if dtype.is_floating or dtype.is_complex:
            value = tf.constant(rng.uniform(0.5, 1.5, size=dims), dtype=dtype)
        elif dtype.is_bool:
            value = tf.zeros(dims, dtype=tf.bool)
        else:
            value = tf.ones(dims, dtype=dtype)
        flat.append(value)
        concrete.append((kind, name, dims))
    inputs = nest.pack_sequence_as(list(structure), flat)
    return inputs, tuple(concrete)


class _collect_what_it_builds:
    """What a check builds (tapes, probes, traced graphs) is freed when it ends, not at the
    program's next full collection. A full `gc.collect()` walks the whole heap (about a second
    in a test session with TensorFlow and Keras loaded, more than the check itself): the objects
    that existed before the check are frozen (`gc.freeze`, constant time) so the collection
    walks only what the check made, then unfrozen. A program that froze objects itself keeps
    them frozen: then only the young generations are collected."""

    def __enter__(self):
        self.froze = gc.get_freeze_count() == 0
        if self.froze:
            gc.freeze()
        return self

    def __exit__(self, *exc):
        try:
            gc.collect() if self.froze else gc.collect(1)
        finally:
            if self.froze:
                gc.unfreeze()
        return False


class _quiet:
    """Silences stdout and stderr for the check (a forward that prints, `tf.print`, TensorFlow's
    logging), at the file-descriptor level as well, and restores them exactly."""

    def __enter__(self):
        self.saved = []
        self.streams = (sys.stdout, sys.stderr)
        for s in self.streams:
            try:
                s.flush()
            except Exception:
                pass
        try:
            self.null = open(os.devnull, "w")
            for fd in (1, 2):
                try:
                    self.saved.append((fd, os.dup(fd)))
                    os.dup2(self.null.fileno(), fd)
                except OSError:
                    pass
            sys.stdout = sys.stderr = self.null
        except OSError:
            self.null = None
        return self

    def __exit__(self, *exc):
        for s in (sys.__stdout__, sys.__stderr__):
            try:
                s.flush()
            except Exception:
                pass
        for fd, saved in self.saved:
            os.dup2(saved, fd)
            os.close(saved)
        sys.stdout, sys.stderr = self.streams
        if self.null is not None:
            self.null.close()
        return False


class _rng_preserved:
    """The check's random ops must not move the program's random streams: eager op seeds come
    from the context's `_rng` when a global seed is set (the check gets its own), the global
    `tf.random.Generator` is restored, and so are NumPy's and Python's global states."""

    def __enter__(self):
        import numpy as np
        from tensorflow.python.eager import context
        from tensorflow.python.ops import stateful_random_ops as sro

        self.ctx = context.context()
        self.ctx_rng = getattr(self.ctx, "_rng", None)
        if self.ctx_rng is not None:
            self.ctx._rng = random.Random(0x5EED)
        self.sro = sro
        self.gen = sro.global_generator
        self.gen_state = self.gen.state.numpy() if self.gen is not None else None
        self.np_state = np.random.get_state()
        self.py_state = random.getstate()
        return self

    def __exit__(self, *exc):
        import numpy as np

        if self.ctx_rng is not None:
            self.ctx._rng = self.ctx_rng
        if self.gen is not None:
            self.gen.state.assign(self.gen_state)
        self.sro.global_generator = self.gen
        np.random.set_state(self.np_state)
        random.setstate(self.py_state)
        return False


class _no_new_variables:
    """A forward that creates variables is not run again: it would add them to the program."""

    def __enter__(self):
        import tensorflow as tf

        def refuse(next_creator, **kwargs):
            raise _CreatesVariable("the forward creates a tf.Variable")

        self.scope = tf.variable_creator_scope(refuse)
        self.scope.__enter__()
        return self

    def __exit__(self, *exc):
        self.scope.__exit__(*exc)
        return False


class _RecordProxy:
    """Stands in for `tensorflow.python.eager.record` inside custom_gradient.py only: the
    backward functions TensorFlow records for a user's custom gradient note what they raise."""

    def __init__(self, real, tracer: Tracer):
        self._real, self._tracer = real, tracer

    def __getattr__(self, name):
        return getattr(self._real, name)

    def record_operation(self, op_type, output_tensors, input_tensors, backward_function, *rest, **kw):
        return self._real.record_operation(op_type, output_tensors, input_tensors,
                                           self._tracer.wrap_backward(backward_function), *rest, **kw)


def patch(module, tracer: Tracer) -> None:
    """Points `module` (tensorflow.python.ops.custom_gradient) at the tracer. Idempotent."""
    if getattr(module, "_cglint_tracer", None) is not None:
        return
    orig_eager, orig_graph = module._eager_mode_decorator, module._graph_mode_decorator

    eager_call = functools.partial(tracer.call, orig_eager, eager=True)
    graph_call = functools.partial(tracer.call, orig_graph, eager=False)
    eager_call.__name__, graph_call.__name__ = "_eager_mode_decorator", "_graph_mode_decorator"
    module._eager_mode_decorator = eager_call
    module._graph_mode_decorator = graph_call

    module.record = _RecordProxy(module.record, tracer)
    module._cglint_tracer = tracer
    _patch_override_map(tracer)


def _patch_override_map(tracer: Tracer) -> None:
    """`Graph.gradient_override_map` entered while TensorFlow executes eagerly (TF2 code) has no
    effect: the ops made under it keep their own gradients and the registered ones never run,
    silently. Each registered function it names gets that as its `error`, at its def."""
    from tensorflow.python.eager import context
    from tensorflow.python.framework import ops

    original = ops.Graph.gradient_override_map
    if getattr(original, "_cglint", False):
        return

    def gradient_override_map(self, op_type_map):
        try:
            if context.executing_eagerly() and isinstance(op_type_map, dict):
                tracer.override_ignored(op_type_map, _caller_line())
        except Exception:
            pass
        return original(self, op_type_map)

    functools.update_wrapper(gradient_override_map, original)
    gradient_override_map._cglint, gradient_override_map._cglint_original = True, original
    ops.Graph.gradient_override_map = gradient_override_map


def _caller_line() -> str | None:
    """`path:line` of the first frame outside TensorFlow and cglint (the user's `with`)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if os.sep + "tensorflow" + os.sep not in name and os.sep + "cglint" + os.sep not in name:
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back
    return None


class _Finder:
    """A meta-path finder that patches TensorFlow's custom_gradient module as it is first
    imported, then steps aside. TensorFlow itself is imported when (and only if) the program
    imports it."""

    def __init__(self, tracer: Tracer):
        self.tracer = tracer

    def find_spec(self, fullname, path=None, target=None):
        if fullname != CG_MODULE:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, tracer = spec.loader, self.tracer
        exec_module = loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            try:
                patch(module, tracer)
            except Exception:
                pass

        loader.exec_module = exec_and_patch  # this loader instance serves this module only
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        return spec


def install(calls: int = 1, tolerances: dict | None = None) -> Tracer:
    """Installs the (one) tracer in this process: now if TensorFlow is already imported, else as
    soon as it is. Returns it; add sinks to `tracer.sinks`."""
    global _tracer
    if _tracer is None:
        _tracer = Tracer(calls, tolerances)
        module = sys.modules.get(CG_MODULE)
        if module is not None:
            patch(module, _tracer)
        else:
            sys.meta_path.insert(0, _Finder(_tracer))
    return _tracer


def file_sink(directory: str) -> Callable[[dict], None]:
    """Appends events as JSON lines to `directory/events-<pid>.jsonl`, flushed one by one, so a
    program that dies keeps every event already emitted."""
    state: dict = {}

    def sink(event: dict) -> None:
        fh = state.get("fh")
        if fh is None or state.get("pid") != os.getpid():  # a fork gets its own file
            fh = open(os.path.join(directory, f"events-{os.getpid()}.jsonl"), "a", encoding="utf-8")
            state.update(fh=fh, pid=os.getpid())
        fh.write(json.dumps(event, default=str) + "\n")
        fh.flush()

    return sink


def install_from_environment() -> None:
    """Called by the sitecustomize `cglint trace` puts on PYTHONPATH."""
    directory = os.environ.get("CGLINT_TRACE_DIR")
    if not directory:
        return
    try:
        tolerances = json.loads(os.environ.get("CGLINT_TRACE_TOLERANCES") or "{}")
    except ValueError:
        tolerances = {}
    tracer = install(int(os.environ.get("CGLINT_TRACE_CALLS", "1") or 1), tolerances)
    tracer.sinks.append(file_sink(directory))
    _install_excepthook(tracer)


def _install_excepthook(tracer: Tracer) -> None:
    """An uncaught exception from a user's custom gradient whose backward TensorFlow ran outside
    any of our frames is still attributed: the frames of custom_gradient.py hold the function."""
    previous = sys.excepthook

    def hook(tp, value, tb):
        try:
            for rec in functions_in_traceback(value, tracer):
                tracer.raised(rec, value, "uncaught")
            tb = _without_own_frames(tb)
        except Exception:
            pass
        previous(tp, value, tb)

    sys.excepthook = hook


def _without_own_frames(tb):
    """The traceback minus this module's frames (tb_next is writable)."""
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    head = tb
    while tb is not None:
        nxt = tb.tb_next
        while nxt is not None and nxt.tb_frame.f_code.co_filename == __file__:
            nxt = nxt.tb_next
        tb.tb_next = nxt
        tb = nxt
    return head


def _nested_codes(code):
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            yield const
            yield from _nested_codes(const)


def _enclosing(code, tracer: Tracer) -> _Record | None:
    """The user function whose body defines `code` (a grad fn is a def inside its forward)."""
    for outer, rec in list(tracer.records.items()):
        if rec is not None and outer.co_filename == code.co_filename and code in _nested_codes(outer):
            return rec
    return None


_RECORDED_OP = re.compile(r"Recorded operation '([^']+)' returned too few gradients")


def functions_in_traceback(exc: BaseException, tracer: Tracer) -> list[_Record]:
    """The user functions an exception came through: the functions custom_gradient.py's frames
    were running for, or (the count check of a graph-mode backward, raised by the tape itself)
    the one function of that name the message gives."""
    out: list[_Record] = []
    m = _RECORDED_OP.search(str(exc))
    if m:
        named = [r for r in tracer.records.values() if r is not None and r.key["qualname"].split(".")[-1] == m.group(1)]
        if len(named) == 1:
            out.append(named[0])
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_filename.endswith(_CG_FILE):
            for value in list(frame.f_locals.values()):
                if callable(value) and (code := _code(value)) is not None:
                    rec = tracer.records.get(code) or _enclosing(code, tracer)
                    if rec is not None and rec not in out:
                        out.append(rec)
        tb = tb.tb_next
    return out
