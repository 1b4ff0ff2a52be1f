"""The model follows custom gradients across the boundaries real code crosses, so the existing
rules see through them: class hierarchies (a grad fn that is a method of a base class in another
module, `super()`; a base that wraps `self.forward` with `tf.custom_gradient` and a subclass in
another module that defines it), decorators (a user decorator or decorator factory in another
module that applies `tf.custom_gradient` or `tf.function`), structures (a table of backward
functions looked up by a constant key, a dataclass or namedtuple field), factories (a function
of another module that builds the grad fn), calls of a custom-gradient function another module
defines, registries (filled by a decorator or a registry class's `register` method), `dict(...)`
tables, comprehensions and `.update()`, and project modules named by attribute (`ops.clip(x=t)`,
`base.Op` as a base class).

Each package is written as a team would write it; each INVALID / VALID verdict was checked with
TensorFlow 2.21 (the comment on each case says what TensorFlow does). Every multi-file case is
linted alone (the one file: it reads the project modules it imports) and as a tree, with the
same findings.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.inprocess import cglint

# ---- class hierarchies -------------------------------------------------------------------------

BASE = '''import tensorflow as tf


class SavedTensorsOp:
    """Base for ops whose backward is a method: the forward saves what it needs."""

    def save_for_backward(self, *tensors):
        self._saved = tensors

    def backward(self, dy):
        (x,) = self._saved
        return {grad}
'''

SQUARE = '''import tensorflow as tf

from .base import SavedTensorsOp


class Square(SavedTensorsOp):
    def __call__(self, x):
        @tf.custom_gradient
        def forward(x):
            self.save_for_backward(x)
            return x * x, self.backward

        return forward(x)
'''

# The subclass reaches the base's backward through `super()` and binds it to the saved input.
CUBE = '''import functools

import tensorflow as tf

from .base import SavedTensorsOp


class Cube(SavedTensorsOp):
    def backward(self, dy):
        return super().backward(dy)

    def __call__(self, x):
        @tf.custom_gradient
        def forward(x):
            self.save_for_backward(x)
            return x * x * x, super(Cube, self).backward

        return forward(x)
'''

# A staticmethod of the base, bound to the input with functools.partial.
STATIC_BASE = '''import tensorflow as tf


class ElementwiseOp:
    """Elementwise ops: subclasses give `backward(x, dy)` as a staticmethod."""

    @staticmethod
    def backward(x, dy):
        return {grad}
'''

STATIC_SQUARE = '''import functools

import tensorflow as tf

from .base import ElementwiseOp


class Square(ElementwiseOp):
    def __call__(self, x):
        @tf.custom_gradient
        def forward(x):
            return x * x, functools.partial(self.backward, x)

        return forward(x)
'''

# A template method: the base wraps `self.forward`, each subclass (in another module) defines it.
LAYER_BASE = '''import keras
import tensorflow as tf


class CustomGradientLayer(keras.layers.Layer):
    """A layer whose subclasses define `forward(x)`, returning `(y, grad_fn)`."""

    def call(self, x):
        return tf.custom_gradient(self.forward)(x)

    def forward(self, x):
        raise NotImplementedError
'''

SOFTSIGN = '''import tensorflow as tf

from .base import CustomGradientLayer


class SoftSign(CustomGradientLayer):
    def forward(self, x):
        y = x / (1.0 + tf.abs(x))

        def grad(dy):
            return {grad} / (1.0 + tf.abs(x)) ** 2

        return y, grad
'''

# ---- decorators --------------------------------------------------------------------------------

DECORATORS = '''import functools

import tensorflow as tf


def differentiable(name=None):
    """Registers `fn` (returning `(y, grad_fn)`) as an op with its own gradient."""

    def decorate(fn):
        op = tf.custom_gradient(fn)

        @functools.wraps(fn)
        def wrapper(*args):
            with tf.name_scope(name or fn.__name__):
                return op(*args)

        return wrapper

    return decorate


def custom_op(fn):
    return tf.function(tf.custom_gradient(fn))
'''

TEMPERED = '''import tensorflow as tf

from .decorators import differentiable

temperature = tf.Variable(2.0, name="temperature")


@differentiable(name="tempered_tanh")
def tempered_tanh(x):
    y = tf.tanh(x * temperature)

{grad}

    return y, grad
'''

GRAD_NO_VARIABLES = '''    def grad(dy):
        return dy * (1.0 - y * y) * temperature'''

GRAD_WITH_VARIABLES = '''    def grad(dy, variables=None):
        local = dy * (1.0 - y * y)
        return local * temperature, [tf.reduce_sum(local * x)]'''

# Rounding with a straight-through gradient.
ROUND = '''import tensorflow as tf

from .decorators import custom_op


@custom_op
def round_ste(x):
    def grad(dy):
        return {grad}

    return tf.round(x), grad
'''

COMPILE = '''import tensorflow as tf


def compiled(fn):
    """Compile `fn` into a graph."""
    return tf.function(fn, reduce_retracing=True)
'''

LOG1PEXP = '''import tensorflow as tf

from .compile import compiled


{first}
{second}
def log1pexp(x):
    e = tf.exp(x)

    def grad(dy):
        return dy * (1.0 - 1.0 / (1.0 + e))

    return tf.math.log1p(e), grad
'''

# ---- structures --------------------------------------------------------------------------------

BACKWARD = '''import tensorflow as tf


def softplus_backward(x, dy):
    return {grad}


def relu6_backward(x, dy):
    return dy * tf.cast((x > 0.0) & (x < 6.0), dy.dtype)


BACKWARD = {{
    "softplus": softplus_backward,
    "relu6": relu6_backward,
}}
'''

SPECS = '''import dataclasses
from collections import namedtuple
from typing import Callable

from .backward import BACKWARD


@dataclasses.dataclass(frozen=True)
class ActivationSpec:
    name: str
    backward: Callable


Pair = namedtuple("Pair", ["forward", "backward"])

SOFTPLUS = ActivationSpec("softplus", BACKWARD["softplus"])
SOFTPLUS_PAIR = Pair(forward=None, backward=BACKWARD["softplus"])
'''

ACTIVATIONS = '''import functools

import tensorflow as tf

from .backward import BACKWARD
from .specs import SOFTPLUS, SOFTPLUS_PAIR


@tf.custom_gradient
def softplus(x):
    return tf.math.softplus(x), functools.partial(BACKWARD["softplus"], x)


@tf.custom_gradient
def softplus_from_spec(x):
    return tf.math.softplus(x), functools.partial(SOFTPLUS.backward, x)


@tf.custom_gradient
def softplus_from_pair(x):
    return tf.math.softplus(x), functools.partial(SOFTPLUS_PAIR.backward, x)
'''

# ---- factories ---------------------------------------------------------------------------------

GRADS = '''import tensorflow as tf


def make_leaky_grad(x, alpha):
    """The backward of leaky_relu(x, alpha), closed over the forward's inputs."""

    def grad(dy):
        slope = tf.where(x > 0.0, tf.ones_like(x), alpha * tf.ones_like(x))
{ret}

    return grad
'''

LEAKY = '''import tensorflow as tf

from .grads import make_leaky_grad


@tf.custom_gradient
def leaky_relu(x, alpha):
    y = tf.where(x > 0.0, x, alpha * x)
    return y, make_leaky_grad(x, alpha)
'''

SQUARE_GRADS = '''import tensorflow as tf


def make_square_grad(x):
{decorator}    def grad(dy):
        return dy * 2.0 * x

    return grad
'''

SQUARE_OP = '''import tensorflow as tf

from .grads import make_square_grad


@tf.custom_gradient
def square(x):
    return x * x, make_square_grad(x)
'''

ONE_GRADIENT = "        return dy * slope"
TWO_GRADIENTS = ("        dalpha = tf.reduce_sum(tf.where(x > 0.0, tf.zeros_like(x), x) * dy)\n"
                 "        return dy * slope, dalpha")

# ---- calls of a custom-gradient function of another module --------------------------------------

CLIP_OPS = '''import tensorflow as tf


@tf.custom_gradient
def clip_gradient_norm(x):
    """Identity forward; the backward clips the upstream gradient to norm 1."""

    def grad(dy):
        return tf.clip_by_norm(dy, 1.0)

    return tf.identity(x), grad
'''

HEAD = '''import tensorflow as tf

from .ops import clip_gradient_norm


@tf.custom_gradient
def scale_gradient(x):
    return tf.identity(x), lambda dy: 0.5 * dy


def head(features, weights):
    hidden = clip_gradient_norm({arg}tf.matmul(features, weights))
    return tf.reduce_sum(scale_gradient(hidden) * 10.0)
'''

# A custom gradient made from a lambda that hands its input to a method (issue reports' shape):
# the method is the forward TensorFlow runs.
CLIPPER = '''import tensorflow as tf


class Clipper(tf.Module):
    def _clip(self, x):
        def grad(dy):
            return {ret}

        return tf.identity(x), grad

    def __call__(self, x):
        return tf.custom_gradient(lambda t: self._clip(t))(x)
'''


# ---- registries, dict tables and project modules named by attribute -----------------------------

GRADIENT_OPS = CLIP_OPS + '''

@tf.custom_gradient
def scale_gradient(x):
    return tf.identity(x), lambda dy: 0.5 * dy
'''

# A registry filled by a decorator (the ops register themselves when imported).
REGISTRY = '''"""Gradient-shaping ops by name, as the model config names them."""

GRADIENT_OPS = {}


def register(name):
    def decorate(fn):
        GRADIENT_OPS[name] = fn
        return fn

    return decorate


def get_gradient_op(name):
    return GRADIENT_OPS[name]
'''

REGISTERED_OPS = GRADIENT_OPS.replace("import tensorflow as tf\n", "import tensorflow as tf\n\nfrom .registry import register\n") \
    .replace("@tf.custom_gradient\ndef clip", '@register("clip")\n@tf.custom_gradient\ndef clip') \
    .replace("@tf.custom_gradient\ndef scale", '@register("scale")\n@tf.custom_gradient\ndef scale')

REGISTRY_HEAD = '''import tensorflow as tf

from . import ops  # noqa: F401 - registers the ops
from .registry import GRADIENT_OPS, get_gradient_op


def head(features, weights, op_name):
    hidden = GRADIENT_OPS[op_name]({kw}tf.matmul(features, weights))
    shaped = get_gradient_op("scale")({kw}hidden)
    return tf.reduce_sum(shaped * 10.0)
'''

# The same with a registry class (mmcv / detectron style: `@REGISTRY.register(name)`, `.get(name)`).
REGISTRY_CLASS = '''class Registry:
    """Functions registered under a name with `@registry.register(name)`."""

    def __init__(self):
        self._entries = {}

    def register(self, name):
        def decorate(fn):
            self._entries[name] = fn
            return fn

        return decorate

    def get(self, name):
        return self._entries[name]


GRADIENT_OPS = Registry()
'''

CLASS_REGISTERED_OPS = GRADIENT_OPS.replace("import tensorflow as tf\n", "import tensorflow as tf\n\nfrom .registry import GRADIENT_OPS\n") \
    .replace("@tf.custom_gradient\ndef clip", '@GRADIENT_OPS.register("clip")\n@tf.custom_gradient\ndef clip') \
    .replace("@tf.custom_gradient\ndef scale", '@GRADIENT_OPS.register("scale")\n@tf.custom_gradient\ndef scale')

REGISTRY_CLASS_HEAD = '''import tensorflow as tf

from . import ops  # noqa: F401 - registers the ops
from .registry import GRADIENT_OPS


def head(features, weights, op_name):
    hidden = GRADIENT_OPS.get(op_name)({kw}tf.matmul(features, weights))
    return tf.reduce_sum(hidden * 10.0)
'''

# A class-level registry: `@GradientOps.register(name)` and `GradientOps.get(name)` are classmethods.
REGISTRY_CLASSMETHODS = '''class GradientOps:
    """Gradient-shaping ops by name."""

    _ops = {}

    @classmethod
    def register(cls, name):
        def decorate(fn):
            cls._ops[name] = fn
            return fn

        return decorate

    @classmethod
    def get(cls, name):
        return cls._ops[name]
'''

CLASSMETHOD_REGISTERED_OPS = CLASS_REGISTERED_OPS.replace("import GRADIENT_OPS", "import GradientOps") \
    .replace("@GRADIENT_OPS.register", "@GradientOps.register")

REGISTRY_CLASSMETHOD_HEAD = REGISTRY_CLASS_HEAD.replace("import GRADIENT_OPS", "import GradientOps") \
    .replace("GRADIENT_OPS.get", "GradientOps.get")

# Tables made with dict(...), .update() and a comprehension keyed by __name__ (Keras's activations).
TABLES = GRADIENT_OPS + '''

GRADIENT_OPS = dict(clip=clip_gradient_norm)
GRADIENT_OPS.update(scale=scale_gradient)
BY_NAME = {fn.__name__: fn for fn in (clip_gradient_norm, scale_gradient)}
'''

TABLES_HEAD = '''import tensorflow as tf

from .ops import BY_NAME, GRADIENT_OPS


def head(features, weights):
    hidden = GRADIENT_OPS["clip"]({kw}tf.matmul(features, weights))
    shaped = BY_NAME["scale_gradient"]({kw}hidden)
    return tf.reduce_sum(GRADIENT_OPS["scale"](shaped) * 10.0)
'''

# A project module named by attribute: `from mypkg import ops`, `import mypkg.ops as gradient_ops`.
MODULE_ATTR_HEAD = '''import tensorflow as tf

import mypkg.ops as gradient_ops
from mypkg import ops


def head(features, weights):
    hidden = ops.clip_gradient_norm({kw}tf.matmul(features, weights))
    return tf.reduce_sum(gradient_ops.scale_gradient({kw}hidden) * 10.0)
'''

# A package's `__init__` re-exports the ops; the model names them through the package.
PACKAGE_INIT = "from .ops import clip_gradient_norm, scale_gradient\n"

PACKAGE_HEAD = '''import tensorflow as tf

import mypkg


def head(features, weights):
    hidden = mypkg.clip_gradient_norm({kw}tf.matmul(features, weights))
    return tf.reduce_sum(mypkg.scale_gradient({kw}hidden) * 10.0)
'''

# Backward functions registered by a decorator, looked up through the module by a constant key.
BACKWARD_REGISTRY = '''import tensorflow as tf

BACKWARD = {{}}


def backward_of(name):
    """Registers the backward of activation `name`: `fn(x, dy) -> dx`."""

    def decorate(fn):
        BACKWARD[name] = fn
        return fn

    return decorate


@backward_of("softplus")
def softplus_backward(x, dy):
    return {grad}


@backward_of("relu6")
def relu6_backward(x, dy):
    return dy * tf.cast((x > 0.0) & (x < 6.0), dy.dtype)
'''

REGISTERED_SOFTPLUS = '''import functools

import tensorflow as tf

from . import backward


@tf.custom_gradient
def softplus(x):
    return tf.math.softplus(x), functools.partial(backward.BACKWARD["softplus"], x)
'''

# A base class of a project module named by attribute.
SQUARE_BY_MODULE = SQUARE.replace("from .base import SavedTensorsOp", "from . import base") \
    .replace("class Square(SavedTensorsOp)", "class Square(base.SavedTensorsOp)")


# A straight-through round without its decorator; the layer in another module drops its grad fn.
STE_QUANT = '''import tensorflow as tf


def ste_round(x):
    def grad(dy):
        return dy

    return tf.round(x), grad
'''

STE_LAYER = '''import tensorflow as tf

from .quant import ste_round


class QuantDense(tf.keras.layers.Layer):
    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], 4))

    def call(self, x):
        scale = tf.reduce_max(tf.abs(self.kernel)) / 127.0
        {call}
        return x @ (q * scale)
'''

# A decorator factory in another module that compiles the forward, then applies the custom gradient.
COMPILING = '''import tensorflow as tf


def fused_op(jit=False):
    def decorate(fn):
        return {body}

    return decorate
'''

COMPILED_OPS = '''import tensorflow as tf

from .compiling import fused_op


@fused_op()
def log1p_exp(x):
    y = tf.maximum(x, 0.0) + tf.math.log1p(tf.exp(-tf.abs(x)))

    def grad(dy):
        return dy * tf.sigmoid(x)

    return y, grad
'''

# A calibration helper in another module, called from the forward with the input tensor.
CALIBRATION = '''import numpy as np


def clip_range(t):
    return {body}
'''

CALIBRATED = '''import tensorflow as tf

from .calibration import clip_range


@tf.custom_gradient
def clipped(x):
    bound = clip_range(x)

    def grad(dy):
        return dy * tf.cast(tf.abs(x) <= bound, dy.dtype)

    return tf.clip_by_value(x, -bound, bound), grad
'''

CASES = {
    # name: (modules of package `mypkg`, the module linted, the (code, line) findings on it)
    #
    # TensorFlow: 5 * Square()(3.0) has gradient 6.0 (the base's backward drops `dy`); 30.0 is right.
    "hierarchy_invalid": ({"base": BASE.format(grad="2.0 * x"), "square": SQUARE}, "square", [("CG009", 11)]),
    # TensorFlow: 30.0, autodiff's gradient.
    "hierarchy_valid": ({"base": BASE.format(grad="dy * 2.0 * x"), "square": SQUARE}, "square", []),
    # TensorFlow: the base's backward (reached through `super()`) drops `dy`: 5 * Cube()(3.0) -> 6.0.
    "super_invalid": ({"base": BASE.format(grad="2.0 * x"), "cube": CUBE}, "cube", [("CG009", 16)]),
    # TensorFlow: 5 * Square()(3.0) has gradient 6.0 through the staticmethod (`dy` dropped), not 30.0.
    "staticmethod_invalid": ({"base": STATIC_BASE.format(grad="2.0 * x"), "square": STATIC_SQUARE}, "square",
                             [("CG009", 12)]),
    # TensorFlow: 30.0.
    "staticmethod_valid": ({"base": STATIC_BASE.format(grad="dy * 2.0 * x"), "square": STATIC_SQUARE}, "square", []),
    # TensorFlow: 4 * SoftSign()(x) at x = [0.5, -2] has gradient [0.444, 0.111] (`dy` dropped), not [1.778, 0.444].
    "template_method_invalid": ({"base": LAYER_BASE, "layers": SOFTSIGN.format(grad="1.0")}, "layers", [("CG009", 10)]),
    # TensorFlow: [1.778, 0.444], autodiff's gradient.
    "template_method_valid": ({"base": LAYER_BASE, "layers": SOFTSIGN.format(grad="dy")}, "layers", []),
    # TensorFlow: raises TypeError "@tf.custom_gradient grad_fn must accept keyword argument
    # 'variables', since function uses variables" (the decorator applies tf.custom_gradient).
    "decorator_invalid": ({"decorators": DECORATORS, "ops": TEMPERED.format(grad=GRAD_NO_VARIABLES)},
                          "ops", [("CG004", 12)]),
    # TensorFlow: d/dx = [1.4231555, 1.7112775], d/dtemperature = 0.0423 at x = [0.3, -0.2] (autodiff's).
    "decorator_valid": ({"decorators": DECORATORS, "ops": TEMPERED.format(grad=GRAD_WITH_VARIABLES)}, "ops", []),
    # TensorFlow: under `tf.function(tf.custom_gradient(f))`, 3 * round_ste(0.4) has gradient 1.0, not 3.0.
    "plain_decorator_invalid": ({"decorators": DECORATORS, "ops": ROUND.format(grad="tf.ones_like(x)")},
                                "ops", [("CG009", 8)]),
    # TensorFlow: 3.0, the upstream passed straight through.
    "plain_decorator_valid": ({"decorators": DECORATORS, "ops": ROUND.format(grad="dy")}, "ops", []),
    # TensorFlow: TypeError "To be compatible with tf.function, Python functions must return zero or
    # more Tensors" (the user decorator traces the forward, which returns `(y, grad)`).
    "tf_function_decorator_invalid": ({"compile": COMPILE, "ops": LOG1PEXP.format(
        first="@tf.custom_gradient", second="@compiled")}, "ops", [("CG001", 7)]),
    # TensorFlow: 0.8176 = sigmoid(1.5), autodiff's gradient (tf.function above the decorator).
    "tf_function_decorator_valid": ({"compile": COMPILE, "ops": LOG1PEXP.format(
        first="@compiled", second="@tf.custom_gradient")}, "ops", []),
    # TensorFlow: the grad fn the factory makes is a new tf.function on every call of square: four
    # gradients, four traces (a Python counter in the grad fn).
    "factory_tf_function_invalid": ({"grads": SQUARE_GRADS.format(decorator="    @tf.function\n"), "ops": SQUARE_OP},
                                    "ops", [("CG001", 8)]),
    # TensorFlow: the same gradients (6.0 at x = 3), no tracing.
    "factory_tf_function_valid": ({"grads": SQUARE_GRADS.format(decorator=""), "ops": SQUARE_OP}, "ops", []),
    # TensorFlow: the gradient of head() w.r.t. weights is [5, 10] at features [[1, 2]]: the
    # all-keyword call skips clip_gradient_norm's custom gradient (clipped it is [1, 2]).
    "imported_site_call_invalid": ({"ops": CLIP_OPS, "model": HEAD.format(arg="x=")}, "model", [("CG010", 12)]),
    # TensorFlow: [1, 2], the clipped gradient.
    "imported_site_call_valid": ({"ops": CLIP_OPS, "model": HEAD.format(arg="")}, "model", []),
    # TensorFlow: 3 * softplus(0.5) has gradient 0.6225 (sigmoid(0.5), `dy` dropped); 1.8674 is right,
    # through the table, the dataclass field and the namedtuple field alike.
    "structures_invalid": ({"backward": BACKWARD.format(grad="tf.sigmoid(x)"), "specs": SPECS,
                            "activations": ACTIVATIONS}, "activations", [("CG009", 11), ("CG009", 16), ("CG009", 21)]),
    # TensorFlow: 1.8674, autodiff's gradient, for all three.
    "structures_valid": ({"backward": BACKWARD.format(grad="dy * tf.sigmoid(x)"), "specs": SPECS,
                          "activations": ACTIVATIONS}, "activations", []),
    # TensorFlow: ValueError "custom_gradient function expected to return 2 gradients, but returned 1 instead".
    "factory_invalid": ({"grads": GRADS.format(ret=ONE_GRADIENT), "ops": LEAKY}, "ops", [("CG007", 9)]),
    # TensorFlow: d/dx = [1.0, 0.1], d/dalpha = -2.0 at x = [1, -2], alpha = 0.1 (autodiff's).
    "factory_valid": ({"grads": GRADS.format(ret=TWO_GRADIENTS), "ops": LEAKY}, "ops", []),
    # TensorFlow: with op "clip", the gradient of head() w.r.t. weights at features [[1, 2]] is
    # [10, 20]: both all-keyword calls, through the registry and through get_gradient_op, skip
    # the custom gradients (positional: [1, 2], scaled then clipped). model.py never mentions
    # custom_gradient: it is linted because it imports the modules that define them.
    "registry_invalid": ({"registry": REGISTRY, "ops": REGISTERED_OPS, "model": REGISTRY_HEAD.format(kw="x=")},
                         "model", [("CG010", 8), ("CG010", 9)]),
    # TensorFlow: [1, 2].
    "registry_valid": ({"registry": REGISTRY, "ops": REGISTERED_OPS, "model": REGISTRY_HEAD.format(kw="")},
                       "model", []),
    # TensorFlow: [10, 20] through `@GRADIENT_OPS.register("clip")` and `GRADIENT_OPS.get(op_name)`.
    "registry_class_invalid": ({"registry": REGISTRY_CLASS, "ops": CLASS_REGISTERED_OPS,
                                "model": REGISTRY_CLASS_HEAD.format(kw="x=")}, "model", [("CG010", 8)]),
    # TensorFlow: [1, 2].
    "registry_class_valid": ({"registry": REGISTRY_CLASS, "ops": CLASS_REGISTERED_OPS,
                              "model": REGISTRY_CLASS_HEAD.format(kw="")}, "model", []),
    # TensorFlow: [10, 20] through the classmethods `GradientOps.register("clip")` and `GradientOps.get(op_name)`.
    "registry_classmethod_invalid": ({"registry": REGISTRY_CLASSMETHODS, "ops": CLASSMETHOD_REGISTERED_OPS,
                                      "model": REGISTRY_CLASSMETHOD_HEAD.format(kw="x=")}, "model", [("CG010", 8)]),
    # TensorFlow: [1, 2].
    "registry_classmethod_valid": ({"registry": REGISTRY_CLASSMETHODS, "ops": CLASSMETHOD_REGISTERED_OPS,
                                    "model": REGISTRY_CLASSMETHOD_HEAD.format(kw="")}, "model", []),
    # TensorFlow: [5, 10]: the keyword calls of the dict(...) entry and of the comprehension's
    # entry (keyed by `__name__`, which tf.custom_gradient keeps) skip clipping and the first
    # scaling; [1, 2] called positionally.
    "dict_tables_invalid": ({"ops": TABLES, "model": TABLES_HEAD.format(kw="x=")}, "model",
                            [("CG010", 7), ("CG010", 8)]),
    # TensorFlow: [1, 2].
    "dict_tables_valid": ({"ops": TABLES, "model": TABLES_HEAD.format(kw="")}, "model", []),
    # TensorFlow: [10, 20] through `ops.clip_gradient_norm(x=...)` and `gradient_ops.scale_gradient(x=...)`.
    "module_attr_invalid": ({"ops": GRADIENT_OPS, "model": MODULE_ATTR_HEAD.format(kw="x=")}, "model",
                            [("CG010", 8), ("CG010", 9)]),
    # TensorFlow: [1, 2].
    "module_attr_valid": ({"ops": GRADIENT_OPS, "model": MODULE_ATTR_HEAD.format(kw="")}, "model", []),
    # TensorFlow: [10, 20] through `mypkg.clip_gradient_norm(x=...)`, re-exported by the package's `__init__`.
    "package_reexport_invalid": ({"__init__": PACKAGE_INIT, "ops": GRADIENT_OPS, "model": PACKAGE_HEAD.format(kw="x=")},
                                 "model", [("CG010", 7), ("CG010", 8)]),
    # TensorFlow: [1, 2].
    "package_reexport_valid": ({"__init__": PACKAGE_INIT, "ops": GRADIENT_OPS, "model": PACKAGE_HEAD.format(kw="")},
                               "model", []),
    # TensorFlow: 3 * softplus(0.5) has gradient 0.6225 through the registered backward (`dy`
    # dropped); 1.8674 is right.
    "grad_registry_invalid": ({"backward": BACKWARD_REGISTRY.format(grad="tf.sigmoid(x)"),
                               "activations": REGISTERED_SOFTPLUS}, "activations", [("CG009", 10)]),
    # TensorFlow: 1.8674.
    "grad_registry_valid": ({"backward": BACKWARD_REGISTRY.format(grad="dy * tf.sigmoid(x)"),
                             "activations": REGISTERED_SOFTPLUS}, "activations", []),
    # TensorFlow: 5 * Square()(3.0) has gradient 6.0 through `base.SavedTensorsOp`'s backward (`dy` dropped).
    "module_attr_base_invalid": ({"base": BASE.format(grad="2.0 * x"), "square": SQUARE_BY_MODULE}, "square",
                                 [("CG009", 11)]),
    # TensorFlow: 30.0.
    "module_attr_base_valid": ({"base": BASE.format(grad="dy * 2.0 * x"), "square": SQUARE_BY_MODULE}, "square", []),
    # TensorFlow: ValueError "custom_gradient function expected to return 1 gradients, but returned 2 instead".
    "lambda_method_invalid": ({"clip": CLIPPER.format(ret="tf.clip_by_norm(dy, 1.0), dy")}, "clip", [("CG007", 7)]),
    # TensorFlow: an upstream [3, 4] reaches x clipped to norm 1, [0.6, 0.8].
    "lambda_method_valid": ({"clip": CLIPPER.format(ret="tf.clip_by_norm(dy, 1.0)")}, "clip", []),
    # TensorFlow: the kernel gets a gradient in 1 entry of 12 (through the scale only; round's own is
    # zero), 12 of 12 through the straight-through estimator.
    "dropped_grad_fn_invalid": ({"quant": STE_QUANT, "layers": STE_LAYER.format(call="q, _ = ste_round(self.kernel / scale)")},
                                "layers", [("CG013", 12)]),
    # TensorFlow: nonzero kernel gradient through the wrapped op.
    "dropped_grad_fn_valid": ({"quant": STE_QUANT,
                               "layers": STE_LAYER.format(call="q = tf.custom_gradient(ste_round)(self.kernel / scale)")},
                              "layers", []),
    # TensorFlow: TypeError "To be compatible with tf.function, Python functions must return zero or more Tensors".
    "compiling_factory_invalid": ({"compiling": COMPILING.format(body="tf.custom_gradient(tf.function(fn, jit_compile=jit))"),
                                   "ops": COMPILED_OPS}, "ops", [("CG001", 6)]),
    # TensorFlow: d/dx = sigmoid(x), the custom gradient, through the compiled op.
    "compiling_factory_valid": ({"compiling": COMPILING.format(body="tf.function(tf.custom_gradient(fn), jit_compile=jit)"),
                                 "ops": COMPILED_OPS}, "ops", []),
    # TensorFlow: right eagerly; under tf.function NotImplementedError "Cannot convert a symbolic tf.Tensor to a numpy array".
    "numpy_helper_invalid": ({"calibration": CALIBRATION.format(body="float(np.percentile(np.abs(t), 99.0))"),
                              "calibrated": CALIBRATED}, "calibrated", [("CG012", 8)]),
    # TensorFlow: the same gradient eagerly and under tf.function (NumPy on the static shape only).
    "numpy_helper_valid": ({"calibration": CALIBRATION.format(body="3.0 / float(np.sqrt(np.prod(t.shape)))"),
                            "calibrated": CALIBRATED}, "calibrated", []),
}


def write_package(root: Path, modules: dict[str, str]) -> None:
    pkg = root / "mypkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for module, text in modules.items():
        (pkg / f"{module}.py").write_text(text)


def findings(root: Path, target: str) -> dict[str, list[tuple[str, int]]]:
    run = cglint("--no-cache", "--output-format", "json", target, cwd=root)
    assert run.returncode in (0, 1), run.stderr
    out: dict[str, list[tuple[str, int]]] = {}
    for d in json.loads(run.stdout)["diagnostics"]:
        out.setdefault(Path(d["path"]).as_posix(), []).append((d["code"], d["line"]))
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_rules_see_across_the_boundary_alone_and_in_the_tree(tmp_path, name):
    modules, linted, expected = CASES[name]
    write_package(tmp_path, modules)
    path = f"mypkg/{linted}.py"
    alone = findings(tmp_path, path)
    tree = findings(tmp_path, ".")
    assert sorted(alone.get(path, [])) == expected
    assert alone == tree  # the same answer linted alone as in its tree; nothing on the other modules


def test_a_change_two_imports_away_invalidates_the_cache(tmp_path):
    """The grad fn is an entry of backward.py's table, reached through specs.py's dataclass: a
    fix in backward.py changes the answer for ops.py, which imports only specs.py."""
    ops = ("import functools\n\nimport tensorflow as tf\n\nfrom .specs import SOFTPLUS\n\n\n@tf.custom_gradient\n"
           "def softplus(x):\n    return tf.math.softplus(x), functools.partial(SOFTPLUS.backward, x)\n")
    write_package(tmp_path, {"backward": BACKWARD.format(grad="tf.sigmoid(x)"), "specs": SPECS, "ops": ops})

    def run():
        result = cglint("--output-format", "json", "mypkg/ops.py", cwd=tmp_path)
        return [(d["code"], d["line"]) for d in json.loads(result.stdout)["diagnostics"]]

    assert run() == [("CG009", 10)]
    assert run() == [("CG009", 10)]  # from the cache
    (tmp_path / "mypkg" / "backward.py").write_text(BACKWARD.format(grad="dy * tf.sigmoid(x)"))
    assert run() == []
    (tmp_path / "mypkg" / "backward.py").write_text(BACKWARD.format(grad="tf.sigmoid(x)"))
    assert run() == [("CG009", 10)]


# A module that never mentions custom_gradient: it only calls, by keyword, one that ops.py defines.
KEYWORD_CALLER = '''import tensorflow as tf

from .ops import clip_gradient_norm


def head(features, weights):
    return tf.reduce_sum(clip_gradient_norm(x=tf.matmul(features, weights)) * 10.0)
'''


def test_a_file_that_only_calls_an_imported_site_by_keyword_is_linted(tmp_path):
    """TensorFlow: the gradient of head() w.r.t. weights at features [[1, 2]] is [10, 20] (the
    all-keyword call skips the clipping; positional, [1, 2]). The prefilter lets the file
    through because it imports ops.py, whichever way it is linted; when ops.py's function stops
    being a custom gradient, the cached answer is dropped."""
    write_package(tmp_path, {"ops": CLIP_OPS, "model": KEYWORD_CALLER})
    expected = [("CG010", 7)]
    assert findings(tmp_path, "mypkg/model.py")["mypkg/model.py"] == expected
    assert findings(tmp_path, ".") == {"mypkg/model.py": expected}
    stdin = cglint_stdin(tmp_path, KEYWORD_CALLER, "--stdin-filename", "mypkg/model.py")
    assert stdin == expected

    def cached():
        run = cglint("--output-format", "json", "mypkg/model.py", cwd=tmp_path)
        return [(d["code"], d["line"]) for d in json.loads(run.stdout)["diagnostics"]]

    assert cached() == expected
    assert cached() == expected  # from the cache
    (tmp_path / "mypkg" / "ops.py").write_text("import tensorflow as tf\n\n\ndef clip_gradient_norm(x):\n    return x\n")
    assert cached() == []
    (tmp_path / "mypkg" / "ops.py").write_text(CLIP_OPS)
    assert cached() == expected
    # Linted alone with no package around it, the same text says nothing (no module to import).
    assert cglint_stdin(tmp_path, KEYWORD_CALLER) == []
    # The editor's lint (the language server's incremental analysis) lets it through as well.
    from cglint.lsp.incremental import Analysis
    from cglint.rules import ALL_RULES

    edited = Analysis().lint(KEYWORD_CALLER, str(tmp_path / "mypkg" / "model.py"), list(ALL_RULES))
    assert [(d.code, d.line) for d in edited.result.diagnostics] == expected


def cglint_stdin(cwd: Path, text: str, *args: str) -> list[tuple[str, int]]:
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "cglint", "--no-cache", "--output-format", "json", *args, "-"],
                         input=text, capture_output=True, text=True, cwd=cwd)
    assert run.returncode in (0, 1), run.stderr
    return [(d["code"], d["line"]) for d in json.loads(run.stdout)["diagnostics"]]
