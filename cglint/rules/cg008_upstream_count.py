"""CG008 upstream-count."""

from typing import Iterator

from cglint.diagnostics import Finding
from cglint.model import GradientSite, ModuleModel, Param
from cglint.rules.base import Invalid, Rule


class UpstreamCount(Rule):
    """
    ## What it does
    Flags a grad fn whose positional parameters (upstream gradients) do not match the number
    of outputs the forward returns, counted after flattening. Only literal outputs are
    counted (a tensor op, arithmetic, a parameter is one output; a literal tuple, list or
    dict is its flattened entries); an output of unknown structure, or a grad fn taking
    `*args`, is never flagged. A `variables=None` parameter is not an upstream gradient.
    An input returned as an output counts as TensorFlow flattens it: `f([query, key], s)`
    returning its first parameter has two outputs. Keras 3's `keras.ops.custom_gradient`
    calls the grad fn the same way on the TensorFlow backend (its `upstream=` keyword is not
    a positional upstream) and is checked too.

    ## Why is this bad?
    TensorFlow flattens the forward's output `y` and calls the grad fn with one upstream
    gradient per flattened output, positionally: `grad_fn(*flat_upstreams)`. A grad fn
    that takes one parameter for a forward returning `(a, b)` raises `TypeError: <lambda>()
    takes 1 positional argument but 2 were given` at the first backward pass; one that
    takes more raises "missing required positional argument". Take one parameter per
    output, or `*upstreams`.
    """

    code = "CG008"
    name = "upstream-count"
    summary = "The grad fn's positional parameters differ from the number of outputs"

    INVALID = [
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def double_and_triple(x):
    def grad(dy):
        return 2 * dy + 3 * dy

    return (2 * x, 3 * x), grad
''',
            at="6:9"),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def scale(x):
    return 2.0 * x, lambda dy, dz: 2.0 * dy
''',
            at="6:21"),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def stats(x):
    out = {"sum": tf.reduce_sum(x), "max": tf.reduce_max(x), "min": tf.reduce_min(x)}

    def grad(d_sum, d_max):
        return d_sum * tf.ones_like(x)

    return out, grad
''',
            at="8:9"),
        Invalid(
            '''
import tensorflow as tf


@tf.custom_gradient
def scale_grads(tensors, scale):
    def grad(d_tensors):
        return d_tensors * scale, None

    return tensors, grad


class TwoTower(tf.keras.layers.Layer):
    def call(self, inputs):
        query, key = inputs
        q, k = scale_grads([query, key], tf.constant(0.5))
        return tf.reduce_sum(q * k, axis=-1)
''',
            at="7:9"),
        # a namedtuple output flattens field by field (TF 2.21: takes 1 positional argument but 2 were given)
        Invalid(
            '''
import collections

import tensorflow as tf

Pair = collections.namedtuple("Pair", ["value", "aux"])


@tf.custom_gradient
def with_aux(x):
    def grad(d_value):
        return d_value * 2.0

    return Pair(2.0 * x, tf.reduce_sum(x)), grad
''',
            at="11:9"),
    ]
    VALID = [
        '''
import tensorflow as tf

@tf.custom_gradient
def double_and_triple(x):
    def grad(d_double, d_triple):
        return 2 * d_double + 3 * d_triple

    return (2 * x, 3 * x), grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def pieces(x):
    def grad(*upstreams):
        return tf.add_n(upstreams)

    return tf.split(x, 3), grad
''',
        '''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scale(x):
    def grad(dy, variables=None):
        return dy * w, [tf.reduce_sum(dy * x) for v in variables]

    return x * w, grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def identity_all(*xs):
    def grad(d0, d1):
        return d0, d1

    return xs, grad
''',
        '''
import tensorflow as tf

def forward(x):
    return x, 2 * x

@tf.custom_gradient
def op(x):
    def grad(dy):
        return dy
    return forward(x), grad
''',
        '''
import tensorflow as tf


@tf.custom_gradient
def scale_grads(tensors, scale):
    def grad(d_query, d_key):
        return (d_query * scale, d_key * scale), None

    return tensors, grad


class TwoTower(tf.keras.layers.Layer):
    def call(self, inputs):
        query, key = inputs
        q, k = scale_grads([query, key], tf.constant(0.5))
        return tf.reduce_sum(q * k, axis=-1)
''',
    ]

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        outputs = site.output_count
        if outputs is None:
            return
        for grad in _mismatched(site, outputs):
            if site.model.inputs_taken_apart(site):
                return  # an input (maybe returned as an output) of unknown structure
            lo, hi = grad.required_upstream, len(grad.upstream_params)
            takes = f"{hi}" if lo == hi else f"{lo} to {hi}"
            yield Finding(
                grad.anchor,
                f"`{grad.name}` takes {takes} upstream gradient{'s' if hi != 1 else ''} but `{site.name}` returns "
                f"{outputs} output{'s' if outputs != 1 else ''}: TensorFlow calls it with one upstream gradient "
                "per flattened output and raises TypeError; take one parameter per output (or `*upstreams`)",
            )

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        """Also the calls this module makes to a custom-gradient function of another project
        module whose outputs are inputs it passes as a literal structure
        (`ops.scale_grads([query, key], s)` returning `tensors`): the module that defines it does
        not see that structure, so the finding is at the call."""
        yield from super().check(model)
        for call, scope, site in model.calls_of_other_modules_sites():
            if site.has_varargs or not site.outputs:
                continue
            positional = [a for a in call.args if a.keyword is None]
            if any(a.star for a in positional) or len(positional) > len(site.inputs):
                continue
            counts = [model.structure_count(a.value, scope) for a in positional]
            if all(c is None for c in counts):
                continue
            params: dict[int, int | None] = {}
            for param, count in zip(site.input_params, counts):
                for value in site.scope.bindings.get(param.name.value, []):
                    if isinstance(value, Param) and value.node is param:
                        params[id(value)] = count  # None: a structure this call does not show
            flat = {site.model.flat_count(y, site.scope, params=params) for y in site.outputs}
            if len(flat) != 1 or None in flat:
                continue
            outputs = flat.pop()
            if outputs == site.output_count:
                continue  # what the defining module shows: judged there
            for grad in _mismatched(site, outputs):
                yield Finding(
                    call,
                    f"This call makes `{site.name}` return {outputs} outputs (flattened), but `{grad.name}` takes "
                    f"{len(grad.upstream_params)} upstream gradient{'s' if len(grad.upstream_params) != 1 else ''}: "
                    "TensorFlow calls it with one upstream gradient per flattened output and raises TypeError; take "
                    "one parameter per output (or `*upstreams`)",
                )
                break


def _mismatched(site: GradientSite, outputs: int):
    """The grad fns whose upstream parameters cannot take `outputs` upstream gradients."""
    for grad in site.grad_fns:
        if grad.has_varargs:
            continue
        if not grad.required_upstream <= outputs <= len(grad.upstream_params):
            yield grad
