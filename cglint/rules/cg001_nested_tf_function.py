"""CG001 nested-tf-function."""

from typing import Iterator

import libcst as cst

from cglint.diagnostics import Finding, Fix
from cglint.model import TF_FUNCTION, GradientSite
from cglint.rules._fixes import parenthesized
from cglint.rules.base import Invalid, Rule


class NestedTfFunction(Rule):
    """
    ## What it does
    Flags `tf.function` applied inside a custom-gradient forward (to a helper, or to the grad
    fn), `@tf.function` placed directly *under* `@tf.custom_gradient`, and a user decorator
    (or a decorator factory's call, `@fused_op()`) that applies `tf.custom_gradient` to
    `tf.function(fn)` of what it decorates.

    ## Why is this bad?
    A `tf.function` created inside the forward is a new function object on every call, so
    TensorFlow traces it again on every call: in TensorFlow 2.21 a training step ran 12-20x
    slower, with no error. Under `@tf.custom_gradient` (applied first), `tf.function` fails
    outright: the traced function returns `(y, grad_fn)`, and TensorFlow raises
    `TypeError: To be compatible with tf.function, Python functions must return zero or more
    Tensors ...`. `@tf.function` *above* `@tf.custom_gradient` is the supported combination.
    """

    fix_safety = """
    Three fixes. `@tf.function` directly under `@tf.custom_gradient` is moved above it (the
    supported order); this is safe, the original fails on its first call. A `@tf.function`
    decorator on a def inside the forward is removed, and `tf.function(f)` inside the forward
    becomes `f` (so `tf.function(f)(x)` becomes `f(x)`): the function still runs inside the
    forward, traced by an outer `tf.function` if there is one, so these are safe when
    `tf.function` has no arguments. With arguments (`jit_compile=True`, `input_signature=...`,
    `reduce_retracing=...`) the fix drops them and what they do, so it is unsafe. A decorator
    with comments above it, or with other decorators between it and `@tf.custom_gradient`, gets
    no fix.
    """

    code = "CG001"
    name = "nested-tf-function"
    summary = "`tf.function` applied inside a custom-gradient forward, or under the decorator"
    severity = "warning"

    INVALID = [
        Invalid(
            '''
import tensorflow as tf


def compiled_gradient(fn):
    return tf.custom_gradient(tf.function(fn))


@compiled_gradient
def softsign(x):
    y = x / (1.0 + tf.abs(x))

    def grad(dy):
        return dy / tf.square(1.0 + tf.abs(x))

    return y, grad
''',
            at="9:1"),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def op(x):
    @tf.function
    def forward(x):
        return tf.tan(x)

    y = forward(x)

    def grad(dy):
        return dy / tf.square(tf.cos(x))

    return y, grad
''',
            at="6:5",
            fixed='''
import tensorflow as tf

@tf.custom_gradient
def op(x):
    def forward(x):
        return tf.tan(x)

    y = forward(x)

    def grad(dy):
        return dy / tf.square(tf.cos(x))

    return y, grad
'''),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
@tf.function
def op(x):
    return tf.tan(x), lambda dy: dy / tf.square(tf.cos(x))
''',
            at="5:1",
            fixed='''
import tensorflow as tf

@tf.function
@tf.custom_gradient
def op(x):
    return tf.tan(x), lambda dy: dy / tf.square(tf.cos(x))
'''),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def op(x):
    y = tf.function(tf.tan)(x)
    return y, lambda dy: dy / tf.square(tf.cos(x))
''',
            at="6:9",
            fixed='''
import tensorflow as tf

@tf.custom_gradient
def op(x):
    y = tf.tan(x)
    return y, lambda dy: dy / tf.square(tf.cos(x))
'''),
        Invalid(
            '''
from tensorflow import custom_gradient, function

@custom_gradient
def op(x):
    y = x * x

    @function
    def grad(dy):
        return 2 * x * dy

    return y, grad
''',
            at="8:5",
            fixed='''
from tensorflow import custom_gradient, function

@custom_gradient
def op(x):
    y = x * x

    def grad(dy):
        return 2 * x * dy

    return y, grad
'''),
    ]
    VALID = [
        '''
import tensorflow as tf


def compiled_gradient(fn):
    return tf.function(tf.custom_gradient(fn))


@compiled_gradient
def softsign(x):
    y = x / (1.0 + tf.abs(x))

    def grad(dy):
        return dy / tf.square(1.0 + tf.abs(x))

    return y, grad
''',
        '''
import tensorflow as tf

@tf.function
@tf.custom_gradient
def op(x):
    y = tf.tan(x)

    def grad(dy):
        return dy / tf.square(tf.cos(x))

    return y, grad
''',
        '''
import tensorflow as tf

@tf.function
def forward(x):
    return tf.tan(x)

@tf.custom_gradient
def op(x):
    return forward(x), lambda dy: dy / tf.square(tf.cos(x))
''',
        '''
import jax
import tensorflow as tf

@jax.custom_gradient
def op(x):
    @tf.function
    def inner(x):
        return x
    return inner(x), lambda g: g
''',
    ]

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        model = site.model
        if isinstance(site.forward, cst.FunctionDef):
            decorators = list(site.forward.decorators)
            below = decorators[decorators.index(site.wrapper) + 1 :] if site.wrapper in decorators else []
            for dec in below:
                what = _tf_function(model, dec, site.outer)
                if what is not None:
                    yield Finding(
                        dec,
                        f"{what} under `@tf.custom_gradient` on `{site.name}` fails: TensorFlow "
                        "traces the forward, which returns `(y, grad_fn)`, and raises TypeError; "
                        f"put {what} above `@tf.custom_gradient`",
                        fix=_move_above(site.wrapper, dec) if dec is below[0] and what == _TF_FUNCTION else None,
                    )
        wrapper = site.wrapper
        if isinstance(wrapper, cst.Decorator) and model.compiles_under_custom_gradient(wrapper.decorator, site.outer):
            yield Finding(
                wrapper,
                f"`@{model.module.code_for_node(wrapper.decorator).strip()}` applies `tf.custom_gradient` to "
                f"`tf.function` of `{site.name}`: TensorFlow traces the forward, which returns `(y, grad_fn)`, and "
                "raises TypeError; apply `tf.function` to the result of `tf.custom_gradient` instead",
            )
        decorator_calls = set()
        # A grad fn a factory makes on each call of the forward is new every time, as a nested one is.
        fresh = site.outside_grad_fn_scopes(fresh=True)
        for scope in [*site.scopes(), *fresh]:
            node = scope.node
            if scope is site.scope or not isinstance(node, cst.FunctionDef):
                continue
            for dec in node.decorators:
                decorator_calls.add(id(dec.decorator))
                what = _tf_function(model, dec, scope.parent)
                if what is not None:
                    yield Finding(dec, self._message(site, f"{what} on `{node.name.value}`", scope in fresh),
                                  fix=_remove_decorator(dec, node.name.value) if what == _TF_FUNCTION else None)
        for call, scope in [*site.calls(), *((c, s) for s in fresh for c in s.calls)]:
            if id(call) not in decorator_calls and model.qualname(call.func) in TF_FUNCTION:
                yield Finding(call, self._message(site, "`tf.function(...)`", scope in fresh), fix=_unwrap(model, call))

    @staticmethod
    def _message(site: GradientSite, what: str, factory: bool = False) -> str:
        where = (f"in the grad fn a factory makes on each call of the custom-gradient forward `{site.name}`"
                 if factory else f"inside the custom-gradient forward `{site.name}`")
        return (
            f"{what} {where} builds a new function on "
            "every call: TensorFlow retraces it every time; define it outside the forward or drop it"
        )


_TF_FUNCTION = "`@tf.function`"


def _tf_function(model, dec: cst.Decorator, scope) -> str | None:
    """How to name a decorator that compiles with tf.function: `@tf.function` (with options or
    not), or a user decorator (here or imported) applying it; None for any other. Only
    `@tf.function` itself gets fixes: removing a user decorator drops whatever else it does."""
    if model.qualname(_callee(dec.decorator)) in TF_FUNCTION:
        return _TF_FUNCTION
    if model.applies_tf_function(dec.decorator, scope):
        return f"`@{model.module.code_for_node(_callee(dec.decorator)).strip()}` (it applies `tf.function`)"
    return None


def _callee(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`@tf.function(jit_compile=True)` is still `tf.function`."""
    return expr.func if isinstance(expr, cst.Call) else expr


def _has_options(decorator: cst.BaseExpression) -> bool:
    return isinstance(decorator, cst.Call) and bool(decorator.args)


def _comments(lines) -> bool:
    return any(line.comment is not None for line in lines)


def _move_above(wrapper: cst.CSTNode, dec: cst.Decorator) -> Fix | None:
    if not isinstance(wrapper, cst.Decorator) or _comments(dec.leading_lines):
        return None
    moved = dec.with_changes(leading_lines=wrapper.leading_lines)
    return Fix(
        [(dec, cst.RemovalSentinel.REMOVE), (wrapper, cst.FlattenSentinel([moved, wrapper.with_changes(leading_lines=())]))],
        safe=True,
        description="Move `@tf.function` above `@tf.custom_gradient`",
    )


def _remove_decorator(dec: cst.Decorator, name: str) -> Fix | None:
    if _comments(dec.leading_lines):
        return None
    options = _has_options(dec.decorator)
    return Fix([(dec, cst.RemovalSentinel.REMOVE)], safe=not options,
               description=f"Remove `@tf.function` from `{name}`" + (" (and its options)" if options else ""))


def _unwrap(model, call: cst.Call) -> Fix | None:
    """`tf.function(f, **options)` -> `f`."""
    if any(a.star for a in call.args):
        return None
    positional = [a for a in call.args if a.keyword is None]
    by_keyword = [a for a in call.args if a.keyword is not None and a.keyword.value == "func"]
    target = positional or by_keyword
    if len(target) != 1 or len(positional) + len(by_keyword) != 1:
        return None
    fn = target[0].value
    options = len(call.args) > 1
    what = model.module.code_for_node(fn).strip()
    return Fix([(call, parenthesized(fn))], safe=not options,
               description=f"Call `{what}` directly instead of `tf.function({what})`" + (" (dropping its options)" if options else ""))
