"""A custom gradient that reads a variable made outside it, with a grad fn lacking `variables`.

Source: https://github.com/tensorflow/tensorflow/issues/31945
Symptom: TypeError: If using @custom_gradient with a function that uses variables, then
grad_fn must accept a keyword argument 'variables'.
TF 2.21: the same TypeError, raised when the custom gradient is called under the tape.
Class: contract-error
"""
import tensorflow as tf

outside = tf.Variable(2.0, name="outside")


@tf.custom_gradient
def shifted_square(x):
    y = (x + outside) ** 2

    def grad(dy):
        return dy * 2.0 * (x + outside)

    return y, grad


x = tf.constant(1.0)
with tf.GradientTape() as tape:
    tape.watch(x)
    y = shifted_square(x)
print("grads:", tape.gradient(y, [x, outside]))
