"""CG019 gradient-value."""

from typing import Iterator

import libcst as cst

from cglint import directives
from cglint.diagnostics import Finding
from cglint.model import GradientSite
from cglint.samples import gradient_value_mismatch
from cglint.rules import rule
from cglint.rules.base import Invalid, Rule

# Rules that explain a wrong value more precisely where they fire (an output read for an input,
# an upstream not multiplied in, a gradient of another shape): theirs is the finding.
_MORE_PRECISE = ("CG005", "CG009", "CG018")


class GradientValue(Rule):
    """
    ## What it does
    Flags a grad fn whose gradients are not the forward's derivative, judged by the maths, not
    by a table of derivatives: the forward and the grad fn are evaluated (the project's NumPy
    versions of the ops, on sample arrays; the user's code is never run), the forward's
    vector-Jacobian product is taken by float64 central differences, and each returned gradient
    is compared with it at a few sample points. A dropped constant (SELU's `scale`), a sign
    error, a missing term (the softmax VJP's `- sum(dy * s)`), a wrong chain-rule factor or a
    wrong helper in another module is found wherever the expressions evaluate; nothing is
    claimed where they do not, and a finding needs a mismatch at every sample point, with
    samples of both signs (positive ones where both signs do not evaluate, and for parameters
    named for a positive domain, as the runtime samples them). Code written for inputs of
    other shapes or values is judged there too, and a finding must hold there as well: each
    input at the shape that broadcasts against the others and as a scalar (a per-channel or
    scalar temperature), and inputs the grad fn gives no gradient (labels, masks) as rows of
    probabilities and as 0/1 masks (`softmax - labels` is a cross-entropy's derivative only
    where labels sum to 1).

    Gradients that differ from the derivative on purpose are told apart from the numbers by
    the same decision `cglint --runtime` makes: gradient reversal or scaling of an identity
    forward, straight-through estimators of rounding and quantising forwards, clipping of the
    upstream, stopped gradients (`None`), and stable rewrites that give the same values. A
    different estimator meant as such is declared with `# cglint: intentional` at the end of
    the flagged line (the grad fn's `return`) or on or above the forward's def, as for the
    runtime check.

    ## Why is this bad?
    TensorFlow never checks a custom gradient against the forward: it trains on whatever the
    grad fn returns. With TensorFlow 2.21, the SELU below gave `tape.gradient` = 1.0 at `x = 1`
    where autodiff of the same forward gives 1.0507; training is silently slower or, with a
    sign error, climbs the loss. Fix the formula (the message says by how much, and whether the
    custom gradient is a constant multiple of the derivative), or mark a deliberate estimator.
    """

    code = "CG019"
    name = "gradient-value"
    summary = "A returned gradient differs from the forward's derivative at sample points"

    INVALID = [
        Invalid(
            '''
import tensorflow as tf

ALPHA = 1.6732632423543772
SCALE = 1.0507009873554805

@tf.custom_gradient
def selu(x):
    y = SCALE * tf.where(x > 0.0, x, ALPHA * (tf.exp(x) - 1.0))

    def grad(dy):
        return dy * tf.where(x > 0.0, 1.0, ALPHA * tf.exp(x))

    return y, grad
''',
            at="12:16"),
        # A sign error.
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def softplus(x):
    def grad(dy):
        return -dy * tf.sigmoid(x)

    return tf.math.log(1.0 + tf.exp(x)), grad
''',
            at="7:16"),
        # The softmax VJP without its second term.
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def softmax(logits):
    s = tf.nn.softmax(logits, axis=-1)

    def grad(dy):
        return dy * s

    return s, grad
''',
            at="9:16"),
        # A chain-rule factor missing, on one input of two.
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def wave(x, w):
    def grad(dy):
        return dy * w * tf.cos(w * x), dy * tf.cos(w * x)

    return tf.sin(w * x), grad
''',
            at="7:40"),
    ]
    VALID = [
        '''
import tensorflow as tf

ALPHA = 1.6732632423543772
SCALE = 1.0507009873554805

@tf.custom_gradient
def selu(x):
    y = SCALE * tf.where(x > 0.0, x, ALPHA * (tf.exp(x) - 1.0))

    def grad(dy):
        return dy * SCALE * tf.where(x > 0.0, 1.0, ALPHA * tf.exp(x))

    return y, grad
''',
        # A stable rewrite of the same derivative.
        '''
import tensorflow as tf

@tf.custom_gradient
def softplus(x):
    def grad(dy):
        return dy / (1.0 + tf.exp(-x))

    return tf.math.log(1.0 + tf.exp(x)), grad
''',
        # Gradient reversal of an identity forward.
        '''
import tensorflow as tf

@tf.custom_gradient
def reverse_gradient(x):
    def grad(dy):
        return -0.5 * dy

    return tf.identity(x), grad
''',
        # A straight-through estimator of rounding.
        '''
import tensorflow as tf

@tf.custom_gradient
def round_ste(x):
    def grad(dy):
        return dy

    return tf.round(x), grad
''',
        # Clipping of the upstream: the derivative for small upstreams.
        '''
import tensorflow as tf

@tf.custom_gradient
def clipped_tanh(x):
    t = tf.tanh(x)

    def grad(dy):
        return tf.clip_by_value(dy, -0.1, 0.1) * (1.0 - t * t)

    return t, grad
''',
        # A per-channel temperature, (C,) against `x` of (N, C): its gradient summed over the
        # batch is right there (TensorFlow 2.21: equal to autodiff), at the shape it is for.
        '''
import tensorflow as tf

@tf.custom_gradient
def tempered_sigmoid(x, temperature):
    s = tf.sigmoid(x / temperature)

    def grad(ds):
        d = ds * s * (1.0 - s)
        return d / temperature, -tf.reduce_sum(d * x, axis=0) / tf.square(temperature)

    return s, grad
''',
        # A gradient multiplier of an identity forward, its strength an input.
        '''
import tensorflow as tf

@tf.custom_gradient
def scale_gradient(x, multiplier):
    def grad(dy):
        return dy * multiplier, None

    return tf.identity(x), grad


def domain_head(features):
    return scale_gradient(features, -0.3)
''',
        # A surrogate gradient declared as such.
        '''
import tensorflow as tf

# cglint: intentional
@tf.custom_gradient
def soft_sign(x):
    def grad(dy):
        return dy * 0.5 * (1.0 - tf.tanh(x) ** 2)

    return tf.tanh(x), grad
''',
    ]

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        if len(site.grad_fns) != 1:
            return
        precise = [rule(code)() for code in _MORE_PRECISE]
        # The more precise rules' answers where they ran first in this lint (free); otherwise
        # they are asked only once the values differ (most sites evaluate right, fast).
        if any(site.__dict__.get("_fired", {}).get(r.code) for r in precise):
            return
        hit = gradient_value_mismatch(site.model, site, site.declared_intentional)
        if hit is None or any(r.fires_on(site) for r in precise):
            return
        grad = site.grad_fns[0]
        returns = [r.value for r in grad.returns if r.value is not None]
        anchor = returns[0] if len(returns) == 1 else grad.anchor
        slot, name, detail = hit.slots[0]
        if isinstance(anchor, cst.Tuple) and not site.variables and len(anchor.elements) == len(site.inputs) \
                and slot < len(anchor.elements):
            anchor = anchor.elements[slot].value
        also = [f"`{n}`" for _, n, _ in hit.slots[1:]]
        detail = detail.replace("autodiff", "the forward's derivative")  # the runtime's wording
        where = directives.suggestion(site.model.module, site.forward, grad.node,
                                      next(r.node for r in grad.returns if r.value is not None) if len(returns) == 1
                                      else None)
        yield Finding(
            anchor,
            f"`{grad.name}` returns a gradient for `{name}`{' (and ' + ', '.join(also) + ')' if also else ''} that is "
            f"not `{site.name}`'s derivative at sample points: {detail}; TensorFlow trains on it unchecked: fix the "
            f"formula{'' if 'intentional' in detail else ', or, for a deliberate estimator, ' + where}",
        )
