"""A loss with a custom gradient over a variable's value, called in tf.function.

Source: https://github.com/google/qhbm-library/issues/78
Symptom: (fixed version) the variable's value (tf.convert_to_tensor) is passed, so the grad fn
owes one gradient per argument and no `variables`; the report's version raised under
tf.function only.
TF 2.21: grad [1.0, 2.0], eagerly and under tf.function.
Class: none-on-2.21 (fixed: expect match; the report was a contract error)
"""
import tensorflow as tf

theta = tf.Variable([0.5, -0.3], name="theta")


@tf.custom_gradient
def energy(params, x):
    e = tf.reduce_sum(params * x)

    def grad(dy):
        return dy * x, dy * params

    return e, grad


@tf.function
def loss_and_grad(x):
    with tf.GradientTape() as tape:
        loss = energy(tf.convert_to_tensor(theta), x)
    return tape.gradient(loss, theta)


x = tf.constant([1.0, 2.0])
print("grad:", loss_and_grad(x))
