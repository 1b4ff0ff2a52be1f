"""Eager-only gradients are right eagerly and fail under tf.function (model.fit): the check
says so with TensorFlow's message instead of a plain `match`."""

import numpy as np
import tensorflow as tf

from cglint.runtime import check_gradient

X = tf.constant([[0.3, -0.2], [0.5, 0.1]])


@tf.custom_gradient
def numpy_in_grad(x):
    return tf.sin(x), lambda dy: dy * np.cos(x.numpy())


@tf.custom_gradient
def variable_inside(x):
    v = tf.Variable(2.0)
    return x * v, lambda dy, variables=None: (dy * v, [tf.reduce_sum(dy * x)])


@tf.custom_gradient
def graph_safe(x):
    return tf.sin(x), lambda dy: dy * tf.cos(x)


def test_numpy_in_grad_fn_is_an_error_under_tf_function():
    report = check_gradient(numpy_in_grad, X)
    assert report.verdict == "error"
    assert report.detail.startswith("under tf.function: ") and "numpy" in report.detail
    assert "(eager: matches autodiff" in report.detail


@tf.custom_gradient
def numpy_clipped_grad(x):
    """Clips the gradient at a NumPy percentile: eagerly a deliberate difference from autodiff,
    under tf.function (fit, a compiled step) a NotImplementedError."""
    def grad(dy):
        limit = np.percentile(np.abs(dy), 50)
        return tf.clip_by_value(dy, -limit, limit) * tf.cos(x)
    return tf.sin(x), grad


def test_a_grad_fn_that_differs_eagerly_and_fails_under_tf_function_is_an_error():
    report = check_gradient(numpy_clipped_grad, tf.constant([[0.3, -1.2, 0.7], [1.4, 0.1, -0.6]]))
    assert (report.verdict, report.modes["eager"], report.modes["tf.function"]) == ("error", "mismatch", "error")
    assert report.detail.startswith("under tf.function: NotImplementedError") and "(eager: d/x off by" in report.detail


def test_variable_created_in_forward_is_an_error_under_tf_function():
    report = check_gradient(variable_inside, X)
    assert report.verdict == "error" and "tf.function" in report.detail and "Variable" in report.detail


def test_graph_safe_function_still_matches_and_graph_check_can_be_turned_off():
    assert check_gradient(graph_safe, X).verdict == "match"
    assert check_gradient(numpy_in_grad, X, graph=False).verdict == "match"


@tf.custom_gradient
def clip_and_count(x):
    count = tf.reduce_sum(tf.cast(tf.abs(x) > 0.25, tf.int32))
    above = tf.abs(x) > 0.25

    def grad(dy, dcount, dabove):
        # TF 2.21 passes the integer and bool outputs' upstreams as tensors in both modes (older
        # tf.function passed None, jax#6975): using them must not turn into a graph-only error.
        return dy * 2.0 + tf.cast(dcount, x.dtype) * 0.0 + tf.cast(dabove, x.dtype) * 0.0

    return (x * 2.0, count, above), grad


def test_integer_and_bool_outputs_upstreams_are_tensors_under_tf_function_too():
    report = check_gradient(clip_and_count, X)
    assert (report.verdict, report.modes) == ("match", {"eager": "match", "tf.function": "match", "wide": "match"}), report
