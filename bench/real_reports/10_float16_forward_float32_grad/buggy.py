"""A float16 square whose custom gradient is computed, and returned, in float32.

Source: https://github.com/tensorflow/tensorflow/issues/6858
Symptom: a float16 forward with a float32 backward (to keep precision) crashed, because
TensorFlow's gradient code assumes a gradient has its input's dtype.
TF 2.21: custom_gradient accepts the float32 gradient; the next op's gradient (x * 2.0) fails:
"cannot compute Mul as input #1(zero-based) was expected to be a float tensor but is a half
tensor [Op:Mul]".
Class: dtype
"""
import tensorflow as tf


@tf.custom_gradient
def square16(x):
    def grad(dy):
        return 2.0 * tf.cast(x, tf.float32) * tf.cast(dy, tf.float32)  # float32 for a float16 input

    return tf.square(x), grad


x = tf.Variable(1.5, dtype=tf.float16)
with tf.GradientTape() as tape:
    loss = tf.cast(square16(x * 2.0), tf.float32)
g = tape.gradient(loss, x)
print("grad:", g, g.dtype)
