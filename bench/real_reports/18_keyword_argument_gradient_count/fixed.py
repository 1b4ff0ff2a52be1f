"""A custom gradient whose tensors are all passed positionally.

Source: https://github.com/tensorflow/tensorflow/issues/77559
Symptom: (fixed version) TensorFlow differentiates positional arguments only, so both tensors
are passed positionally and the grad fn's two gradients are expected; the keyword call
raised a gradient-count error.
TF 2.21: grads [2.0, 1.0], as autodiff.
Class: contract-error (fixed: expect match)
"""
import tensorflow as tf


@tf.custom_gradient
def affine(x, y):
    def grad(dz):
        return 2.0 * dz, dz

    return 2.0 * x + y, grad


x = tf.constant(2.0)
y = tf.constant(3.0)
with tf.GradientTape() as tape:
    tape.watch([x, y])
    z = affine(x, y)
print("grads:", tape.gradient(z, [x, y]))
