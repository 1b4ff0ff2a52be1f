"""A custom activation in a small MLP whose grad fn keeps the elementwise derivative.

Source: https://github.com/tensorflow/tensorflow/issues/44359
Symptom: (fixed version) the gradient is dy * slope, elementwise, the activation's shape; the
report's gradient had shape [] and the next MatMul's gradient failed.
TF 2.21: gradients of shapes (3, 4) and (4, 1), equal to autodiff.
Class: shape (fixed: expect match)
"""
import tensorflow as tf


@tf.custom_gradient
def leaky(x):
    slope = tf.where(x > 0, 1.0, 0.1)

    def grad(dy):
        return dy * slope

    return x * slope, grad


w1 = tf.Variable(tf.random.stateless_normal((3, 4), seed=(0, 1)))
w2 = tf.Variable(tf.random.stateless_normal((4, 1), seed=(0, 2)))
x = tf.random.stateless_normal((5, 3), seed=(0, 3))
with tf.GradientTape() as tape:
    loss = tf.reduce_sum(tf.matmul(leaky(tf.matmul(x, w1)), w2))
print("grads:", [g.shape for g in tape.gradient(loss, [w1, w2])])
