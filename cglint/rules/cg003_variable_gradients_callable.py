"""CG003 variable-gradients-callable."""

from typing import Iterator

import libcst as cst

from cglint.diagnostics import Finding, Fix
from cglint.model import CALLABLE, GradFn, GradientSite, kind_of
from cglint.rules._fixes import parenthesized, variables_expr
from cglint.rules.base import Invalid, Rule


class VariableGradientsCallable(Rule):
    """
    ## What it does
    Flags a grad fn that returns a callable (a nested `def` or a `lambda`) where the list of
    variable gradients belongs: `return dx, grad_vars`. A grad fn that is itself
    `@tf.custom_gradient` (the higher-order pattern) returns `(gradients, grad_of_grad)` by
    that contract, and TensorFlow receives the gradients alone: it is not flagged.

    ## Why is this bad?
    TensorFlow never calls it. It measures `len(variable_grads)` against `variables` and
    raises `TypeError: object of type 'function' has no len()`; without a `variables`
    parameter it raises `grad_fn must accept keyword argument 'variables'` first. This is
    the "corrected code" of a widely copied answer: the contract is a *list* with one
    gradient per entry of `variables`, computed in the grad fn itself.
    """

    fix_safety = """
    The fix calls the returned callable with TensorFlow's `variables`: `return dx, grad_vars`
    becomes `return dx, grad_vars(variables)` (a lambda is wrapped in parentheses first). It
    is offered when the callable takes exactly one positional parameter and the grad fn has a
    `variables` parameter (or `**kwargs`), and is safe: the callable was written to receive
    the variables and produce their gradients, and the code as written cannot run. When the
    grad fn lacks `variables`, CG004's fix adds it first (unsafe), then this one applies.
    """

    code = "CG003"
    name = "variable-gradients-callable"
    summary = "A callable returned in place of the variable-gradient list"

    INVALID = [
        Invalid(
            '''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scale(x):
    def grad(dy, variables=None):
        def grad_vars(variables):
            return [tf.reduce_sum(dy * x) for v in variables]

        return dy * w, grad_vars

    return x * w, grad
''',
            at="12:9",
            fixed='''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scale(x):
    def grad(dy, variables=None):
        def grad_vars(variables):
            return [tf.reduce_sum(dy * x) for v in variables]

        return dy * w, grad_vars(variables)

    return x * w, grad
'''),
        Invalid(
            '''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scale(x):
    def grad(dy, variables=None):
        return dy * w, lambda vs: [tf.reduce_sum(dy * x)]

    return x * w, grad
''',
            at="9:9",
            fixed='''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scale(x):
    def grad(dy, variables=None):
        return dy * w, (lambda vs: [tf.reduce_sum(dy * x)])(variables)

    return x * w, grad
'''),
        Invalid(
            '''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scale(x):
    def grad(dy):
        grad_vars = lambda variables: [dy * x for v in variables]
        return dy * w, grad_vars

    return x * w, grad
''',
            at="10:9"),
        # a helper that returns the callable (TF 2.21: object of type 'function' has no len())
        Invalid(
            '''
import tensorflow as tf

w = tf.Variable(2.0, name="w")


def _weight_grads(x, dy):
    return lambda variables: [tf.reduce_sum(dy * x) for _ in variables]


@tf.custom_gradient
def scale(x):
    def grad(dy, variables=None):
        return dy * w, _weight_grads(x, dy)

    return x * w, grad
''',
            at="14:9"),
    ]
    VALID = [
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
def mul(x, y):
    return x * y, lambda dz: (dz * y, dz * x)
''',
        '''
import tensorflow as tf

def make_grad(dy, x):
    return dy * x

@tf.custom_gradient
def square(x):
    def grad(dy):
        return make_grad(dy, 2 * x)

    return x * x, grad
''',
            '''
import tensorflow as tf

@tf.custom_gradient
def cube(x):
    @tf.custom_gradient
    def grad(dy):
        def grad_grad(ddx):
            return ddx * 3.0 * x * x

        return dy * 3.0 * x * x, grad_grad

    return x * x * x, grad
''',
    
    ]

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        for grad in site.grad_fns:
            for ret in grad.returns:
                if ret.pair is not None:
                    if kind_of(site.model, ret.pair[1], grad.scope) == CALLABLE:
                        yield Finding(
                            ret.node,
                            f"`{grad.name}` returns a callable in place of the variable gradients: TensorFlow "
                            "never calls it and raises \"object of type 'function' has no len()\"; return a list "
                            "with one gradient per entry of `variables`",
                            fix=_call_with_variables(site, grad, ret.pair[1]),
                        )


def _call_with_variables(site: GradientSite, grad: GradFn, expr: cst.BaseExpression) -> Fix | None:
    access = variables_expr(grad)
    targets = [v for v in site.model.resolve(expr, grad.scope) if isinstance(v, (cst.FunctionDef, cst.Lambda))]
    if access is None or len(targets) != 1:
        return None
    params = targets[0].params
    positional = [*params.posonly_params, *params.params]
    required = [p for p in positional if p.default is None]
    if len(positional) < 1 or len(required) > 1 or params.kwonly_params and any(p.default is None for p in params.kwonly_params):
        return None
    call = cst.Call(func=parenthesized(expr), args=[cst.Arg(access)])
    what = f"`{expr.value}`" if isinstance(expr, cst.Name) else "the callable"
    return Fix([(expr, call)], safe=True, description=f"Call {what} with `variables`")
