"""A batched linear "layer" with a shared matrix whose custom gradient sums over the batch.

Source: https://github.com/cvxpy/cvxpylayers/pull/23 (broadcasting of parameters for the TF
layer; the issue is https://github.com/cvxpy/cvxpylayers/issues/2)
Symptom: (fixed version) the shared parameter's gradient accumulates over the batch rows, so it
has the parameter's shape; without the sum it was batch-shaped.
TF 2.21: gradient of shape (3, 2), equal to autodiff.
Class: shape (fixed: expect match)
"""
import tensorflow as tf


@tf.custom_gradient
def layer(a, b):
    x = tf.matmul(b, a)

    def grad(dx):
        da = tf.einsum("bm,bn->mn", b, dx)
        db = tf.matmul(dx, a, transpose_b=True)
        return da, db

    return x, grad


a = tf.Variable(tf.random.stateless_normal((3, 2), seed=(7, 1)))
b = tf.random.stateless_normal((4, 3), seed=(7, 2))
with tf.GradientTape() as tape:
    loss = tf.reduce_sum(layer(a, b))
g = tape.gradient(loss, a)
print("grad shape:", g.shape, "parameter shape:", a.shape)
