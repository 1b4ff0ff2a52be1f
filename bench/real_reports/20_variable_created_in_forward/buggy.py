"""A custom-gradient loss that creates a temporary tf.Variable inside its forward.

Source: https://github.com/tensorflow/tensorflow/issues/38622
Symptom: declaring a temporary Variable() inside the custom-gradient function made TensorFlow
expect an additional gradient (one per variable the forward touches).
TF 2.21: a ValueError when the gradient is taken: "too many values to unpack (expected 2)" (the
grad fn must return (input gradients, variable gradients) once the forward touched a variable).
Class: contract-error
"""
import tensorflow as tf


@tf.custom_gradient
def weighted_loss(pred):
    scratch = tf.Variable(tf.ones_like(pred), trainable=True)  # temporary storage
    scratch.assign(pred * 0.5)
    value = tf.reduce_sum(scratch * pred)

    def grad(dy, variables=None):
        return dy * pred  # d(0.5 * pred^2)/dpred; nothing for the scratch variable

    return value, grad


pred = tf.constant([1.0, 2.0, 3.0])
with tf.GradientTape() as tape:
    tape.watch(pred)
    loss = weighted_loss(pred)
print("grad:", tape.gradient(loss, pred))
