"""softplus as a Defun with a python_grad_func that multiplies the upstream by sigmoid(x).

Source: https://github.com/tensorflow/tensorflow/issues/3710
Symptom: (fixed version) the grad func returns grad * sigmoid(x), the derivative of
log(1 + exp(x)); the report's returned the upstream (all ones).
TF 2.21: grad = sigmoid(x), as autodiff.
Class: upstream (fixed: expect match)
"""
import numpy as np
import tensorflow as tf
from tensorflow.python.framework import function


def softplus_grad(op, grad):
    return grad * tf.sigmoid(op.inputs[0])


@function.Defun(tf.float32, python_grad_func=softplus_grad)
def softplus(x):
    return tf.math.log(1.0 + tf.exp(x))


graph = tf.Graph()
with graph.as_default():
    x = tf.constant(np.arange(6, dtype=np.float32).reshape(3, 2))
    (g,) = tf.compat.v1.gradients(softplus(x), x)
    with tf.compat.v1.Session(graph=graph) as sess:
        print("grad:", sess.run(g).ravel())
