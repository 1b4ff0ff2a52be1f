"""A Euclidean norm whose custom gradient rescales by the largest entry before dividing.

Source: https://github.com/tensorflow/tensorflow/issues/12071
Symptom: (fixed version) x / norm(x) is computed as (x / m) / norm(x / m) with m = max |x|, so
neither the squares nor the norm underflow; the thread's x / norm(x) was inf/NaN for tiny x.
TF 2.21: grad [0.6, 0.8, 0], the float64 value of x / |x|.
Class: instability (fixed: expect match)
"""
import tensorflow as tf


@tf.custom_gradient
def norm(x):
    m = tf.reduce_max(tf.abs(x))
    safe_m = tf.where(m > 0, m, tf.ones_like(m))
    scaled = x / safe_m
    n = tf.norm(scaled) * safe_m

    def grad(dy):
        return dy * scaled / tf.where(m > 0, tf.norm(scaled), tf.ones_like(m))

    return n, grad


x = tf.constant([3e-25, 4e-25, 0.0])
with tf.GradientTape() as tape:
    tape.watch(x)
    y = norm(x)
print("grad:", tape.gradient(y, x).numpy())
