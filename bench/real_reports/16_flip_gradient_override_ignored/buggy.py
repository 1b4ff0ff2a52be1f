"""A gradient-reversal layer built with RegisterGradient + gradient_override_map, run in TF 2.

Source: https://github.com/pumpikano/tf-dann/issues/27
Symptom: the repository's flip_gradient registers a negating gradient and overrides Identity's
gradient with gradient_override_map; the issue proposes tf.custom_gradient instead. In TF 2
eager code the override map has no effect.
TF 2.21: the override map is ignored under the eager tape: grad = +2 * features, not the reversed
-0.3 * 2 * features. No error, no warning.
Class: sign
"""
import tensorflow as tf


class FlipGradient:
    def __init__(self):
        self.calls = 0

    def __call__(self, x, scale=1.0):
        name = "ReverseGrad%d" % self.calls
        self.calls += 1

        @tf.RegisterGradient(name)
        def _reverse(op, grad):
            return [tf.negative(grad) * scale]

        graph = tf.compat.v1.get_default_graph()
        with graph.gradient_override_map({"Identity": name}):
            return tf.identity(x)


flip_gradient = FlipGradient()

features = tf.Variable([[0.5, -1.0, 2.0]])
with tf.GradientTape() as tape:
    domain_loss = tf.reduce_sum(flip_gradient(features, 0.3) ** 2)
print("grad:", tape.gradient(domain_loss, features).numpy())
