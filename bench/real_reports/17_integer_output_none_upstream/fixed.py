"""A custom gradient with a float and an integer output that ignores the integer's upstream.

Source: https://github.com/jax-ml/jax/pull/6977 (fixes https://github.com/jax-ml/jax/issues/6975)
Symptom: (fixed version) the grad fn does not touch the integer output's upstream, which is None
under tf.function; using it failed in graph mode only.
TF 2.21: grad [1, 0, 0.5, 0] under tf.function, as autodiff.
Class: none-on-2.21 (fixed: expect match; the report was a contract error)
"""
import tensorflow as tf


@tf.custom_gradient
def clip_and_count(x):
    y = tf.clip_by_value(x, -1.0, 1.0)
    count = tf.reduce_sum(tf.cast(tf.abs(x) > 1.0, tf.int32))
    mask = tf.cast(tf.abs(x) <= 1.0, x.dtype)

    def grad(dy, dcount):
        del dcount  # no gradient flows through an integer output
        return dy * mask

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
