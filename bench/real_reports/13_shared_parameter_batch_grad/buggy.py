"""A batched linear "layer" with a shared matrix whose custom gradient keeps the batch axis.

Source: https://github.com/cvxpy/cvxpylayers/pull/23 (broadcasting of parameters for the TF
layer; the issue is https://github.com/cvxpy/cvxpylayers/issues/2)
Symptom: with a batched b and an unbatched A, the gradient for the shared A must be summed over
the batch ("the shared/non-batched parameter needs to accumulate the gradients from all of
the batch instances"); without the sum it is batch-shaped.
TF 2.21: accepted silently: tape.gradient returns shape (4, 3, 2) for a parameter of shape (3, 2).
Class: shape
"""
import tensorflow as tf


@tf.custom_gradient
def layer(a, b):
    # x_i = A^T b_i for every batch row b_i
    x = tf.matmul(b, a)

    def grad(dx):
        da = tf.einsum("bm,bn->bmn", b, dx)  # one matrix per batch row, never summed
        db = tf.matmul(dx, a, transpose_b=True)
        return da, db

    return x, grad


a = tf.Variable(tf.random.stateless_normal((3, 2), seed=(7, 1)))
b = tf.random.stateless_normal((4, 3), seed=(7, 2))
with tf.GradientTape() as tape:
    loss = tf.reduce_sum(layer(a, b))
g = tape.gradient(loss, a)
print("grad shape:", g.shape, "parameter shape:", a.shape)
