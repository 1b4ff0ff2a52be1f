"""CG010 keyword-call."""

from typing import Iterator

import libcst as cst

from cglint.diagnostics import Finding
from cglint.model import GradientSite, ModuleModel
from cglint.rules.base import Invalid, Rule


class KeywordCall(Rule):
    """
    ## What it does
    Flags calls in the same module that pass arguments by keyword to a TensorFlow
    custom-gradient function, and custom-gradient forwards defined with defaulted,
    keyword-only or `**kwargs` parameters. Forwarding wrappers, `def inner(*args,
    **kwargs)` and calls passing `**kwargs` on, are left alone: what flows through them is
    decided elsewhere.

    ## Why is this bad?
    TensorFlow's custom gradient only knows positional arguments. In eager mode it records
    `f(*args, **kwargs)` with only the flattened positional `args` as inputs: tensors passed
    by keyword get no gradient, an all-keyword call silently skips the custom gradient
    (TensorFlow 2.21 differentiated the forward's own ops instead: d/dx = 3.0 where the
    custom gradient said 3000), and a mixed call makes the grad fn's return count wrong
    ("expected to return 1 gradients, but returned 2"). Under `tf.function` (and so in
    `model.fit`) any keyword argument raises `ValueError: The custom_gradient decorator
    currently supports keywords arguments only when eager execution is enabled.`

    Defaulted parameters are inputs only when passed positionally: TensorFlow counts the
    positional arguments of each call (`len(nest.flatten(args))`), so `f(x)` expects one
    gradient and `f(x, 3.0)` two (eager: "expected to return 2 gradients, but returned 1";
    under `tf.function`: "Recorded operation returned too few gradients"), and `f(x,
    scale=3.0)` raises under `tf.function`. Keyword-only and `**kwargs` parameters can only
    be passed by keyword, with the same failure. Bind configuration in a closure instead
    (a factory that returns the decorated function), or pass everything positionally and
    return `None` for the non-differentiable arguments.
    """

    code = "CG010"
    name = "keyword-call"
    summary = "A custom-gradient function called with keyword arguments, or defined with keyword/defaulted parameters"

    INVALID = [
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def mul(x, y):
    return x * y, lambda dz: (dz * y, dz * x)

def loss(a, b):
    return mul(x=a, y=b)
''',
            at="9:16"),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def ste_sign(x, clip_value=1.0):
    def grad(dy):
        return dy * tf.cast(tf.abs(x) <= clip_value, dy.dtype)

    return tf.sign(x), grad
''',
            at="5:17"),
        Invalid(
            '''
import tensorflow as tf

def _scale(x, *, factor):
    return x * factor, lambda dy: dy * factor

scale = tf.custom_gradient(_scale)
''',
            at="4:18"),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def identity(x, **kwargs):
    return tf.identity(x), lambda dy: dy
''',
            at="5:17"),
        Invalid(
            '''
import tensorflow as tf

class Quantizer(tf.keras.layers.Layer):
    @tf.custom_gradient
    def quantize(self, x):
        return tf.round(x), lambda dy: dy

    def call(self, inputs):
        return self.quantize(x=inputs)
''',
            at="10:30"),
    ]
    VALID = [
        '''
import tensorflow as tf

def ste_sign(clip_value=1.0):
    @tf.custom_gradient
    def _call(x):
        def grad(dy):
            return dy * tf.cast(tf.abs(x) <= clip_value, dy.dtype)

        return tf.sign(x), grad

    return _call
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def mul(x, y):
    return x * y, lambda dz: (dz * y, dz * x)

def loss(a, b):
    return mul(a, b)
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def op(x):
    return tf.identity(x), lambda dy: dy

def unrelated(x, name=None):
    return x

y = unrelated(1.0, name="y")
z = op(tf.constant(1.0))
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def op(x):
    return tf.identity(x), lambda dy: dy

def local_scope(op):
    return op(x=1.0)
''',
        '''
import tensorflow as tf

def recompute(f):
    @tf.custom_gradient
    def inner(*args, **kwargs):
        y = f(*args, **kwargs)

        def grad(*dys, **grad_kwargs):
            with tf.GradientTape() as tape:
                tape.watch(args)
                again = f(*args, **kwargs)
            return tape.gradient(again, args, output_gradients=dys)

        return y, grad

    def call(*args, **kwargs):
        return inner(*args, **kwargs)

    return call
''',
    ]

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        params = site.forward.params
        for p in site.input_params:
            if p.default is not None:
                yield Finding(
                    p,
                    f"`{site.name}` has a defaulted parameter `{p.name.value}`: TensorFlow counts it as an input "
                    "only when a caller passes it positionally (then the grad fn must return a gradient for it), "
                    "and passing it by keyword raises under tf.function; bind it in a closure instead",
                )
        for p in params.kwonly_params:
            yield Finding(
                p,
                f"`{site.name}` has a keyword-only parameter `{p.name.value}`: keyword arguments get no gradient "
                "and raise under tf.function ('supports keywords arguments only when eager execution is "
                "enabled'); bind it in a closure instead",
            )
        # `(*args, **kwargs)` is a forwarding wrapper (recompute, pass-through decorators): what
        # it receives is its callers' business, so it is not flagged.
        if isinstance(params.star_kwarg, cst.Param) and not site.has_varargs:
            yield Finding(
                params.star_kwarg,
                f"`{site.name}` takes `**{params.star_kwarg.name.value}`: keyword arguments get no gradient and "
                "raise under tf.function ('supports keywords arguments only when eager execution is enabled'); "
                "bind them in a closure instead",
            )

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        yield from super().check(model)
        if not model.sites and not model.project_imports:
            return  # no custom-gradient function here or imported from the project
        for call, scope in model.all_calls:
            # Only literal keywords: a `**mapping` may well be empty (forwarding wrappers).
            keywords = [a for a in call.args if a.keyword is not None]
            if not keywords:
                continue
            site = model.site_called_by(call, scope)
            if site is None:
                continue
            positional = any(a.keyword is None and a.star != "**" for a in call.args)
            effect = (
                "a mixed call makes the grad fn's gradient count wrong"
                if positional
                else "an all-keyword call silently skips the custom gradient"
            )
            yield Finding(
                keywords[0],
                f"`{site.name}` is a custom-gradient function called with keyword arguments: TensorFlow treats "
                f"only positional arguments as inputs ({effect}, and under tf.function any keyword raises); "
                "pass them positionally",
                site=site,
            )
