"""A loss with a custom gradient that takes a variable as an argument, called in tf.function.

Source: https://github.com/google/qhbm-library/issues/78
Symptom: eagerly it works; under tf.function it raises "grad_fn must accept keyword argument
'variables', since function uses variables", and adding variables=None gives "None values
not supported".
TF 2.21: no longer reproduces: under tf.function the variable argument is read as a tensor, no
"variables" TypeError; grad [1.0, 2.0] as autodiff.
Class: none-on-2.21
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
        loss = energy(theta, x)
    return tape.gradient(loss, theta)


x = tf.constant([1.0, 2.0])
print("grad:", loss_and_grad(x))
