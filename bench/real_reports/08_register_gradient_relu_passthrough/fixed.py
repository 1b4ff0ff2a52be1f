"""A gradient registered for Relu that multiplies the upstream by Relu's derivative.

Source: https://github.com/tensorflow/tensorflow/issues/29449
Symptom: (fixed version) the registered gradient masks the upstream where the output is 0,
as Relu's own gradient does; the report's override returned the upstream (all ones).
TF 2.21: grad 0 for inputs <= 0 and 1 above, as Relu's own gradient.
Class: upstream (fixed: expect match)
"""
import numpy as np
import tensorflow as tf


@tf.RegisterGradient("MaskedRelu")
def _masked(op, grad):
    return grad * tf.cast(op.outputs[0] > 0, grad.dtype)


graph = tf.Graph()
with graph.as_default():
    x = tf.constant(np.arange(10, dtype=np.float32).reshape(5, 2) - 5.0)
    with graph.gradient_override_map({"Relu": "MaskedRelu"}):
        y = tf.nn.relu(x)
    (g,) = tf.compat.v1.gradients(y, x)
    with tf.compat.v1.Session(graph=graph) as sess:
        print("grad:", sess.run(g).ravel())
