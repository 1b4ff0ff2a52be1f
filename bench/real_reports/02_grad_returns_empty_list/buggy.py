"""An identity whose grad fn returns an empty list (and, in a variant, too many gradients).

Source: https://github.com/tensorflow/tensorflow/issues/26048
Symptom: returning [] from the grad fn aborted the process (Check failed: op_tape.empty());
returning too many gradients ran silently.
TF 2.21: no abort any more: tape.gradient raises "ValueError: custom_gradient function expected
to return 1 gradients, but returned 0 instead."
Class: contract-error
"""
import tensorflow as tf


@tf.custom_gradient
def identity(x):
    def grad(dy):
        return []  # no gradient for the one input

    return tf.identity(x), grad


x = tf.Variable(1.0)
with tf.GradientTape() as tape:
    y = identity(x)
print("grad:", tape.gradient(y, [x]))
