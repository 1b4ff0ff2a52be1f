"""A custom activation in a small MLP whose grad fn averages the derivative to a scalar.

Source: https://github.com/tensorflow/tensorflow/issues/44359
Symptom: training the MLP with the custom activation fails in the next layer's gradient:
"InvalidArgumentError: In[0] is not a matrix. Instead it has shape [] [Op:MatMul]" (the
activation's gradient had lost its shape); tf.nn.relu works.
TF 2.21: the same failure far from the cause: the next MatMul's gradient raises
"InvalidArgumentError: ... In[1] ndims must be >= 2 [Op:MatMul]".
Class: shape
"""
import tensorflow as tf


@tf.custom_gradient
def leaky(x):
    slope = tf.where(x > 0, 1.0, 0.1)

    def grad(dy):
        return tf.reduce_mean(dy * slope)  # one number for the whole batch

    return x * slope, grad


w1 = tf.Variable(tf.random.stateless_normal((3, 4), seed=(0, 1)))
w2 = tf.Variable(tf.random.stateless_normal((4, 1), seed=(0, 2)))
x = tf.random.stateless_normal((5, 3), seed=(0, 3))
with tf.GradientTape() as tape:
    loss = tf.reduce_sum(tf.matmul(leaky(tf.matmul(x, w1)), w2))
print("grads:", [g.shape for g in tape.gradient(loss, [w1, w2])])
