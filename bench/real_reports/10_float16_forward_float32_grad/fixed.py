"""A float16 square whose custom gradient is computed in float32 and cast back to float16.

Source: https://github.com/tensorflow/tensorflow/issues/6858
Symptom: (fixed version) the precision is kept inside the grad fn and the result is cast to the
input's dtype; returning float32 for a float16 input crashed in the report.
TF 2.21: grad 12.0 float16, as autodiff.
Class: dtype (fixed: expect match)
"""
import tensorflow as tf


@tf.custom_gradient
def square16(x):
    def grad(dy):
        g = 2.0 * tf.cast(x, tf.float32) * tf.cast(dy, tf.float32)
        return tf.cast(g, x.dtype)

    return tf.square(x), grad


x = tf.Variable(1.5, dtype=tf.float16)
with tf.GradientTape() as tape:
    loss = tf.cast(square16(x * 2.0), tf.float32)
g = tape.gradient(loss, x)
print("grad:", g, g.dtype)
