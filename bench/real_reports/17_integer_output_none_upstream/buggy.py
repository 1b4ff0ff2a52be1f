"""A custom gradient with a float and an integer output, differentiated under tf.function.

Source: https://github.com/jax-ml/jax/pull/6977 (fixes https://github.com/jax-ml/jax/issues/6975)
Symptom: jax2tf's custom gradient failed for functions with integer results: "a peculiarity of
tf.function, which uses None for the cotangents corresponding to non-float results. This
does not happen in TF eager."
TF 2.21: no longer reproduces: under tf.function the integer output's upstream reaches the grad fn
as a tensor, not None; grad [1, 0, 0.5, 0] as autodiff.
Class: none-on-2.21
"""
import tensorflow as tf


@tf.custom_gradient
def clip_and_count(x):
    y = tf.clip_by_value(x, -1.0, 1.0)
    count = tf.reduce_sum(tf.cast(tf.abs(x) > 1.0, tf.int32))
    mask = tf.cast(tf.abs(x) <= 1.0, x.dtype)

    def grad(dy, dcount):
        return dy * mask + tf.cast(dcount, x.dtype) * 0.0  # dcount is None under tf.function

    return (y, count), grad


@tf.function
def step(x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y, _ = clip_and_count(x)
        loss = tf.reduce_sum(y * y)
    return tape.gradient(loss, x)


x = tf.constant([0.5, -2.0, 0.25, 3.0])
print("grad:", step(x).numpy())
