"""An expectation-value "circuit" in float32 whose custom gradient builds its Jacobian in float64.

Source: https://github.com/PennyLaneAI/pennylane/issues/2105
Symptom: with a float32 device dtype, the backward pass of the custom gradient raised
"cannot compute AddN as input #10(zero-based) was expected to be a float tensor but is a
double tensor [Op:AddN]" once a weight fed several outputs.
TF 2.21: the same failure: "cannot compute AddN as input #1(zero-based) was expected to be a
double tensor but is a float tensor [Op:AddN]".
Class: dtype
"""
import numpy as np
import tensorflow as tf


@tf.custom_gradient
def expvals(weights):
    out = tf.cos(weights)  # <Z> after RX(w) on each wire

    def grad(dy):
        jac = np.diag(-np.sin(weights.numpy().astype(np.float64)))  # parameter-shift, float64
        return tf.linalg.matvec(tf.constant(jac), tf.cast(dy, tf.float64), transpose_a=True)

    return out, grad


weights = tf.Variable([0.1, 0.2, 0.3], dtype=tf.float32)
with tf.GradientTape() as tape:
    e = expvals(weights)
    loss = tf.reduce_sum(e) + tf.reduce_sum(weights ** 2)  # the weights feed two terms
print("grad:", tape.gradient(loss, weights))
