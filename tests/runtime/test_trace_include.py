"""`cglint trace --include PACKAGE`: the custom gradients of an installed library (Keras's own
quantized layers) are left alone by default and checked when the user names the package."""

import functools
import importlib.util

import tensorflow as tf
from tensorflow.python.ops import custom_gradient

from cglint.trace import instrument

WRONG = '''
import tensorflow as tf


def cube(x):  # the forward `tf.custom_gradient` hands to TensorFlow's eager decorator
    return x ** 3, lambda dy: dy * 2.0 * x
'''


def _traced_events(path, monkeypatch, include):
    if include is None:
        monkeypatch.delenv("CGLINT_TRACE_INCLUDE", raising=False)
    else:
        monkeypatch.setenv("CGLINT_TRACE_INCLUDE", include)
    spec = importlib.util.spec_from_file_location(f"cglint_include_{abs(hash((str(path), include)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    original = custom_gradient._eager_mode_decorator
    if isinstance(original, functools.partial):  # this process's tracer, installed by another test
        original = original.args[0]
    tracer = instrument.Tracer(1)
    events: list[dict] = []
    tracer.sinks.append(events.append)
    y = tracer.call(original, module.cube, (tf.constant([1.0, 2.0]),), {}, eager=True)
    assert y.numpy().tolist() == [1.0, 8.0]  # the program's own call is unchanged
    return [(e["event"], e["report"]["verdict"]) for e in events if e["event"] == "check"]


def test_a_librarys_custom_gradient_is_checked_only_when_included(tmp_path, monkeypatch):
    lib = tmp_path / "site-packages" / "keras" / "src" / "layers"
    lib.mkdir(parents=True)
    path = lib / "cube.py"
    path.write_text(WRONG)
    assert _traced_events(path, monkeypatch, None) == []  # Keras's own: not the user's
    assert _traced_events(path, monkeypatch, "keras") == [("check", "mismatch")]
    assert _traced_events(path, monkeypatch, "keras.src.layers") == [("check", "mismatch")]
    assert _traced_events(path, monkeypatch, "keras.src.ops") == []  # another subpackage
    assert _traced_events(path, monkeypatch, str(lib)) == [("check", "mismatch")]  # a directory


def test_keras_variables_marked_overwrite_with_gradient_are_found_from_the_layer():
    """float8 training: the layer passes its scale variables into the custom gradient, whose
    grad fn returns their next values; trace finds them among the closed-over layer's variables."""
    import os

    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras
    from keras import ops

    layer = keras.layers.Dense(3)
    layer.build((None, 4))
    layer.quantize("float8")
    x = tf.ones([2, 4])
    scale, history = ops.convert_to_tensor(layer.inputs_scale), ops.convert_to_tensor(layer.inputs_amax_history)

    def quantized_dequantize_inputs(inputs, scale, amax_history):  # reads the layer, as Keras's does
        return inputs * layer.compute_dtype_size, None

    layer.compute_dtype_size = 1.0
    assert instrument._overwritten(quantized_dequantize_inputs, (x, scale, history)) == (1, 2)
    layer.inputs_scale.overwrite_with_gradient = False
    assert instrument._overwritten(quantized_dequantize_inputs, (x, scale, history)) == (2,)
