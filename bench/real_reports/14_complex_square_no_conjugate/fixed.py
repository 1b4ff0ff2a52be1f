"""A complex square whose custom gradient multiplies by the conjugate of f'(z).

Source: https://github.com/tensorflow/tensorflow/issues/3348
Symptom: (fixed version) for a holomorphic f, TensorFlow's gradient is dy * conj(f'(z)); the
unconjugated dy * f'(z) disagreed with TensorFlow's own gradients.
TF 2.21: grad 2 * conj(z), as autodiff of z * z.
Class: conjugate (fixed: expect match)
"""
import tensorflow as tf


@tf.custom_gradient
def csquare(z):
    def grad(dy):
        return dy * tf.math.conj(2.0 * z)

    return z * z, grad


z = tf.constant([1.0 + 2.0j, -0.5 + 0.25j], dtype=tf.complex64)
with tf.GradientTape() as tape:
    tape.watch(z)
    y = tf.reduce_sum(tf.math.real(csquare(z)))
print("grad:", tape.gradient(y, z).numpy())
