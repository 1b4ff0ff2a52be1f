"""A Euclidean norm with a hand-written "stable" gradient x / norm(x), on tiny inputs.

Source: https://github.com/tensorflow/tensorflow/issues/12071
Symptom: tf.norm's gradient is NaN at 0 and inf for small values; the thread's workaround
replaces it with a custom gradient dy * x / norm(x), which still divides by a norm that
underflows to 0 in float32 when the entries are tiny (the true gradient x / |x| is finite).
TF 2.21: reproduces: grad [inf, inf, nan] in float32 (the squares underflow, the norm is 0);
the true gradient is [0.6, 0.8, 0]. Float32 autodiff of tf.norm is equally non-finite.
Class: instability
"""
import tensorflow as tf


@tf.custom_gradient
def norm(x):
    n = tf.norm(x)

    def grad(dy):
        return dy * x / n

    return n, grad


x = tf.constant([3e-25, 4e-25, 0.0])
with tf.GradientTape() as tape:
    tape.watch(x)
    y = norm(x)
print("grad:", tape.gradient(y, x).numpy())
