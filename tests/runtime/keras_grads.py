"""Child process for test_keras_fixes: for each Keras layer file given, the layer's gradients
(its input and every trainable weight, for a random upstream gradient) against TensorFlow
autodiff of the same forward with its custom gradient removed, eagerly and under tf.function.
Prints one JSON object: {path: {"eager": result, "graph": result}}, where a result is
{"max_abs_error": float} or {"error": "Type: message"}."""

import functools
import importlib.util
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

REAL = tf.custom_gradient


def _without_custom_gradient(f=None):
    """The forward alone: TensorFlow differentiates the ops it runs (the reference)."""
    if f is None:
        return _without_custom_gradient

    @functools.wraps(f)
    def forward(*args, **kwargs):
        return f(*args, **kwargs)[0]

    return forward


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _grads(layer, x, upstream):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x)
    return tape.gradient(y, [x, *layer.trainable_weights], output_gradients=upstream)


def check(path):
    custom = _load(path, "custom_" + os.path.basename(path)[:-3])
    layer, x = custom.example()
    layer.build(x.shape)  # not by calling it: an unfixed forward may raise
    tf.custom_gradient = _without_custom_gradient
    try:
        plain = _load(path, "plain_" + os.path.basename(path)[:-3])
        ref_layer, _ = plain.example()
        y = ref_layer(x)
        ref_layer.set_weights(layer.get_weights())
        upstream = tf.random.stateless_normal(tf.shape(y), seed=(42, 0))
        reference = [g.numpy() for g in _grads(ref_layer, x, upstream)]
    finally:
        tf.custom_gradient = REAL
    out = {}
    for mode, run in (("eager", _grads), ("graph", tf.function(_grads))):
        try:
            got = run(layer, x, upstream)
            errors = [float(np.max(np.abs((g.numpy() if g is not None else 0.0) - r))) for g, r in zip(got, reference)]
            out[mode] = {"max_abs_error": max(errors)}
        except Exception as exc:  # noqa: BLE001 - the verdict is the exception
            out[mode] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
    return out


if __name__ == "__main__":
    print(json.dumps({path: check(path) for path in sys.argv[1:]}))
