"""An identity whose grad fn returns one gradient per input.

Source: https://github.com/tensorflow/tensorflow/issues/26048
Symptom: (fixed version) the grad fn returns dy, one gradient for the one input; the report's
version returned [] and aborted.
TF 2.21: grad [1.0], as autodiff.
Class: contract-error (fixed: expect match)
"""
import tensorflow as tf


@tf.custom_gradient
def identity(x):
    def grad(dy):
        return dy

    return tf.identity(x), grad


x = tf.Variable(1.0)
with tf.GradientTape() as tape:
    y = identity(x)
print("grad:", tape.gradient(y, [x]))
