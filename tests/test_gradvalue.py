"""CG019's judgement of a grad fn's values against the forward's VJP (`cglint.samples.gradvalue`),
decided by the runtime's own verdict. Each buggy case here gave gradients off from autodiff in
TensorFlow 2.21, and each right one matched it (the intentional ones are told apart as the
runtime tells them)."""

import textwrap

from cglint.engine import lint_source


def cg019(code: str) -> list[tuple[int, int, str]]:
    result = lint_source(textwrap.dedent(code), "m.py")
    return [(d.line, d.column, d.message) for d in result.diagnostics if d.code == "CG019"]


OP = """
import tensorflow as tf

@tf.custom_gradient
def op(x):
    def grad(dy):
        return {grad}

    return {forward}, grad
"""


def test_the_message_says_by_how_much_and_the_runtime_explanation():
    ((line, col, message),) = cg019(OP.format(forward="tf.math.softplus(x)", grad="-dy * tf.sigmoid(x)"))
    assert (line, col) == (7, 16)
    assert "d/x off by 200%" in message and "custom = -1 x the forward's derivative, a sign error?" in message


def test_wrong_on_one_side_of_zero_is_wrong():
    # |x|'s derivative is sign(x): `dy` is right for x > 0 only (TensorFlow: -1 vs 1 at x < 0).
    assert len(cg019(OP.format(forward="tf.abs(x)", grad="dy"))) == 1
    assert cg019(OP.format(forward="tf.abs(x)", grad="dy * tf.sign(x)")) == []


def test_a_positive_domain_is_sampled_positive():
    # sqrt is NaN for both signs at once: judged at positive samples.
    assert cg019(OP.format(forward="tf.sqrt(x)", grad="dy * 0.5 / tf.sqrt(x)")) == []
    assert len(cg019(OP.format(forward="tf.sqrt(x)", grad="dy / tf.sqrt(x)"))) == 1


def test_stop_gradient_in_the_forward_is_autodiff_s():
    # Autodiff of x * stop_gradient(s) is s: the grad fn that returns dy * s matches it.
    assert cg019(OP.format(forward="x * tf.stop_gradient(tf.sigmoid(x))", grad="dy * tf.sigmoid(x)")) == []


def test_nothing_is_claimed_where_the_maths_is_unknown():
    assert cg019(OP.format(forward="tf.linalg.expm(x)", grad="-dy")) == []


def test_intentional_estimators_are_not_flagged():
    for forward, grad in [("tf.identity(x)", "-2.0 * dy"),  # a reversal, scaled
                          ("tf.round(x)", "dy"),  # straight-through
                          ("tf.tanh(x)", "tf.clip_by_value(dy, -0.01, 0.01) * (1.0 - tf.tanh(x) ** 2)"),  # clipping
                          ("tf.tanh(x)", "None")]:  # a stop
        assert cg019(OP.format(forward=forward, grad=grad)) == [], (forward, grad)


def test_a_helper_the_grad_fn_calls_is_followed():
    code = """
    import tensorflow as tf

    def softmax_vjp(dy, p):
        return p * dy  # the second term, - p * sum(dy * p), is missing

    @tf.custom_gradient
    def softmax(logits):
        p = tf.nn.softmax(logits)

        def grad(dy):
            return softmax_vjp(dy, p)

        return p, grad
    """
    assert [(line, col) for line, col, _ in cg019(code)] == [(12, 16)]
    assert cg019(code.replace("p * dy  #", "p * (dy - tf.reduce_sum(dy * p, axis=-1, keepdims=True))  #")) == []


XENT = """
import tensorflow as tf

@tf.custom_gradient
def softmax_xent(logits, labels):
    logp = tf.nn.log_softmax(logits)

    def grad(dy):
        return tf.expand_dims(dy, -1) * (tf.exp(logp) {op} labels), None

    return -tf.reduce_sum(labels * logp, axis=-1), grad
"""


def test_data_inputs_are_also_sampled_as_the_code_assumes():
    # `softmax - labels` is the derivative where each row of labels sums to 1 (one-hot or
    # probabilities), not for any labels: judged there too, so only the sign error is flagged.
    assert cg019(XENT.format(op="-")) == []
    assert [(line, col) for line, col, _ in cg019(XENT.format(op="+"))] == [(9, 16)]
