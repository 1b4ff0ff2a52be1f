"""CG007 input-gradient-count."""

from typing import Iterator

from cglint.diagnostics import Finding
from cglint.model import GradientSite
from cglint.rules.base import Invalid, Rule


class InputGradientCount(Rule):
    """
    ## What it does
    Flags a grad fn whose return holds a different number of input gradients than the
    forward has positional inputs. Only what is literal in the source is counted, after
    flattening nested tuples and lists the way TensorFlow does; `None` entries count (they
    are "no gradient for this input"). A `*args` forward, a starred return or a value of
    unknown structure (a helper's result) is never flagged. When the forward reads
    variables, the input gradients are the first element of `(input_grads, var_grads)`
    (a flat return there is CG002's finding).

    ## Why is this bad?
    TensorFlow flattens the grad fn's input gradients and requires exactly one per flattened
    positional argument of the call. Too many or too few raises at the first backward pass:
    `ValueError: custom_gradient function expected to return 3 gradients, but returned 2
    instead.` (eager), or `Recorded operation returned too few gradients` inside
    `tf.function`. Return `None` for an input that gets no gradient. A defaulted parameter
    is an input only when the caller passes it positionally, so either count is accepted
    for it (CG010 flags the defaulted parameter itself).
    """

    code = "CG007"
    name = "input-gradient-count"
    summary = "Number of input gradients returned differs from the number of positional inputs"

    INVALID = [
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def fma(p, q, r):
    def grad(dy):
        return dy * q, dy * p

    return p * q + r, grad
''',
            at="7:9"),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def square(x):
    return x * x, lambda dy: (2 * x * dy, None)
''',
            at="6:31"),
        Invalid(
            '''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scaled_sum(x, y):
    def grad(dy, variables=None):
        return dy * w, [tf.reduce_sum(dy * (x + y)) for v in variables]

    return (x + y) * w, grad
''',
            at="9:9"),
    ]
    VALID = [
        '''
import tensorflow as tf

@tf.custom_gradient
def fma(p, q, r):
    def grad(dy):
        return dy * q, dy * p, dy

    return p * q + r, grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def clip_min(x, threshold):
    def grad(dy):
        return dy * tf.cast(x > threshold, dy.dtype), None

    return tf.maximum(x, threshold), grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def add_all(*xs):
    return tf.add_n(xs), lambda dy: [dy for _ in xs]
''',
        '''
import tensorflow as tf

def grads_for(dy, x, y):
    return dy * y, dy * x

@tf.custom_gradient
def mul(x, y):
    return x * y, lambda dy: grads_for(dy, x, y)
''',
        '''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scaled_sum(x, y):
    def grad(dy, variables=None):
        return (dy * w, dy * w), [tf.reduce_sum(dy * (x + y)) for v in variables]

    return (x + y) * w, grad
''',
        '''
import tensorflow as tf

class Scale(tf.keras.layers.Layer):
    @tf.custom_gradient
    def call(self, x):
        return 2.0 * x, lambda dy: 2.0 * dy
''',
    ]

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        if site.has_varargs:
            return
        lo, hi = site.required_inputs, len(site.inputs)
        expected = str(hi) if lo == hi else f"{lo} to {hi}"
        model = site.model
        for grad in site.grad_fns:
            for ret in grad.returns:
                if ret.value is None:
                    continue
                pair = ret.elements if ret.elements is not None and len(ret.elements) == 2 else None
                if site.trainable_variables:
                    if pair is None:
                        continue  # flat or unknown: CG002's business
                    counts = [model.flat_count(pair[0], grad.scope)]
                elif grad.variables_param is not None and pair is not None:
                    # The grad fn takes variables the model cannot see: either reading holds.
                    counts = [model.flat_count(ret.value, grad.scope), model.flat_count(pair[0], grad.scope)]
                else:
                    counts = [model.flat_count(ret.value, grad.scope)]
                if None in counts or any(lo <= c <= hi for c in counts):  # type: ignore[operator]
                    continue
                got = counts[-1]
                yield Finding(
                    ret.node,
                    f"`{grad.name}` returns {got} input gradient{'s' if got != 1 else ''} but `{site.name}` takes "
                    f"{expected} positional input{'s' if hi != 1 else ''}: TensorFlow raises 'custom_gradient "
                    f"function expected to return {hi} gradients'; return one per input (`None` for none)",
                )
