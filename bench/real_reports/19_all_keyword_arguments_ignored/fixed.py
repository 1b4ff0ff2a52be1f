"""A mean-squared-error with a custom gradient, called with positional arguments, so its custom gradient is used.

Source: https://github.com/tensorflow/tensorflow/issues/65839
Symptom: (fixed version) positional arguments reach the custom gradient; called with keywords
only, TensorFlow silently used autodiff instead.
TF 2.21: the grad fn runs ("custom gradient used"); grad [-2/3, -4/3, -2], as autodiff.
Class: contract-error (fixed: expect match)
"""
import tensorflow as tf


@tf.custom_gradient
def mse(pred, target):
    diff = pred - target

    def grad(upstream):
        print("custom gradient used")
        g = upstream * 2.0 * diff / tf.cast(tf.shape(diff)[0], diff.dtype)
        return g, -g

    return tf.reduce_mean(tf.square(diff), axis=0), grad


pred = tf.constant([[4.0], [5.0], [6.0]])
target = tf.constant([[5.0], [7.0], [9.0]])
with tf.GradientTape() as tape:
    tape.watch(pred)
    loss = mse(pred, target)
print("grad:", tape.gradient(loss, pred).numpy().ravel())
