"""Swish with a per-feature beta whose custom gradient collapses d/dbeta to a scalar.

Source: https://github.com/tensorflow/tensorflow/issues/127690
Symptom: tf.nn.silu's custom gradient reduces the beta derivative with an unconditional
reduce_sum, so a per-column beta gets one scalar gradient that sums unrelated partials.
TF 2.21: accepted silently; tape.gradient returns shape () for a beta of shape (2,).
Class: shape
"""
import tensorflow as tf


@tf.custom_gradient
def swish(x, beta):
    s = tf.sigmoid(beta * x)

    def grad(dy):
        ds = s * (1.0 - s)
        dx = dy * (s + beta * x * ds)
        dbeta = tf.reduce_sum(dy * x * x * ds)  # collapsed over every axis
        return dx, dbeta

    return x * s, grad


x = tf.constant([[0.5, -1.0], [2.0, 0.3], [1.5, -0.2]])
beta = tf.constant([1.0, 2.0])
with tf.GradientTape() as tape:
    tape.watch(beta)
    y = tf.reduce_sum(swish(x, beta))
print("d/dbeta:", tape.gradient(y, beta))
