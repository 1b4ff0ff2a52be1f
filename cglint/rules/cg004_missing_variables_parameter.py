"""CG004 missing-variables-parameter."""

from typing import Iterator

import libcst as cst

from cglint.diagnostics import Finding, Fix
from cglint.model import GradientSite, ModuleModel
from cglint.rules._fixes import add_variables_parameter
from cglint.rules.base import Invalid, Rule


class MissingVariablesParameter(Rule):
    """
    ## What it does
    Flags a grad fn that accepts neither a `variables` parameter nor `**kwargs` when the
    forward reads trainable `tf.Variable`s that are not among its inputs (module globals,
    closures, Keras weights on `self`). Reads are followed through the data flow: an alias
    made in the enclosing method (`w = self.kernel`), an entry of a container (`self.ws[0]`,
    `self.params["w"]`, `kernel, bias = self.trainable_weights`), a sublayer (`self.dense(x)`,
    `self.dense.kernel`, a `keras.layers.*` or a Keras layer class of the module), and
    `get_variable` inside a `variable_scope` block.

    ## Why is this bad?
    TensorFlow records the trainable variables the forward reads and passes them to the grad
    fn as the keyword `variables`. A grad fn that cannot take it raises `TypeError:
    @tf.custom_gradient grad_fn must accept keyword argument 'variables', since function uses
    variables: [...]` at the first gradient. Non-trainable variables (`trainable=False`) are
    not watched and need no parameter.
    """

    fix_safety = """
    The fix adds a `variables=None` parameter to the grad fn (keyword-only after `*args`).
    That alone does not make the grad fn correct: with variables, TensorFlow also requires it
    to return `(input_grads, [one gradient per entry of variables])`, so the return must change
    too (CG002's and CG003's fixes do that where they can; otherwise you must). The fix is
    therefore unsafe.
    """

    code = "CG004"
    name = "missing-variables-parameter"
    summary = "The forward reads trainable variables but the grad fn takes no `variables`"

    INVALID = [
        Invalid(
            '''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scale(x):
    def grad(dy):
        return dy * w

    return x * w, grad
''',
            at="8:9",
            fixed='''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scale(x):
    def grad(dy, variables=None):
        return dy * w

    return x * w, grad
'''),
        Invalid(
            '''
import tensorflow as tf

class Scale(tf.keras.layers.Layer):
    def build(self, shape):
        self.k = self.add_weight(shape=())

    @tf.custom_gradient
    def call(self, x):
        return x * self.k, lambda dy: dy * self.k
''',
            at="10:28",
            fixed='''
import tensorflow as tf

class Scale(tf.keras.layers.Layer):
    def build(self, shape):
        self.k = self.add_weight(shape=())

    @tf.custom_gradient
    def call(self, x):
        return x * self.k, lambda dy, variables=None: dy * self.k
'''),
        Invalid(
            '''
import tensorflow as tf

def make():
    v = tf.Variable(1.0)

    @tf.custom_gradient
    def shift(x):
        def grad(dy):
            return dy

        return x + v, grad

    return shift
''',
            at="9:13",
            fixed='''
import tensorflow as tf

def make():
    v = tf.Variable(1.0)

    @tf.custom_gradient
    def shift(x):
        def grad(dy, variables=None):
            return dy

        return x + v, grad

    return shift
'''),
        Invalid(
            '''
import tensorflow as tf


@tf.custom_gradient
def scale(x, w):
    def grad(dy):
        return dy * w, tf.reduce_sum(dy * x, axis=0)

    return x * w, grad


class Scale(tf.keras.layers.Layer):
    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="w")

    def call(self, x):
        return scale(x, self.w)
''',
            at="7:9",
            fixed='''
import tensorflow as tf


@tf.custom_gradient
def scale(x, w):
    def grad(dy):
        return dy * w, tf.reduce_sum(dy * x, axis=0)

    return x * w, grad


class Scale(tf.keras.layers.Layer):
    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="w")

    def call(self, x):
        return scale(x, self.w.value)
'''),
        Invalid(
            '''
import tensorflow as tf

class Scale(tf.keras.layers.Layer):
    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1],), initializer="ones")

    def call(self, x):
        w = self.kernel

        @tf.custom_gradient
        def scale(x):
            def grad(dy):
                return dy * w

            return x * w, grad

        return scale(x)
''',
            at="13:17",
            fixed='''
import tensorflow as tf

class Scale(tf.keras.layers.Layer):
    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1],), initializer="ones")

    def call(self, x):
        w = self.kernel

        @tf.custom_gradient
        def scale(x):
            def grad(dy, variables=None):
                return dy * w

            return x * w, grad

        return scale(x)
'''),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def scaled(x):
    with tf.compat.v1.variable_scope("scaled", reuse=tf.compat.v1.AUTO_REUSE):
        w = tf.compat.v1.get_variable("w", shape=(), initializer=tf.compat.v1.ones_initializer())

    def grad(dy):
        return dy * w

    return x * w, grad
''',
            at="9:9",
            fixed='''
import tensorflow as tf

@tf.custom_gradient
def scaled(x):
    with tf.compat.v1.variable_scope("scaled", reuse=tf.compat.v1.AUTO_REUSE):
        w = tf.compat.v1.get_variable("w", shape=(), initializer=tf.compat.v1.ones_initializer())

    def grad(dy, variables=None):
        return dy * w

    return x * w, grad
'''),
        Invalid(
            '''
import tensorflow as tf

class Chain(tf.Module):
    def __init__(self):
        super().__init__()
        self.scales = [tf.Variable(1.0), tf.Variable(2.0)]

    def __call__(self, x):
        @tf.custom_gradient
        def chain(x):
            def grad(dy):
                return dy * self.scales[0] * self.scales[1]

            return x * self.scales[0] * self.scales[1], grad

        return chain(x)
''',
            at="12:17",
            fixed='''
import tensorflow as tf

class Chain(tf.Module):
    def __init__(self):
        super().__init__()
        self.scales = [tf.Variable(1.0), tf.Variable(2.0)]

    def __call__(self, x):
        @tf.custom_gradient
        def chain(x):
            def grad(dy, variables=None):
                return dy * self.scales[0] * self.scales[1]

            return x * self.scales[0] * self.scales[1], grad

        return chain(x)
'''),
        Invalid(
            '''
import keras
import tensorflow as tf

class Projection(keras.layers.Layer):
    def __init__(self, units):
        super().__init__()
        self.dense = keras.layers.Dense(units)

    def call(self, x):
        @tf.custom_gradient
        def project(x):
            def grad(dy):
                return dy @ tf.transpose(self.dense.kernel)

            return self.dense(x), grad

        return project(x)
''',
            at="13:17",
            fixed='''
import keras
import tensorflow as tf

class Projection(keras.layers.Layer):
    def __init__(self, units):
        super().__init__()
        self.dense = keras.layers.Dense(units)

    def call(self, x):
        @tf.custom_gradient
        def project(x):
            def grad(dy, variables=None):
                return dy @ tf.transpose(self.dense.kernel)

            return self.dense(x), grad

        return project(x)
'''),
        Invalid(
            '''
import keras
import tensorflow as tf

class Affine(keras.layers.Layer):
    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1],), initializer="ones")
        self.bias = self.add_weight(shape=(input_shape[-1],), initializer="zeros")

    def call(self, x):
        kernel, bias = self.trainable_weights

        @tf.custom_gradient
        def affine(x):
            def grad(dy):
                return dy * kernel

            return x * kernel + bias, grad

        return affine(x)
''',
            at="15:17",
            fixed='''
import keras
import tensorflow as tf

class Affine(keras.layers.Layer):
    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1],), initializer="ones")
        self.bias = self.add_weight(shape=(input_shape[-1],), initializer="zeros")

    def call(self, x):
        kernel, bias = self.trainable_weights

        @tf.custom_gradient
        def affine(x):
            def grad(dy, variables=None):
                return dy * kernel

            return x * kernel + bias, grad

        return affine(x)
'''),
    
        # the variable is read by a helper method the forward calls (TF 2.21: must accept 'variables')
        Invalid(
            '''
import tensorflow as tf


class Head(tf.Module):
    def __init__(self):
        self.w = tf.Variable([[1.0, 0.5], [0.2, 2.0]], name="w")

    def _project(self, x):
        return tf.matmul(x, self.w)

    def __call__(self, x):
        @tf.custom_gradient
        def project(h):
            z = self._project(h)

            def grad(dz):
                return tf.matmul(dz, self.w, transpose_b=True)

            return z, grad

        return project(x)
''',
            at="17:17",
            fixed='''
import tensorflow as tf


class Head(tf.Module):
    def __init__(self):
        self.w = tf.Variable([[1.0, 0.5], [0.2, 2.0]], name="w")

    def _project(self, x):
        return tf.matmul(x, self.w)

    def __call__(self, x):
        @tf.custom_gradient
        def project(h):
            z = self._project(h)

            def grad(dz, variables=None):
                return tf.matmul(dz, self.w, transpose_b=True)

            return z, grad

        return project(x)
'''),
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

steps = tf.Variable(0.0, trainable=False)

@tf.custom_gradient
def scale(x):
    return x * steps, lambda dy: dy * steps
''',
        '''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scale(x):
    def grad(dy, **kwargs):
        return dy * w, [tf.reduce_sum(dy * x) for v in kwargs["variables"]]

    return x * w, grad
''',
        '''
import tensorflow as tf


@tf.custom_gradient
def scale(x, w):
    def grad(dy):
        return dy * w, tf.reduce_sum(dy * x, axis=0)

    return x * w, grad


class Scale(tf.keras.layers.Layer):
    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="w")

    def call(self, x):
        return scale(x, self.w.value)
''',
            '''
import tensorflow as tf

class Normalize(tf.keras.layers.Layer):
    def build(self, input_shape):
        self.mean = self.add_weight(shape=(input_shape[-1],), initializer="zeros", trainable=False)

    def call(self, x):
        mean = self.mean

        @tf.custom_gradient
        def normalize(x):
            def grad(dy):
                return dy

            return x - mean, grad

        return normalize(x)
''',
            '''
import keras
import tensorflow as tf

class Projection(keras.layers.Layer):
    def __init__(self, units):
        super().__init__()
        self.dense = keras.layers.Dense(units)

    def call(self, x):
        @tf.custom_gradient
        def project(x):
            def grad(dy, variables=None):
                kernel, bias = self.dense.kernel.value, self.dense.bias.value
                by_var = {kernel.ref(): tf.transpose(x) @ dy, bias.ref(): tf.reduce_sum(dy, 0)}
                return dy @ tf.transpose(self.dense.kernel), [by_var[v.ref()] for v in variables]

            return self.dense(x), grad

        return project(x)
''',
    
    ]

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        yield from _keras_weights_passed(site)
        variables = site.trainable_variables
        if not variables:
            return
        names = ", ".join(f"`{v.name}`" for v in variables)
        for grad in site.grad_fns:
            if not grad.accepts_variables:
                yield Finding(
                    grad.anchor,
                    f"`{grad.name}` takes no `variables` parameter, but the forward `{site.name}` reads "
                    f"trainable variable{'s' if len(variables) > 1 else ''} {names}: TensorFlow raises "
                    "\"grad_fn must accept keyword argument 'variables'\"",
                    fix=_fix(grad),
                )


    def check(self, model: ModuleModel) -> Iterator[Finding]:
        """Also a Keras 3 weight this module passes to a custom-gradient function of another
        project module (`ops.scale(x, self.w)`): the defining module does not see it, so the
        finding is at the argument."""
        yield from super().check(model)
        for call, scope, site in model.calls_of_other_modules_sites():
            if not call.args or all(g.accepts_variables for g in site.grad_fns):
                continue
            for arg, weight, _param in model.keras_weights_in_call(site, call, scope):
                grad = next(g for g in site.grad_fns if not g.accepts_variables)
                yield Finding(
                    arg.value,
                    f"The Keras 3 weight `{weight.name}` is passed positionally to `{site.name}`, whose `{grad.name}` "
                    "takes no `variables` parameter: eagerly TensorFlow does not recognise the `keras.Variable` as "
                    "that input (it compares the wrapper with the backing tf.Variable the forward reads) and raises "
                    "\"grad_fn must accept keyword argument 'variables'\"; pass its `.value`",
                    fix=Fix([(arg.value, cst.Attribute(value=arg.value, attr=cst.Name("value")))], safe=True,
                            description=f"Pass `{weight.name}.value`: the weight's backing variable, a plain input"),
                )


def _fix(grad) -> Fix | None:
    edit = add_variables_parameter(grad)
    if edit is None:
        return None
    return Fix([edit], safe=False,
               description=f"Add a `variables=None` parameter to `{grad.name}` (its return must then include the variable gradients)")


def _keras_weights_passed(site: GradientSite) -> Iterator[Finding]:
    """A Keras 3 weight passed positionally (`op(x, self.w)`) to a grad fn without `variables`:
    eagerly TensorFlow compares the wrapper with the backing variable the forward reads, finds
    no match and raises; `self.w.value` makes it a plain input (eager and `tf.function` alike)."""
    passed = site.model.keras_weights_passed(site)
    if not passed:
        return
    edits = [(arg.value, cst.Attribute(value=arg.value, attr=cst.Name("value"))) for arg, _, _ in passed]
    names = ", ".join(f"`{w.name}`" for _, w, _ in passed)
    for grad in site.grad_fns:
        if grad.accepts_variables:
            continue
        yield Finding(
            grad.anchor,
            f"`{grad.name}` takes no `variables` parameter, and the Keras 3 weight {names} is passed to "
            f"`{site.name}` positionally: eagerly TensorFlow does not recognise the `keras.Variable` as that input "
            "(it compares the wrapper with the backing tf.Variable the forward reads) and raises \"grad_fn must "
            "accept keyword argument 'variables'\"; pass its `.value`",
            fix=Fix(edits, safe=True, description=f"Pass {', '.join(f'`{w.name}.value`' for _, w, _ in passed)}: "
                    "the weight's backing variable, a plain input"),
        )
