"""CG017's claim, with real TensorFlow 2: `gradient_override_map` is ignored eagerly and under
tf.function (the bad fixture's gradient is zero), honoured in a TensorFlow 1 graph; the fixed
fixture's custom gradient passes the upstream through."""

import importlib.util
from pathlib import Path

import tensorflow as tf

RULES = Path(__file__).resolve().parents[2] / "fixtures" / "rules"


def load(name):
    spec = importlib.util.spec_from_file_location(name, RULES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.binarize


def gradient(f, x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    return tape.gradient(y, x)


def test_the_override_map_is_ignored_in_tensorflow_2_and_the_custom_gradient_is_not():
    x = tf.constant([0.5, -2.0])
    bad, good = load("cg017_bad"), load("cg017_good")
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
