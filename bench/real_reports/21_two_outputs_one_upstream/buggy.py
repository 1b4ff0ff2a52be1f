"""A custom gradient with two outputs whose grad fn uses only the first output's upstream.

Source: https://github.com/tensorflow/tensorflow/issues/58941
Symptom: a user with 4 inputs, 2 outputs and the 8 partial derivatives asks how the grad fn
(one gradient per input) combines them: each input's gradient must sum the contributions of
both upstreams, dy1 * dy1/dxi + dy2 * dy2/dxi; using one upstream drops the other output.
TF 2.21: accepted silently: grads [0.6, 0.8] where autodiff of r + 10 * theta gives [-1.0, 2.0].
Class: upstream
"""
import tensorflow as tf


@tf.custom_gradient
def polar(x1, x2):
    r = tf.sqrt(x1 * x1 + x2 * x2)
    theta = tf.atan2(x2, x1)

    def grad(dr, dtheta):
        return dr * x1 / r, dr * x2 / r  # dtheta is never used

    return (r, theta), grad


x1 = tf.constant(3.0)
x2 = tf.constant(4.0)
with tf.GradientTape() as tape:
    tape.watch([x1, x2])
    r, theta = polar(x1, x2)
    loss = r + 10.0 * theta
print("grads:", [g.numpy() for g in tape.gradient(loss, [x1, x2])])
