"""softplus as a Defun with a python_grad_func that returns the upstream unchanged.

Source: https://github.com/tensorflow/tensorflow/issues/3710
Symptom: with the Defun decorator the gradient of log(1 + exp(x)) was all ones; without it,
the sigmoid values (the grad func passed the upstream through without the derivative).
TF 2.21: same in graph mode: the gradient is all ones; autodiff gives sigmoid(x).
Class: upstream
"""
import numpy as np
import tensorflow as tf
from tensorflow.python.framework import function


def softplus_grad(op, grad):
    return grad  # should be grad * sigmoid(x)


@function.Defun(tf.float32, python_grad_func=softplus_grad)
def softplus(x):
    return tf.math.log(1.0 + tf.exp(x))


graph = tf.Graph()
with graph.as_default():
    x = tf.constant(np.arange(6, dtype=np.float32).reshape(3, 2))
    (g,) = tf.compat.v1.gradients(softplus(x), x)
    with tf.compat.v1.Session(graph=graph) as sess:
        print("grad:", sess.run(g).ravel())
