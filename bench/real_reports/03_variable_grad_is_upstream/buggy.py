"""A scale by a variable whose grad fn returns the upstream itself for the variable.

Source: https://github.com/tensorflow/tensorflow/issues/21756
Symptom: the thread settles the *form* (grad_fn(dy, variables=None) returns one gradient per
variable, `dy, [dy for v in variables]`), but that answer passes the upstream through for the
input and for the variable, without the derivative of x * w (w for x, x for w).
TF 2.21: accepted silently; dx = 1 and dw = 1 where autodiff gives dx = w = 10 and dw = x = 3.
Class: upstream
"""
import tensorflow as tf

w = tf.Variable(10.0, name="margin_w")


@tf.custom_gradient
def scaled(x):
    def grad(dy, variables=None):
        return dy, [dy for _ in variables]

    return x * w, grad


x = tf.constant(3.0)
with tf.GradientTape() as tape:
    tape.watch(x)
    y = scaled(x)
print("dx, dw:", tape.gradient(y, [x, w]))
