"""tf.recompute_grad (built on custom_gradient) with one tensor passed in two argument positions.

Source: https://github.com/tensorflow/tensorflow/issues/36999
Symptom: passing the same tensor as both arguments of a recompute_grad function gave a wrong
gradient (the contributions of the two positions were not added).
TF 2.21: no longer reproduces: grad [2, 2, 2], as autodiff of x + x.
Class: none-on-2.21
"""
import tensorflow as tf


@tf.recompute_grad
def add(a, b):
    return a + b


x = tf.ones(3)
with tf.GradientTape() as tape:
    tape.watch(x)
    y = tf.reduce_sum(add(x, x))
print("grad:", tape.gradient(y, x).numpy())
