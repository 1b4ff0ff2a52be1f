"""CG011 variable-created-inside."""

from typing import Iterator

from cglint.diagnostics import Finding
from cglint.model import GradientSite
from cglint.rules.base import Invalid, Rule


class VariableCreatedInside(Rule):
    """
    ## What it does
    Flags `tf.Variable(...)`, `tf.compat.v1.get_variable(...)` and `.add_weight(...)` calls
    inside a custom-gradient forward or its grad fn. Creating a variable once and storing it
    on `self` (the lazy `if self.v is None: self.v = tf.Variable(...)` pattern) is left alone.

    ## Why is this bad?
    The forward runs on every call, so a variable created there is a new variable each
    step: its value is reset every time, and it is never among the model's trainable
    variables, so its "training" does nothing. Under `tf.function` (and so in `model.fit`)
    TensorFlow refuses it outright: `ValueError: tf.function only supports singleton
    tf.Variables created on the first call.` Create the variable once, outside (in
    `__init__`/`build` or at module level), and read it in the forward.
    """

    code = "CG011"
    name = "variable-created-inside"
    summary = "`tf.Variable(...)` created inside the custom-gradient forward"

    INVALID = [
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def scale(x):
    w = tf.Variable(2.0)

    def grad(dy, variables=None):
        return dy * w, [tf.reduce_sum(dy * x)]

    return x * w, grad
''',
            at="6:9"),
        Invalid(
            '''
import tensorflow as tf

class Gate(tf.keras.layers.Layer):
    @tf.custom_gradient
    def call(self, x):
        k = self.add_weight(shape=(), initializer="ones")

        def grad(dy, variables=None):
            return dy * k, [tf.reduce_sum(dy * x)]

        return x * k, grad
''',
            at="7:13"),
        Invalid(
            '''
import tensorflow.compat.v1 as tf

@tf.custom_gradient
def biased(x):
    b = tf.get_variable("b", shape=(), initializer=tf.zeros_initializer())

    def grad(dy, variables=None):
        return dy, [tf.reduce_sum(dy)]

    return x + b, grad
''',
            at="6:9"),
    ]
    VALID = [
        '''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scale(x):
    def grad(dy, variables=None):
        return dy * w, [tf.reduce_sum(dy * x)]

    return x * w, grad
''',
        '''
import tensorflow as tf

class Gate(tf.keras.layers.Layer):
    def build(self, shape):
        self.k = self.add_weight(shape=(), initializer="ones")

    @tf.custom_gradient
    def call(self, x):
        def grad(dy, variables=None):
            return dy * self.k, [tf.reduce_sum(dy * x)]

        return x * self.k, grad
''',
        '''
import tensorflow as tf

class Lazy(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = None

    @tf.custom_gradient
    def __call__(self, x):
        if self.w is None:
            self.w = tf.Variable(2.0)

        def grad(dy, variables=None):
            return dy * self.w, [tf.reduce_sum(dy * x)]

        return x * self.w, grad
''',
    ]

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        model = site.model
        cls = site.scope.enclosing_class()
        kept_on_self = {id(v) for values in cls.attributes.values() for v in values} if cls is not None else set()
        for call, _ in site.calls():
            if model.is_variable_call(call) and id(call) not in kept_on_self:
                yield Finding(
                    call,
                    f"a variable is created inside the custom-gradient forward `{site.name}`: it is a new variable "
                    "on every call (reset each step, never trained), and under tf.function TensorFlow raises "
                    "'only supports singleton tf.Variables created on the first call'; create it once outside",
                )
