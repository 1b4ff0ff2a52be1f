"""Numeric check of a `tf.RegisterGradient` function against the gradient of the op it overrides.

A registered gradient `(op, grad) -> one gradient per op input` only ever runs where
`graph.gradient_override_map({"Relu": "Name"})` is in effect and `tf.gradients` differentiates the
graph (TF 2.21: a `GradientTape` ignores the override map, eagerly and under `tf.function`). So the
op is built in a `tf.Graph` with the override, and the registered function's gradients are what
`tf.gradients` returns there (TensorFlow's own checks of the count included), run in a
`tf.compat.v1.Session`. Wrapped as a `(y, grad_fn)` forward whose `y` is the op run eagerly, the
usual check compares them with TensorFlow's own gradient of the op (the eager tape, which ignores
the override) or float64 finite differences where the op has none (Round, Sign).

A `function.Defun(..., python_grad_func=g)` is checked the same way: the Defun called in a graph,
differentiated with `g`, against autodiff of its Python function run eagerly.
"""

from __future__ import annotations

import inspect

import numpy as np
import tensorflow as tf

from cglint.gradcheck.check import check_gradient, forward_failure, no_inputs_report
from cglint.gradcheck.report import GradientReport

_FLOATS = {tf.float16.as_datatype_enum, tf.bfloat16.as_datatype_enum, tf.float32.as_datatype_enum,
           tf.float64.as_datatype_enum}
_SHAPES = ((2, 3), (3, 3), (3,), ())


def _op_inputs(op_def) -> list[str] | str:
    """The op's input names, or why float tensors cannot be built for them."""
    attrs = {a.name: a for a in op_def.attr}
    names = []
    for arg in op_def.input_arg:
        if arg.number_attr or arg.type_list_attr:
            return f"input {arg.name!r} of {op_def.name} is a list of tensors"
        if arg.type_attr:
            allowed = set(attrs[arg.type_attr].allowed_values.list.type)
            if allowed and not allowed & _FLOATS:
                return f"input {arg.name!r} of {op_def.name} takes no floating-point tensor"
        elif arg.type not in _FLOATS:
            return f"input {arg.name!r} of {op_def.name} is {tf.dtypes.as_dtype(arg.type).name}"
        names.append(arg.name)
    return names


def _forward(run, build, names: list[str], grad_name: str):
    """`forward(*inputs) -> (y, grad_fn)`: `run(*inputs)` eagerly for y, and the gradient that
    `tf.gradients` takes of `build(*constants)` in a graph of its own (where the registered or
    attached gradient function is the one TensorFlow uses)."""

    def forward(*xs):
        y = run(*xs)
        values = [np.asarray(x) for x in xs]

        def grad_fn(*upstream):
            graph = tf.Graph()
            with graph.as_default():
                cs = [tf.constant(v) for v in values]
                ys = tf.nest.flatten(build(*cs))
                grads = tf.gradients(ys, cs, grad_ys=[tf.constant(np.asarray(u)) for u in upstream])
                fetch = [tf.convert_to_tensor(g) for g in grads if g is not None]
                with tf.compat.v1.Session(graph=graph) as session:
                    got = iter(session.run(fetch))
            return [None if g is None else tf.constant(next(got)) for g in grads]

        return y, grad_fn

    forward.__name__ = forward.__qualname__ = grad_name
    # Gradients are named after the op's inputs: d/features for Relu.
    forward.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    return forward


def _overridden(op_type: str, name: str, names: list[str]):
    """The op built with `gradient_override_map({op_type: name})` in effect."""
    raw = getattr(tf.raw_ops, op_type)

    def build(*cs):
        with tf.compat.v1.get_default_graph().gradient_override_map({op_type: name}):
            out = raw(**dict(zip(names, cs)))
        if tf.nest.flatten(out)[0].op.get_attr("_gradient_op_type") != name.encode():
            raise RuntimeError(f"the override of {op_type} by {name!r} is not in effect")
        return out

    return lambda *xs: raw(**dict(zip(names, xs))), build


def _skipped(detail: str, seed: int, function: str) -> dict:
    return {**GradientReport.skipped(detail, seed).to_dict(), "function": function}


def check_registered(module, request: dict, seed: int) -> dict:
    """The child's check of one registered gradient (`request["registered"]`: its name and the op
    types the module's override maps send to it)."""
    from tensorflow.python.framework import op_def_registry, ops

    reg, function = request["registered"], request["function"]
    name = reg["name"]
    try:
        fn = ops.gradient_registry.lookup(name)
    except LookupError:
        fn = None
    if fn is None:
        return _skipped(f"tf.RegisterGradient({name!r}) did not run when the module was imported "
                        "(registered inside a function?)", seed, function)
    # The op types it overrides: the module's override maps, else a custom op of that very name.
    op_types = list(reg.get("ops") or ([name] if op_def_registry.get(name) is not None else []))
    if not op_types:
        return _skipped(f"no gradient_override_map in the module sends an op to {name!r}", seed, function)
    results = []
    for op_type in op_types:
        op_def = op_def_registry.get(op_type)
        if op_def is None and not hasattr(tf.raw_ops, op_type):
            # gradient_override_map matches op types exactly and ignores a key that is none: the
            # registered function never runs. That is the bug, not a reason to skip.
            results.append(_unknown_op(op_type, name, seed, function))
            continue
        names = _op_inputs(op_def) if op_def is not None and hasattr(tf.raw_ops, op_type) else \
            f"{op_type} is not an op TensorFlow knows"
        if isinstance(names, str):
            results.append(_skipped(f"{names}: add `# cglint: example ...` inputs", seed, function))
            continue
        forward = _forward(*_overridden(op_type, name, names), names, function)
        results.append(_check(forward, names, [tf.float32] * len(names), module, request, seed,
                              f"gradient of {op_type} registered as {name!r}"))
    # Several op types sent to one function: the worst verdict speaks for it.
    return _worst(results)


def _unknown_op(op_type: str, name: str, seed: int, function: str) -> dict:
    from cglint.gradcheck.optypes import closest_op_type

    close = closest_op_type(op_type)
    hint = f" (did you mean {close!r}?)" if close else ""
    return {"verdict": "error", "reference": None, "max_rel_error": None, "seed": seed, "function": function,
            "detail": f"gradient_override_map sends {op_type!r} to {name!r}, but {op_type!r} is not an op type "
                      f"TensorFlow knows{hint}: the map ignores it, and the registered gradient never runs"}


def check_defun(module, request: dict, seed: int) -> dict:
    """A `function.Defun(..., python_grad_func=g)` (or `grad_func=`): its Python function run
    eagerly against the Defun called in a graph, where TensorFlow differentiates it with `g`."""
    from .lookup import lookup

    function = request["function"]
    defun, why = lookup(module, function)
    run = getattr(defun, "_func", None)
    if defun is None or run is None:
        return _skipped(why or f"{function} is not a function.Defun", seed, function)
    names = _params(run)
    types = list(getattr(defun, "_arg_types", None) or [tf.float32] * len(names))
    forward = _forward(run, defun, names, function)
    return _check(forward, names, types, module, request, seed, f"gradient function of the Defun {function}")


def _params(fn) -> list[str]:
    try:
        return [p.name for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):
        return []


def _check(forward, names, dtypes, module, request: dict, seed: int, what: str) -> dict:
    """Inputs (the `# cglint: example` spec, else small Gaussian tensors of the first shape the
    op accepts) and the check; the graph is the only mode there is (no tf.function to compare)."""
    from .spec import SpecError, build_inputs, parse_spec

    function, spec_text = request["function"], request.get("inputs")
    try:
        if spec_text:
            inputs = build_inputs(parse_spec(spec_text), names, module, seed)
        else:
            rng, inputs, failures = np.random.default_rng(seed), None, []
            for shape in [tuple(s) for s in request.get("shapes") or []] + list(_SHAPES):
                candidate = [tf.constant(rng.standard_normal(shape), d) for d in dtypes]
                failures.append(forward_failure(forward, *candidate))
                if failures[-1] is None:
                    inputs, spec_text = candidate, ", ".join(
                        f"{n}=normal({', '.join(map(str, shape))}{'' if d == tf.float32 else ', dtype=' + d.name})"
                        for n, d in zip(names, dtypes))
                    break
            if inputs is None:
                return {**no_inputs_report(failures, seed).to_dict(), "function": function}
    except SpecError as e:
        return _skipped(f"bad input spec: {e}", seed, function)
    report = check_gradient(forward, *inputs, seed=seed, rtol=request.get("rtol"),
                            atol=request.get("atol"), probes=request.get("probes", 3),
                            intentional=bool(request.get("intentional", False)), graph=False)
    report.detail = f"{report.detail} ({what}, run by tf.gradients in a graph)"
    report.modes = {"graph": report.verdict}
    return {**report.to_dict(), "inputs": spec_text}


def _worst(results: list[dict]) -> dict:
    order = ("error", "mismatch", "intentional", "match", "skipped")
    return min(results, key=lambda r: order.index(r.get("verdict", "skipped")))
