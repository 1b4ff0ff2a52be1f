"""CG016 gradient-dtype."""

from typing import Iterator

import libcst as cst

from cglint.diagnostics import Finding
from cglint.model import GradientSite, ModuleModel
from cglint.model.scopes import argument
from cglint.model.dtypes import fixed_dtype, forward_casts, input_dtype_evidence
from cglint.rules.base import Invalid, Rule



class GradientDtype(Rule):
    """
    ## What it does
    Flags an input gradient whose dtype the code fixes (`tf.cast(g, tf.float32)`,
    `tf.constant(..., dtype=tf.float64)`, arithmetic with such a value) to something other
    than what the module says its input holds: a call in the module passes a tensor of another
    dtype (`tf.constant([1.0, 2.0])` and `tf.random.normal(shape)` are float32, `tf.Variable(3.0)`
    too); the forward combines the input (or a value made from it, `tf.tanh(x)`) with a tensor
    of another dtype (`x * scale` for a `tf.Variable(3.0)`, `x @ kernel`: TensorFlow's ops take
    operands of one dtype, so the forward runs only for that dtype); the forward itself casts
    the input to that dtype (so the input comes in another one: a float16 input computed in
    float32 under mixed precision); or the module sets a `mixed_float16`/`mixed_bfloat16`
    policy for a Keras layer. Where the module says nothing of the input's dtype, nothing is
    assumed and nothing is flagged (a caller elsewhere may pass exactly that dtype: check it
    with `--runtime`). A gradient whose dtype follows the input (`tf.cast(g, x.dtype)`,
    `dy * ...`) is never flagged.

    ## Why is this bad?
    TensorFlow's `custom_gradient` does not check the dtypes the grad fn returns (verified on
    TensorFlow 2.21): a float32 gradient for a float16 or float64 input is accepted, and
    `tape.gradient` hands back the wrong dtype for a leaf input. When the input came out of
    another op, that op's gradient then fails far from the bug: "cannot compute Mul as input #1
    was expected to be a half tensor but is a float tensor". Cast the gradient back:
    `tf.cast(g, x.dtype)`.
    """

    code = "CG016"
    name = "gradient-dtype"
    summary = "An input gradient is built in a fixed dtype other than its input's"

    INVALID = [
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def stable_softplus(x):
    x32 = tf.cast(x, tf.float32)  # compute in float32 for stability
    y = tf.math.softplus(x32)

    def grad(dy):
        return tf.cast(dy, tf.float32) * tf.sigmoid(x32)

    return tf.cast(y, x.dtype), grad
''',
            at="10:16"),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def scale(x):
    def grad(dy):
        return tf.cast(dy * 2.0, tf.float32)

    return x * 2.0, grad

x = tf.constant([1.0, 2.0], dtype=tf.float64)
y = scale(x)
''',
            at="7:16"),
        Invalid(
            '''
import keras
import tensorflow as tf

keras.mixed_precision.set_global_policy("mixed_float16")


class Gelu(keras.layers.Layer):
    def call(self, x):
        @tf.custom_gradient
        def gelu(x):
            def grad(dy):
                return dy * tf.constant(0.5, dtype=tf.float32) * (1.0 + tf.math.erf(x))
            return 0.5 * x * (1.0 + tf.math.erf(x)), grad
        return gelu(x)
''',
            at="13:29"),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def clip_gradient(x):
    def grad(dy):
        # half precision to save memory in the backward pass
        return tf.cast(tf.clip_by_value(dy, -1.0, 1.0), tf.float16)
    return tf.identity(x), grad


h = clip_gradient(tf.random.normal([4], dtype=tf.float32))
''',
            at="8:16"),
        Invalid(
            '''
import keras
import tensorflow as tf
from keras import ops


@ops.custom_gradient
def log1pexp(x):
    e = ops.exp(x)

    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        return ops.cast(upstream * (1.0 - 1.0 / (1.0 + e)), "float16")

    return ops.log(1.0 + e), grad


y = log1pexp(ops.convert_to_tensor([0.5, 2.0], dtype="float32"))
''',
            at="14:16"),
        Invalid(
            '''
import tensorflow as tf

scale = tf.Variable(3.0, name="scale")


@tf.custom_gradient
def scaled(x):
    def grad(dy, variables=None):
        return tf.cast(dy * scale, tf.float16), [tf.reduce_sum(dy * x) for _ in variables]

    return x * scale, grad
''',
            at="10:16"),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def log_marginal(scores):
    def grad(dy):
        p = tf.nn.softmax(scores)
        return tf.cast(dy[:, None] * p, tf.float64)

    return tf.reduce_logsumexp(scores, axis=-1), grad


SCORES = tf.constant([[-1.0, -2.0], [0.5, 0.1]])
marginal = log_marginal(SCORES)
''',
            at="8:16"),
    ]
    VALID = [
        '''
import tensorflow as tf

@tf.custom_gradient
def stable_softplus(x):
    x32 = tf.cast(x, tf.float32)
    y = tf.math.softplus(x32)

    def grad(dy):
        return tf.cast(tf.cast(dy, tf.float32) * tf.sigmoid(x32), x.dtype)

    return tf.cast(y, x.dtype), grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def scale(x):
    def grad(dy):
        return tf.cast(dy * 2.0, tf.float32)

    return x * 2.0, grad

y = scale(tf.constant([1.0, 2.0]))
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def clip_gradient(x):
    def grad(dy):
        return tf.cast(tf.clip_by_value(dy, -1.0, 1.0), tf.float16)
    return tf.identity(x), grad

h = clip_gradient(tf.constant([0.5, 2.0], dtype=tf.float16))
''',
        '''
import numpy as np
import tensorflow as tf

@tf.custom_gradient
def scale(x):
    return x * 3.0, lambda dy: dy * np.full([2], 3.0)

y = scale(tf.constant([1.0, 2.0]))
''',
        '''
import tensorflow as tf

half_scale = tf.Variable(3.0, dtype=tf.float16)


@tf.custom_gradient
def scaled(x):
    def grad(dy, variables=None):
        return tf.cast(dy * half_scale, tf.float16), [tf.reduce_sum(dy * x) for _ in variables]

    return x * half_scale, grad
''',
        '''
import tensorflow as tf

gain = tf.Variable(2.0)


@tf.custom_gradient
def magnitude(z):
    # |z| of a complex input is float32 whatever `z` is: it says nothing of `z`'s dtype
    m = tf.abs(z) * gain

    def grad(dy, variables=None):
        g = tf.cast(dy * gain, tf.complex64) * z / tf.cast(tf.abs(z), tf.complex64)
        return g, [tf.reduce_sum(dy * tf.abs(z))]

    return m, grad
''',
    ]

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        model = site.model
        for index, name, dtype, node in _fixed_gradients(site):
            evidence = input_dtype_evidence(model, site, index)
            if evidence is not None and evidence[0] != dtype:
                why = f"`{name}` is {evidence[0]} ({evidence[1]})"
            elif (cast := forward_casts(model, site, name)) is not None and cast[0] == dtype:
                why = (f"the forward casts `{name}` to {dtype}, so `{name}` comes in another dtype "
                       "(float16 under mixed precision)")
            else:
                # Without evidence of the input's dtype nothing is assumed (no float32
                # default): a caller in another module may pass exactly this dtype.
                continue
            yield Finding(
                node,
                f"The gradient for `{name}` is fixed to {dtype} here, but {why}: TensorFlow accepts a "
                f"gradient of another dtype silently and the op that made `{name}` fails in its own "
                f"gradient ('expected ... tensor but is a ... tensor'); return `tf.cast(g, {name}.dtype)`",
            )

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        """Also the calls this module makes to a custom-gradient function of another project
        module (`from .ops import scale; scale(tf.constant(x, tf.float64))`): the module that
        defines the function does not see what its callers pass, so the finding is at the call."""
        yield from super().check(model)
        for call, scope, site in model.calls_of_other_modules_sites():
            if not call.args:
                continue
            for index, name, dtype, node in _fixed_gradients(site):
                arg = argument(call, index)
                passed = fixed_dtype(model, arg, scope, defaults=True) if arg is not None else None
                if passed is None or passed[0] == dtype:
                    continue
                line = site.model.module.code_for_node(node).strip().splitlines()[0]
                yield Finding(
                    arg,
                    f"This call passes a {passed[0]} tensor as `{name}` to `{site.name}`, whose gradient for "
                    f"`{name}` is fixed to {dtype} (`{line}`): TensorFlow accepts a gradient of another dtype "
                    f"silently and the op that made `{name}` fails in its own gradient ('expected ... tensor but "
                    f"is a ... tensor'); return `tf.cast(g, {name}.dtype)` there",
                )


def _fixed_gradients(site: GradientSite) -> Iterator[tuple[int, str, str, cst.CSTNode]]:
    """(input index, input name, dtype, the node fixing it) for each input gradient the grad
    fns build in a fixed dtype."""
    model = site.model
    for grad in site.grad_fns:
        for ret in grad.returns:
            if ret.value is None:
                continue
            value = ret.value
            # `(input_grads, var_grads)`: when the forward reads variables, or the grad fn
            # takes `variables` and there is one input (so a pair cannot be two input grads).
            if site.trainable_variables or (grad.variables_param and len(site.inputs) == 1 and ret.pair):
                if ret.pair is None:
                    continue
                value = ret.pair[0]
            grads = model.literal_elements(value, grad.scope) if len(site.inputs) != 1 else [value]
            for index, (name, g) in enumerate(zip(site.inputs, grads or [])):
                fixed = fixed_dtype(model, g, grad.scope)
                if fixed is not None:
                    yield index, name, fixed[0], fixed[1]
