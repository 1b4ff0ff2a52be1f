"""A mean-squared-error with a custom gradient, called with keyword arguments only, whose custom gradient is skipped.

Source: https://github.com/tensorflow/tensorflow/issues/65839
Symptom: with every argument passed by keyword the custom gradient is silently ignored and
autodiff's gradient is returned instead; a mix of positional and keyword arguments raises.
(The report's grad fn scales dx by 1000 to make the difference visible.)
TF 2.21: reproduces: the grad fn never runs (no "custom gradient used") and autodiff's gradient is
returned. Here the custom gradient equals autodiff, so only the bypass is wrong.
Class: contract-error
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
    loss = mse(pred=pred, target=target)
print("grad:", tape.gradient(loss, pred).numpy().ravel())
