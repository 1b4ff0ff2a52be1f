"""A NumPy least-squares "layer" whose custom gradient comes back in float64 for float32 inputs.

Source: https://github.com/cvxpy/cvxpylayers/issues/92
Symptom: with float32 parameters the backward pass through the layer produced a double tensor:
"cannot compute MatMul as input #1(zero-based) was expected to be a float tensor but is a
double tensor [Op:MatMul]" in the network before the layer.
TF 2.21: custom_gradient accepts the float64 gradients; the MatMul before the layer fails:
"cannot compute MatMul as input #1(zero-based) was expected to be a double tensor but is a
float tensor [Op:MatMul]".
Class: dtype
"""
import numpy as np
import tensorflow as tf


@tf.custom_gradient
def lstsq_layer(a, b):
    a64, b64 = a.numpy().astype(np.float64), b.numpy().astype(np.float64)
    sol = np.linalg.solve(a64.T @ a64, a64.T @ b64)

    def grad(dy):
        # adjoint of x = (A^T A)^{-1} A^T b, all in float64 as the solver works
        dy64 = dy.numpy().astype(np.float64)
        lam = np.linalg.solve(a64.T @ a64, dy64)
        r = b64 - a64 @ sol
        da = np.outer(r, lam) - np.outer(a64 @ lam, sol)
        db = a64 @ lam
        return tf.constant(da), tf.constant(db)  # float64

    return tf.constant(sol, dtype=a.dtype), grad


w = tf.Variable(tf.random.stateless_normal((3, 2), seed=(4, 5)))
b = tf.random.stateless_normal((3,), seed=(4, 6))
with tf.GradientTape() as tape:
    a = tf.matmul(w, tf.eye(2))  # the network before the layer
    loss = tf.reduce_sum(lstsq_layer(a, b))
print("grad:", tape.gradient(loss, w))
