"""What rules claim of TensorFlow, shown with real TensorFlow on their fixtures.

CG016: a float32 gradient for a float16 input (mixed precision) is accepted by custom_gradient,
and the op that made the input then fails in its own gradient; the fixed fixture (the gradient
cast back to `x.dtype`) gives a float16 gradient. What the rule leaves alone: a NumPy float64
array times the upstream is converted to the upstream's dtype.

CG017: `gradient_override_map` is ignored eagerly and under tf.function (the bad fixture's
gradient is zero), honoured in a TensorFlow 1 graph; the fixed fixture's custom gradient passes
the upstream through.

CG018: a gradient reduced over every axis for a per-channel `alpha` comes back as a scalar, and
an optimizer cannot apply it to the variable."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

RULES = Path(__file__).resolve().parents[2] / "fixtures" / "rules"


def load(name, function):
    spec = importlib.util.spec_from_file_location(name, RULES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, function)


def grad_through_sin(f, x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f(tf.sin(x))
    return tape.gradient(y, x)


def test_the_bad_fixture_breaks_the_previous_ops_gradient_and_the_good_one_does_not():
    x = tf.constant([0.5, -1.0], tf.float16)
    with pytest.raises(tf.errors.InvalidArgumentError, match="half tensor"):
        grad_through_sin(load("cg016_bad", "stable_log1p_exp"), x)
    assert grad_through_sin(load("cg016_good", "stable_log1p_exp"), x).dtype == tf.float16
    # A leaf input: accepted silently, in the wrong dtype.
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = load("cg016_bad", "stable_log1p_exp")(x)
    assert tape.gradient(y, x).dtype == tf.float32


def test_numpy_arrays_take_the_upstreams_dtype():
    @tf.custom_gradient
    def scale(x):
        return x * 3.0, lambda dy: dy * np.full([2], 3.0)

    g = grad_through_sin(scale, tf.constant([1.0, 2.0]))
    assert g.dtype == tf.float32


def gradient(f, x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    return tape.gradient(y, x)


def test_the_override_map_is_ignored_in_tensorflow_2_and_the_custom_gradient_is_not():
    x = tf.constant([0.5, -2.0])
    bad, good = load("cg017_bad", "binarize"), load("cg017_good", "binarize")
    assert gradient(bad, x).numpy().tolist() == [0.0, 0.0]  # sign's own gradient: the map did nothing
    assert tf.function(lambda x: gradient(bad, x))(x).numpy().tolist() == [0.0, 0.0]
    assert gradient(good, x).numpy().tolist() == [1.0, 1.0]


def test_the_override_map_works_in_a_tensorflow_1_graph():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.constant([0.5, -2.0])
        with graph.gradient_override_map({"Sign": "Identity"}):
            y = tf.sign(x)
        (g,) = tf.gradients(y, x)
        with tf.compat.v1.Session(graph=graph) as session:
            assert session.run(g).tolist() == [1.0, 1.0]


def test_a_gradient_reduced_over_every_axis_fails_an_optimizer_and_the_fixed_one_does_not():
    """CG018: custom_gradient hands back the scalar gradient for a per-channel `alpha`; applying
    it to the variable fails. Summed over the batch axis it has `alpha`'s shape."""
    x = tf.constant([[1.0, -2.0, -3.0], [-1.0, 2.0, -0.5]])
    for name, fails in (("cg018_bad", True), ("cg018_good", False)):
        alpha = tf.Variable([0.1, 0.2, 0.3])
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(load(name, "prelu")(x, alpha))
        g = tape.gradient(loss, alpha)
        assert (g.shape == ()) == fails
        if fails:
            with pytest.raises(tf.errors.InvalidArgumentError, match="shapes must be equal"):
                tf.keras.optimizers.SGD(0.1).apply_gradients([(g, alpha)])
        else:
            np.testing.assert_allclose(g.numpy(), [-1.0, -2.0, -3.5])
