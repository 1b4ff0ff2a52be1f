"""A custom gradient with two outputs whose grad fn sums both outputs' contributions.

Source: https://github.com/tensorflow/tensorflow/issues/58941
Symptom: (fixed version) each input's gradient is dr * dr/dxi + dtheta * dtheta/dxi, the
vector-Jacobian product over both outputs.
TF 2.21: grads [-1.0, 2.0], as autodiff of r + 10 * theta.
Class: upstream (fixed: expect match)
"""
import tensorflow as tf


@tf.custom_gradient
def polar(x1, x2):
    r = tf.sqrt(x1 * x1 + x2 * x2)
    theta = tf.atan2(x2, x1)

    def grad(dr, dtheta):
        r2 = r * r
        return dr * x1 / r - dtheta * x2 / r2, dr * x2 / r + dtheta * x1 / r2

    return (r, theta), grad


x1 = tf.constant(3.0)
x2 = tf.constant(4.0)
with tf.GradientTape() as tape:
    tape.watch([x1, x2])
    r, theta = polar(x1, x2)
    loss = r + 10.0 * theta
print("grads:", [g.numpy() for g in tape.gradient(loss, [x1, x2])])
