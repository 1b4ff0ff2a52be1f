"""A scale by a variable whose grad fn returns the derivative for the input and the variable.

Source: https://github.com/tensorflow/tensorflow/issues/21756
Symptom: (fixed version) d(x*w)/dx = w and d(x*w)/dw = x, times the upstream; the thread's
answer returned the upstream for both.
TF 2.21: dx = 10, dw = 3, as autodiff.
Class: upstream (fixed: expect match)
"""
import tensorflow as tf

w = tf.Variable(10.0, name="margin_w")


@tf.custom_gradient
def scaled(x):
    def grad(dy, variables=None):
        return dy * w, [dy * x for _ in variables]

    return x * w, grad


x = tf.constant(3.0)
with tf.GradientTape() as tape:
    tape.watch(x)
    y = scaled(x)
print("dx, dw:", tape.gradient(y, [x, w]))
