"""A NumPy least-squares "layer" whose custom gradient is cast back to the inputs' dtype.

Source: https://github.com/cvxpy/cvxpylayers/issues/92
Symptom: (fixed version) the solver works in float64 and the gradients are cast to the float32
of the parameters; the report's float64 gradients broke the MatMul before the layer.
TF 2.21: a float32 gradient of shape (3, 2), equal to float64 autodiff of the closed form.
Class: dtype (fixed: expect match)
"""
import numpy as np
import tensorflow as tf


@tf.custom_gradient
def lstsq_layer(a, b):
    a64, b64 = a.numpy().astype(np.float64), b.numpy().astype(np.float64)
    sol = np.linalg.solve(a64.T @ a64, a64.T @ b64)

    def grad(dy):
        dy64 = dy.numpy().astype(np.float64)
        lam = np.linalg.solve(a64.T @ a64, dy64)
        r = b64 - a64 @ sol
        da = np.outer(r, lam) - np.outer(a64 @ lam, sol)
        db = a64 @ lam
        return tf.constant(da, dtype=a.dtype), tf.constant(db, dtype=b.dtype)

    return tf.constant(sol, dtype=a.dtype), grad


w = tf.Variable(tf.random.stateless_normal((3, 2), seed=(4, 5)))
b = tf.random.stateless_normal((3,), seed=(4, 6))
with tf.GradientTape() as tape:
    a = tf.matmul(w, tf.eye(2))
    loss = tf.reduce_sum(lstsq_layer(a, b))
print("grad:", tape.gradient(loss, w))
