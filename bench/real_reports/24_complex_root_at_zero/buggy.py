"""A smoothed complex square root (custom gradient finite at 0) under tf.function and a
persistent tape.

Source: https://github.com/tensorflow/tensorflow/issues/60468
Symptom: with a complex input, a persistent GradientTape, a tf.function that calls tf.pow and
the argument 0, the custom gradient ran and computed the right value, which was then
discarded somewhere in the tape (NaN came back).
TF 2.21: no longer reproduces: the custom gradient's value 0.5 / sqrt(EPS) = 15.81 comes back (no NaN).
Class: none-on-2.21
"""
import tensorflow as tf

EPS = 1e-3


@tf.custom_gradient
def smooth_sqrt(z):
    y = tf.pow(z, 0.5)

    def grad(dy):
        # derivative of sqrt, replaced near 0 by its value at |z| = EPS
        safe = tf.where(tf.abs(z) < EPS, tf.cast(EPS, z.dtype), z)
        return dy * tf.math.conj(0.5 * tf.pow(safe, -0.5))

    return y, grad


@tf.function
def loss(z):
    return tf.math.real(smooth_sqrt(z))


z = tf.constant(0.0 + 0.0j, dtype=tf.complex128)
with tf.GradientTape(persistent=True) as tape:
    tape.watch(z)
    y = loss(z)
print("grad:", tape.gradient(y, z).numpy())
