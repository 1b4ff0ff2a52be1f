"""Keras 3.15's per-channel int4 Dense and EinsumDense under mixed_bfloat16: the custom gradient
returns a float32 gradient for bfloat16 inputs (`cglint trace --include keras` on Keras's own
quantization tests says so), and backpropagation through a bfloat16 op before the layer raises.

    KERAS_BACKEND=tensorflow python bench/keras_int4_bfloat16.py
"""
import os
os.environ["KERAS_BACKEND"] = "tensorflow"
import keras, tensorflow as tf
from keras.quantizers import Int4QuantizationConfig
for name, make in (("Dense", lambda: keras.layers.Dense(4, dtype="mixed_bfloat16")),
                   ("EinsumDense", lambda: keras.layers.EinsumDense("ab,bc->ac", output_shape=4, dtype="mixed_bfloat16"))):
    layer = make()
    layer.build((None, 8))
    layer.quantize("int4", config=Int4QuantizationConfig(block_size=None))
    x = tf.random.normal([2, 8], dtype=tf.bfloat16)
    with tf.GradientTape() as tape:
        tape.watch(x)
        h = layer(x)
    print(name, "d/x dtype:", tape.gradient(h, x).dtype, "for bfloat16 x")
    w = tf.Variable(tf.random.normal([8], dtype=tf.bfloat16))
    try:
        with tf.GradientTape() as tape:
            h = layer(tf.sin(x * w))
        print(name, "d/w:", tape.gradient(h, w).dtype)
    except Exception as e:
        print(name, "backprop through a bfloat16 op before the layer raises:", type(e).__name__, str(e).splitlines()[0][:160])
