"""`gradient_override_map` in TF2 eager code: TensorFlow ignores it, silently. Under trace, each
registered gradient it names is that function's error, at its def, with where the map was entered."""

import uuid

import tensorflow as tf
from tensorflow.python.framework import ops

from cglint.trace import instrument


def test_an_override_map_entered_eagerly_is_the_registered_gradients_error():
    original = ops.Graph.gradient_override_map
    # TensorFlow's own method (another test may have installed the process's tracer already)
    ops.Graph.gradient_override_map = getattr(original, "_cglint_original", original)
    tracer = instrument.Tracer(1)
    events: list[dict] = []
    tracer.sinks.append(events.append)
    instrument._patch_override_map(tracer)
    name = f"Reverse_{uuid.uuid4().hex[:8]}"
    try:
        @tf.RegisterGradient(name)
        def reverse(op, grad):
            return [-grad]

        x = tf.Variable([1.0, -2.0])
        for _ in range(3):  # a training loop: one report
            with tf.GradientTape() as tape:
                with tf.compat.v1.get_default_graph().gradient_override_map({"Identity": name}):
                    y = tf.identity(x)
            assert tape.gradient(y, x).numpy().tolist() == [1.0, 1.0]  # TensorFlow's own gradient, not reversed

        @tf.function
        def compiled():  # in a graph the map applies: nothing to say
            with tf.compat.v1.get_default_graph().gradient_override_map({"Identity": name}):
                return tf.identity(x)

        compiled()
    finally:
        ops.Graph.gradient_override_map = original
    (event,) = events
    assert event["function"]["qualname"].endswith("reverse") and event["where"] == "override"
    assert event["message"] == (f"gradient_override_map({{'Identity': '{name}'}}) was entered while TensorFlow executes "
                                "eagerly, where it has no effect: the ops made under it keep Identity's own gradient and "
                                "this registered gradient never runs (tf.custom_gradient does what it meant)")
    assert event["at"].endswith("test_trace_override.py:29"), event["at"]
