"""A custom gradient whose second tensor is passed as a keyword argument.

Source: https://github.com/tensorflow/tensorflow/issues/77559
Symptom: calling func(x, y=y) under a tape and asking for both gradients raises that only one
gradient is expected, not two; func(x, y) works.
TF 2.21: the same: "ValueError: custom_gradient function expected to return 1 gradients, but
returned 2 instead." (the keyword tensor is not an input to the custom gradient).
Class: contract-error
"""
import tensorflow as tf


@tf.custom_gradient
def affine(x, y=0.0):
    def grad(dz):
        return 2.0 * dz, dz

    return 2.0 * x + y, grad


x = tf.constant(2.0)
y = tf.constant(3.0)
with tf.GradientTape() as tape:
    tape.watch([x, y])
    z = affine(x, y=y)
print("grads:", tape.gradient(z, [x, y]))
