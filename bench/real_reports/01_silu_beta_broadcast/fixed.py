"""Swish with a per-feature beta whose custom gradient collapses d/dbeta to a scalar.

Source: https://github.com/tensorflow/tensorflow/issues/127690
Symptom: (fixed version) the beta gradient is summed over the broadcast batch axis only, as
the report asks; before the fix it collapsed to a scalar.
TF 2.21: d/dbeta has shape (2,) and equals autodiff of x * sigmoid(beta * x).
Class: shape (fixed: expect match)
"""
import tensorflow as tf


@tf.custom_gradient
def swish(x, beta):
    s = tf.sigmoid(beta * x)

    def grad(dy):
        ds = s * (1.0 - s)
        dx = dy * (s + beta * x * ds)
        dbeta = tf.reduce_sum(dy * x * x * ds, axis=0)  # reduced to beta's shape only
        return dx, dbeta

    return x * s, grad


x = tf.constant([[0.5, -1.0], [2.0, 0.3], [1.5, -0.2]])
beta = tf.constant([1.0, 2.0])
with tf.GradientTape() as tape:
    tape.watch(beta)
    y = tf.reduce_sum(swish(x, beta))
print("d/dbeta:", tape.gradient(y, beta))
