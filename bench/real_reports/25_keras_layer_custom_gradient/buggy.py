"""A Keras layer whose call builds a custom-gradient closure, used in a functional model.

Source: https://github.com/tensorflow/tensorflow/issues/50741
Symptom: "KerasTensors do not support tf.custom_gradient()": a layer with a custom gradient that
had worked before failed when the functional model was built (several undefined batch dims).
TF 2.21: no longer reproduces with Keras 3: the functional model builds and the custom gradient
(exact: d/dx limit * tanh(x / limit) = 1 - t^2) gives gradients for the kernel and bias.
Class: none-on-2.21
"""
import keras
import tensorflow as tf


class SoftClip(keras.layers.Layer):
    def __init__(self, limit=2.0, **kw):
        super().__init__(**kw)
        self.limit = limit

    def call(self, inputs):
        limit = self.limit

        @tf.custom_gradient
        def soft_clip(x):
            t = tf.tanh(x / limit)

            def grad(dy):
                return dy * (1.0 - t * t)

            return limit * t, grad

        return soft_clip(inputs)


inp = keras.Input(shape=(None, None, 3))
out = SoftClip()(keras.layers.Conv2D(3, 3, padding="same")(inp))
model = keras.Model(inp, out)
x = tf.random.stateless_normal((2, 5, 5, 3), seed=(3, 3))
with tf.GradientTape() as tape:
    loss = tf.reduce_sum(model(x))
print("grads:", [g.shape for g in tape.gradient(loss, model.trainable_variables)])
