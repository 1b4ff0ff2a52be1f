"""A gradient registered for Relu through gradient_override_map that returns the upstream.

Source: https://github.com/tensorflow/tensorflow/issues/29449
Symptom: overriding Relu's gradient with a function that "just passes the gradient through"
gave all ones instead of the ReLU gradient: the override drops the op's own derivative.
TF 2.21: same in graph mode (tf.compat.v1): the gradient is all ones where Relu's is 0 for x <= 0.
(In TF 2 eager code the override map would be ignored altogether.)
Class: upstream
"""
import numpy as np
import tensorflow as tf


@tf.RegisterGradient("PassThroughRelu")
def _pass_through(op, grad):
    return grad  # the upstream, without Relu's derivative


graph = tf.Graph()
with graph.as_default():
    x = tf.constant(np.arange(10, dtype=np.float32).reshape(5, 2) - 5.0)
    with graph.gradient_override_map({"Relu": "PassThroughRelu"}):
        y = tf.nn.relu(x)
    (g,) = tf.compat.v1.gradients(y, x)
    with tf.compat.v1.Session(graph=graph) as sess:
        print("grad:", sess.run(g).ravel())
