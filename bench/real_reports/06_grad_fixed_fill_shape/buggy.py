"""A gated-mixture layer whose grad fn returns a gradient of a hard-coded shape.

Source: https://github.com/tensorflow/tensorflow/issues/26270
Symptom: inside an LSTM model the grad fn could not read the batch size (None), so it
returned tf.fill((1, 324, N), 1.0): a constant of a fixed shape instead of the input's.
TF 2.21: accepted silently: tape.gradient returns shape (1, 5, 8) for an input of shape (2, 5, 8),
all ones whatever the upstream.
Class: shape
"""
import tensorflow as tf

PARTS = 2


@tf.custom_gradient
def select_subnet(x):
    data, gate = x[..., :-PARTS], x[..., -PARTS:]
    size = data.shape[-1] // PARTS
    out = sum(data[..., i * size:(i + 1) * size] * gate[..., i:i + 1] for i in range(PARTS))

    def grad(dy):
        return tf.fill((1, 5, size * PARTS + PARTS), 1.0)  # the shape seen while building

    return out, grad


x = tf.random.stateless_normal((2, 5, 8), seed=(1, 2))
with tf.GradientTape() as tape:
    tape.watch(x)
    y = tf.reduce_sum(select_subnet(x) ** 2)
g = tape.gradient(y, x)
print("grad shape:", g.shape, "input shape:", x.shape)
