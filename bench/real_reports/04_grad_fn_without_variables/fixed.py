"""A custom gradient that reads a variable made outside it, with a grad fn taking `variables`.

Source: https://github.com/tensorflow/tensorflow/issues/31945
Symptom: (fixed version) grad_fn(dy, variables=None) returns the input gradient and one
gradient per variable read; the report's grad fn had no `variables` and raised TypeError.
TF 2.21: grads [6.0, 6.0], as autodiff.
Class: contract-error (fixed: expect match)
"""
import tensorflow as tf

outside = tf.Variable(2.0, name="outside")


@tf.custom_gradient
def shifted_square(x):
    y = (x + outside) ** 2

    def grad(dy, variables=None):
        d = dy * 2.0 * (x + outside)
        return d, [d for _ in variables]

    return y, grad


x = tf.constant(1.0)
with tf.GradientTape() as tape:
    tape.watch(x)
    y = shifted_square(x)
print("grads:", tape.gradient(y, [x, outside]))
