"""An expectation-value "circuit" in float32 whose custom gradient is cast to the weights' dtype.

Source: https://github.com/PennyLaneAI/pennylane/issues/2105
Symptom: (fixed version) the float64 Jacobian product is cast back to float32 before it is
returned; the report's float64 gradient broke the AddN that sums the weights' gradients.
TF 2.21: grad -sin(w) + 2w in float32, as autodiff.
Class: dtype (fixed: expect match)
"""
import numpy as np
import tensorflow as tf


@tf.custom_gradient
def expvals(weights):
    out = tf.cos(weights)

    def grad(dy):
        jac = np.diag(-np.sin(weights.numpy().astype(np.float64)))
        g = tf.linalg.matvec(tf.constant(jac), tf.cast(dy, tf.float64), transpose_a=True)
        return tf.cast(g, weights.dtype)

    return out, grad


weights = tf.Variable([0.1, 0.2, 0.3], dtype=tf.float32)
with tf.GradientTape() as tape:
    e = expvals(weights)
    loss = tf.reduce_sum(e) + tf.reduce_sum(weights ** 2)
print("grad:", tape.gradient(loss, weights))
