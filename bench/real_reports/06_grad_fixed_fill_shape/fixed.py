"""A gated-mixture layer whose grad fn computes the gradient from the input and the upstream.

Source: https://github.com/tensorflow/tensorflow/issues/26270
Symptom: (fixed version) each slice's gradient is dy * gate and each gate's is the sum of
dy * slice, so the gradient has the input's (dynamic) shape; the report returned a constant
fill of a fixed shape.
TF 2.21: gradient of shape (2, 5, 8) equal to autodiff.
Class: shape (fixed: expect match)
"""
import tensorflow as tf

PARTS = 2


@tf.custom_gradient
def select_subnet(x):
    data, gate = x[..., :-PARTS], x[..., -PARTS:]
    size = data.shape[-1] // PARTS
    out = sum(data[..., i * size:(i + 1) * size] * gate[..., i:i + 1] for i in range(PARTS))

    def grad(dy):
        d_data = [dy * gate[..., i:i + 1] for i in range(PARTS)]
        d_gate = [tf.reduce_sum(dy * data[..., i * size:(i + 1) * size], -1, keepdims=True) for i in range(PARTS)]
        return tf.concat(d_data + d_gate, axis=-1)

    return out, grad


x = tf.random.stateless_normal((2, 5, 8), seed=(1, 2))
with tf.GradientTape() as tape:
    tape.watch(x)
    y = tf.reduce_sum(select_subnet(x) ** 2)
g = tape.gradient(y, x)
print("grad shape:", g.shape, "input shape:", x.shape)
