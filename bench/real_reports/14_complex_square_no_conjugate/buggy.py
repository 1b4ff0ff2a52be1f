"""A complex square whose custom gradient multiplies by f'(z) instead of its conjugate.

Source: https://github.com/tensorflow/tensorflow/issues/3348
Symptom: tf.gradients gives the conjugate of what users expect for complex functions; a user
writing a C -> C custom gradient asks how TensorFlow's convention reduces, since writing
dy * f'(z) disagrees with TensorFlow's own gradients.
TF 2.21: accepted silently: grad 2z = [2+4j, -1+0.5j] where autodiff of z * z gives 2 conj(z) =
[2-4j, -1-0.5j].
Class: conjugate
"""
import tensorflow as tf


@tf.custom_gradient
def csquare(z):
    def grad(dy):
        return dy * 2.0 * z  # TensorFlow's convention is dy * conj(f'(z))

    return z * z, grad


z = tf.constant([1.0 + 2.0j, -0.5 + 0.25j], dtype=tf.complex64)
with tf.GradientTape() as tape:
    tape.watch(z)
    y = tf.reduce_sum(tf.math.real(csquare(z)))
print("grad:", tape.gradient(y, z).numpy())
