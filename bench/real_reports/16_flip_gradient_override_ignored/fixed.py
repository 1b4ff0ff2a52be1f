"""A gradient-reversal layer written with tf.custom_gradient, as the issue proposes.

Source: https://github.com/pumpikano/tf-dann/issues/27
Symptom: (fixed version) the reversal is a custom gradient (-scale * dy, and None for the
Python scale), which TF 2 honours eagerly and in graphs; the override map was ignored.
TF 2.21: grad = -0.3 * 2 * features.
Class: sign (fixed: expect match; a deliberate sign flip of the identity, which a checker may
call intentional)
"""
import tensorflow as tf


@tf.custom_gradient
def flip_gradient(x, scale=1.0):
    def grad(dy):
        return -dy * scale, None  # no gradient for the scale

    return tf.identity(x), grad


features = tf.Variable([[0.5, -1.0, 2.0]])
with tf.GradientTape() as tape:
    domain_loss = tf.reduce_sum(flip_gradient(features, 0.3) ** 2)
print("grad:", tape.gradient(domain_loss, features).numpy())
