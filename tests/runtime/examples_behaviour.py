"""Child process for test_example_behaviour: runs rule examples with real TensorFlow + Keras 3.

Reads a JSON list of example sources on stdin. Each example is executed as a module; its last
class (a Keras layer or tf.Module, built with 2 for each required argument) or, without one,
its last public function is called on a fixed input. The gradients for a fixed random upstream
(the input's and the trainable variables') are compared with TensorFlow autodiff of the same
code run with `tf.custom_gradient` replaced by "the forward alone". Prints a JSON list with,
per example and mode (eager, and under tf.function), "match", "mismatch <max abs error>" or
"raises <Type>: <message>"."""

import ast
import functools
import importlib.util
import tempfile
import inspect
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

REAL = tf.custom_gradient
TMP = tempfile.mkdtemp(prefix="cglint-examples-")
_COUNT = 0
X = tf.constant([[0.3, 0.5, 0.7], [0.2, -0.4, 0.6]])


def _plain(f=None):
    if f is None:
        return _plain

    @functools.wraps(f)
    def forward(*args, **kwargs):
        return f(*args, **kwargs)[0]

    return forward


def _build(source):
    """(the object holding the variables or None, a callable taking X)."""
    # A real file: autograph (tf.function) reads the source of what it converts.
    global _COUNT
    _COUNT += 1
    path = os.path.join(TMP, f"example_{_COUNT}.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(f"example_{_COUNT}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    namespace = vars(module)
    classes = [v for v in namespace.values() if inspect.isclass(v) and v.__module__ == module.__name__]
    if classes:
        cls = classes[-1]
        required = [p for p in list(inspect.signature(cls.__init__).parameters.values())[1:]
                    if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        obj = cls(*[2 for _ in required])
        try:
            obj(X)  # builds Keras weights; an unfixed forward may raise here, the verdict comes later
        except Exception:  # noqa: BLE001
            pass
        return obj, obj
    defs = [node.name for node in ast.parse(source).body if isinstance(node, ast.FunctionDef) and node.name[0] != "_"]
    return None, namespace[defs[-1]]


def _variables(obj, tape):
    if obj is None:
        return list(tape.watched_variables())
    return list(getattr(obj, "trainable_weights", None) or getattr(obj, "trainable_variables", ()))


def _gradients(call, obj, upstream):
    with tf.GradientTape() as tape:
        tape.watch(X)
        y = call(X)
    grads = tape.gradient(y, [X, *_variables(obj, tape)], output_gradients=upstream)
    return [tf.zeros(()) if g is None else tf.convert_to_tensor(g) for g in grads]


def run(source):
    tf.custom_gradient = _plain
    try:
        ref_obj, ref_call = _build(source)
        y = ref_call(X)
        upstream = tf.random.stateless_normal(tf.shape(y), seed=(7, 7))
        reference = [g.numpy() for g in _gradients(ref_call, ref_obj, upstream)]
    finally:
        tf.custom_gradient = REAL
    out = {}
    for mode in ("eager", "graph"):
        try:
            obj, call = _build(source)
            if obj is not None:
                for mine, theirs in zip(_variables(obj, None), _variables(ref_obj, None)):
                    mine.assign(theirs)
            if mode == "eager":
                got = [g.numpy() for g in _gradients(call, obj, upstream)]
            else:
                # Closed over, not passed: a custom-gradient function handed to a tf.function as an
                # argument is converted by autograph around its decorator.
                got = [g.numpy() for g in tf.function(lambda: _gradients(call, obj, upstream))()]
            errors = [float(np.max(np.abs(g - r))) if g.shape == r.shape else float("inf")
                      for g, r in zip(got, reference)]
            worst = max(errors) if len(got) == len(reference) else float("inf")
            out[mode] = "match" if worst < 1e-4 else f"mismatch {worst:.3g}"
        except Exception as exc:  # noqa: BLE001 - the verdict is the exception
            out[mode] = f"raises {type(exc).__name__}: {str(exc).strip().splitlines()[0][:160]}"
    return out


if __name__ == "__main__":
    print(json.dumps([run(s) for s in json.load(sys.stdin)]))
