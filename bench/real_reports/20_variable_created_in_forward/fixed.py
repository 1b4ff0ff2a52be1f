"""A custom-gradient loss that keeps its temporary value in a tensor, not a tf.Variable.

Source: https://github.com/tensorflow/tensorflow/issues/38622
Symptom: (fixed version) no variable is created inside the forward, so the grad fn owes one
gradient, for pred; a Variable made inside made TensorFlow expect another.
TF 2.21: grad [1, 2, 3], as autodiff of sum(0.5 * pred^2).
Class: contract-error (fixed: expect match)
"""
import tensorflow as tf


@tf.custom_gradient
def weighted_loss(pred):
    scratch = pred * 0.5
    value = tf.reduce_sum(scratch * pred)

    def grad(dy):
        return dy * pred

    return value, grad


pred = tf.constant([1.0, 2.0, 3.0])
with tf.GradientTape() as tape:
    tape.watch(pred)
    loss = weighted_loss(pred)
print("grad:", tape.gradient(loss, pred))
