"""CG016's claim, with real TensorFlow: a float32 gradient for a float16 input (mixed precision)
is accepted by custom_gradient, and the op that made the input then fails in its own gradient;
the fixed fixture (the gradient cast back to `x.dtype`) gives a float16 gradient. Also what the
rule leaves alone: a NumPy float64 array times the upstream is converted to the upstream's dtype."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

RULES = Path(__file__).resolve().parents[2] / "fixtures" / "rules"


def load(name):
    spec = importlib.util.spec_from_file_location(name, RULES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.stable_log1p_exp


def grad_through_sin(f, x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f(tf.sin(x))
    return tape.gradient(y, x)


def test_the_bad_fixture_breaks_the_previous_ops_gradient_and_the_good_one_does_not():
    x = tf.constant([0.5, -1.0], tf.float16)
    with pytest.raises(tf.errors.InvalidArgumentError, match="half tensor"):
        grad_through_sin(load("cg016_bad"), x)
    assert grad_through_sin(load("cg016_good"), x).dtype == tf.float16
    # A leaf input: accepted silently, in the wrong dtype.
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = load("cg016_bad")(x)
    assert tape.gradient(y, x).dtype == tf.float32


def test_numpy_arrays_take_the_upstreams_dtype():
    @tf.custom_gradient
    def scale(x):
        return x * 3.0, lambda dy: dy * np.full([2], 3.0)

    g = grad_through_sin(scale, tf.constant([1.0, 2.0]))
    assert g.dtype == tf.float32
