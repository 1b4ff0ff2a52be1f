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
    custom-gradient function, or bind one by keyword with `functools.partial` (calling the
    partial passes it by keyword); custom-gradient forwards defined with keyword-only or
    `**kwargs` parameters; and defaulted parameters that some caller makes an input the grad
    fn does not count (a call passing it positionally, or leaving it out when the grad fn
    returns a gradient for it), or that `tf.function` around the op always binds. A default no
    caller passes is not an input, and is not flagged. Forwarding wrappers, `def inner(*args,
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
    scale=3.0)` raises under `tf.function`. `tf.function` around the op binds every default,
    so the default is an input on every call ("Num gradients 2 generated for op").
    Keyword-only and `**kwargs` parameters can only
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
import functools

import tensorflow as tf


@tf.custom_gradient
def scaled_tanh(x, scale):
    y = tf.tanh(x * scale)

    def grad(dy):
        d = dy * (1.0 - y * y)
        return d * scale, tf.reduce_sum(d * x)

    return y, grad


sharp_tanh = functools.partial(scaled_tanh, scale=tf.constant(4.0))
''',
            at="18:45"),
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
        # TensorFlow 2.21: "custom_gradient function expected to return 2 gradients, but returned 1".
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def ste_sign(x, clip_value=1.0):
    def grad(dy):
        return dy * tf.cast(tf.abs(x) <= clip_value, dy.dtype)

    return tf.sign(x), grad

def binarize(w):
    return ste_sign(w, 0.5)
''',
            at="5:17"),
        # TensorFlow 2.21: "Num gradients 2 generated for op ... IdentityN" on the first backward pass.
        Invalid(
            '''
import tensorflow as tf

@tf.function
@tf.custom_gradient
def grad_reverse(x, scale=1.0):
    return tf.identity(x), lambda dy: -scale * dy
''',
            at="6:21"),
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
import functools

import tensorflow as tf


@tf.custom_gradient
def scaled_tanh(scale, x):
    y = tf.tanh(x * scale)

    def grad(dy):
        d = dy * (1.0 - y * y)
        return tf.reduce_sum(d * x), d * scale

    return y, grad


sharp_tanh = functools.partial(scaled_tanh, tf.constant(4.0))
''',
        # No caller passes `scale`: one input, one gradient (TensorFlow 2.21, eager and in a
        # layer under tf.function: d/dx = -1).
        '''
import keras
import tensorflow as tf

@tf.custom_gradient
def grad_reverse(x, scale=1.0):
    return tf.identity(x), lambda dy: -scale * dy

class GradientReversal(keras.layers.Layer):
    def call(self, inputs):
        return grad_reverse(inputs)
''',
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
        for i, p in enumerate(site.input_params):
            if p.default is not None and (why := _default_made_input(site, i)) is not None:
                yield Finding(
                    p,
                    f"`{site.name}` has a defaulted parameter `{p.name.value}` and {why}; bind it in a closure "
                    "instead",
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
            bound = site is None and (site := model.site_bound_by_partial(call, scope)) is not None
            if site is None:
                continue
            if bound:
                yield Finding(
                    keywords[0],
                    f"`functools.partial` binds `{keywords[0].keyword.value}` of the custom-gradient function "
                    f"`{site.name}` by keyword, so calling the partial is a keyword call: TensorFlow treats only "
                    "positional arguments as inputs (the grad fn's gradient count is wrong, and under tf.function "
                    "any keyword raises); bind it positionally or in a closure",
                    site=site,
                )
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
        if model.project_imports or model.star_imports:
            yield from _defaults_at_calls(model)


def _defaults_at_calls(model: ModuleModel) -> Iterator[Finding]:
    """The calls this module makes to a custom-gradient function of another project module
    that pass or leave out one of its defaulted inputs so that TensorFlow expects another number
    of gradients than its grad fn returns (the defining module does not see these calls)."""
    for call, scope, site in model.calls_of_other_modules_sites():
        positional = [a for a in call.args if a.keyword is None]
        if not positional or any(a.star for a in positional) or len(positional) != len(call.args):
            continue  # keywords are flagged above; `*args` has an unknown count
        if site.variables or site.has_varargs:
            continue
        defaulted = [i for i, p in enumerate(site.input_params) if p.default is not None]
        if not defaulted:
            continue
        returned = {site.model.flat_count(r.value, g.scope) for g in site.grad_fns for r in g.returns
                    if r.value is not None}
        passed = model.passed_at_least(call, scope)
        if len(returned) != 1 or None in returned or passed is None or passed in returned:
            continue
        (got,) = returned
        param = site.input_params[defaulted[0]].name.value
        how = "passes it positionally, making it an input" if len(positional) > defaulted[0] else "leaves it out"
        yield Finding(
            call,
            f"`{site.name}` has a defaulted parameter `{param}` and this call {how}: TensorFlow expects {passed} "
            f"gradient{'s' * (passed != 1)} here and the grad fn returns {got}; bind it in a closure instead",
            site=site,
        )


def _default_made_input(site: GradientSite, index: int) -> str | None:
    """Why the defaulted input at `index` breaks the grad fn's gradient count, or None when no
    caller makes it an input. TensorFlow counts the positional arguments of each call: `f(x)`
    leaves the default out (one input) and `f(x, 2.0)` passes it (two). `tf.function` around the
    op binds every default, so each call passes it (TensorFlow 2.21: "Num gradients 2 generated
    for op ... IdentityN" for a grad fn returning one)."""
    model = site.model
    if _wrapped_in_tf_function(site):
        return ("`tf.function` around the op binds the default as an input on every call: TensorFlow "
                "then expects a gradient for it ('Num gradients ... generated for op')")
    if site.variables:
        return None  # `(input_grads, var_grads)`: CG007 and CG002 count those
    returned = {model.flat_count(r.value, g.scope) for g in site.grad_fns for r in g.returns if r.value is not None}
    if len(returned) != 1 or None in returned:
        return None
    (got,) = returned
    for call, scope in model.calls_reaching(site):
        positional = [a for a in call.args if a.keyword is None]
        if any(a.star for a in positional) or any(a.keyword is not None for a in call.args):
            continue  # unknown count, or a keyword call (flagged at the call)
        passed = model.passed_at_least(call, scope)
        if passed is None or passed == got:
            continue
        # The call by its text, not its line: the editor's incremental analysis parses pieces.
        text = " ".join(cst.Module([]).code_for_node(call).split())
        text = text if len(text) <= 60 else text[:57] + "..."
        if len(positional) > index:
            return (f"`{text}` passes it positionally, making it an input: TensorFlow expects "
                    f"{passed} gradients there and the grad fn returns {got}")
        return (f"`{text}` leaves it out: TensorFlow expects {passed} gradient{'s' * (passed != 1)} "
                f"there and the grad fn returns {got}")
    return None


def _wrapped_in_tf_function(site: GradientSite) -> bool:
    """`@tf.function` above the custom-gradient decorator, or `tf.function(op)` in the module."""
    model = site.model
    forward = site.forward
    if isinstance(forward, cst.FunctionDef) and isinstance(site.wrapper, cst.Decorator) and site.wrapper in forward.decorators:
        above = forward.decorators[: list(forward.decorators).index(site.wrapper)]
        if any(model.qualname(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)
               == "tensorflow.function" for d in above):
            return True
    names = set(site.call_names) | ({forward.name.value} if isinstance(forward, cst.FunctionDef) else set())
    return any(model.qualname(call.func) == "tensorflow.function" and call.args
               and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value in names
               for call, _ in model.all_calls)
