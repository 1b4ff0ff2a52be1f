"""Evidence that lives in another module of the package: a kernel module's function returning
`(y, grad)` is judged by how its sibling modules use it (CG013), and a forward's variables
include what the project functions it calls read (CG004)."""

from __future__ import annotations

import textwrap

from cglint.engine import lint_file

KERNEL = '''
import tensorflow as tf


def gelu_tanh(x):
    t = tf.tanh(0.79788456 * (x + 0.044715 * x * x * x))
    y = 0.5 * x * (1.0 + t)

    def grad(dy):
        return dy * (0.5 * (1.0 + t))

    return y, grad
'''


def _package(tmp_path, files):
    pkg = tmp_path / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for name, text in files.items():
        (pkg / name).write_text(textwrap.dedent(text))
    return pkg


def _codes(path):
    return [(d.code, d.line) for d in lint_file(str(path)).diagnostics]


def test_undecorated_kernel_used_as_a_value_by_a_sibling(tmp_path):
    pkg = _package(tmp_path, {"kernels.py": KERNEL, "layers.py": '''
from . import kernels


def mlp(h):
    return kernels.gelu_tanh(h) * 2.0
'''})
    assert ("CG013", 5) in _codes(pkg / "kernels.py")


def test_kernel_wrapped_by_a_sibling_is_not_flagged(tmp_path):
    pkg = _package(tmp_path, {"kernels.py": KERNEL, "layers.py": '''
import tensorflow as tf

from . import kernels

gelu = tf.custom_gradient(kernels.gelu_tanh)


def mlp(h):
    return gelu(h) * 2.0
'''})
    assert not [c for c in _codes(pkg / "kernels.py") if c[0] == "CG013"]


def test_variable_read_by_a_function_of_another_module(tmp_path):
    pkg = _package(tmp_path, {"params.py": '''
import tensorflow as tf

log_temperature = tf.Variable(0.0, name="log_temperature")


def temperature():
    return tf.exp(log_temperature)
''', "ops.py": '''
import tensorflow as tf

from . import params


@tf.custom_gradient
def tempered(logits):
    t = params.temperature()

    def grad(dy):
        return dy / t

    return logits / t, grad
'''})
    assert ("CG004", 11) in _codes(pkg / "ops.py")


SCALE_OPS = '''
import tensorflow as tf


@tf.custom_gradient
def scale(x):
    def grad(dy):
        return tf.cast(dy * 2.0, tf.float32)

    return x * 2.0, grad
'''

SCALE_CALLER = '''
import tensorflow as tf
from .ops import scale

x = tf.constant([1.0, 2.0], dtype=tf.float64)
y = scale({arg})
'''


def _lint_unfiltered(path):
    from cglint.engine import lint_source

    return [(d.code, d.line) for d in lint_source(path.read_text(), str(path), prefilter=False).diagnostics]


def test_gradient_dtype_judged_at_a_call_in_another_module(tmp_path):
    """The module defining `scale` does not see its callers; the caller shows a float64 input
    for a gradient fixed to float32 (TensorFlow 2.21: 'expected to be a double tensor but is a
    float tensor' in the gradient of the op that made it), and the finding is at its call."""
    pkg = _package(tmp_path, {"ops.py": SCALE_OPS, "main.py": SCALE_CALLER.format(arg="x"),
                              "ok.py": SCALE_CALLER.format(arg="tf.cast(x, tf.float32)")})
    assert _codes(pkg / "ops.py") == []
    assert _lint_unfiltered(pkg / "main.py") == [("CG016", 6)]
    assert _lint_unfiltered(pkg / "ok.py") == []


import pytest  # noqa: E402


def test_gradient_dtype_at_a_call_in_another_module_through_the_prefilter(tmp_path):
    pkg = _package(tmp_path, {"ops.py": SCALE_OPS, "main.py": SCALE_CALLER.format(arg="x")})
    assert _codes(pkg / "main.py") == [("CG016", 6)]


def test_gradient_dtype_at_a_positional_only_call_in_another_module(tmp_path):
    caller = SCALE_CALLER.replace("tf.constant([1.0, 2.0], dtype=tf.float64)", "tf.cast(tf.constant([1.0, 2.0]), tf.float64)")
    pkg = _package(tmp_path, {"ops.py": SCALE_OPS, "main.py": caller.format(arg="x")})
    assert _lint_unfiltered(pkg / "main.py") == [("CG016", 6)]
    assert _codes(pkg / "main.py") == [("CG016", 6)]


GATED_OPS = '''
import tensorflow as tf


@tf.custom_gradient
def gated_sum(pair, gate):
    a, b = pair

    def grad(dy):
        return {ret}

    return gate * a + (1.0 - gate) * b, grad
'''

GATED_CALLER = '''
import tensorflow as tf
from . import ops


def merge(left, right, gate):
    return ops.gated_sum([left, right], gate)
'''


def test_input_gradient_count_judged_at_a_call_passing_a_structure(tmp_path):
    """`[left, right]` is two inputs to TensorFlow: three gradients are due (TensorFlow 2.21
    raises 'expected to return 3 gradients' for two); the defining module cannot see it."""
    wrong = _package(tmp_path / "wrong", {"ops.py": GATED_OPS.format(ret="dy * gate, dy * (a - b)"),
                                          "main.py": GATED_CALLER})
    right = _package(tmp_path / "right", {"ops.py": GATED_OPS.format(ret="[dy * gate, dy * (1.0 - gate)], dy * (a - b)"),
                                          "main.py": GATED_CALLER})
    assert _codes(wrong / "ops.py") == []
    assert [c for c in _lint_unfiltered(wrong / "main.py") if c[0] == "CG007"] == [("CG007", 7)]
    assert [c for c in _lint_unfiltered(right / "main.py") if c[0] == "CG007"] == []


SCALE_W_OPS = '''
import tensorflow as tf


@tf.custom_gradient
def scale(x, w):
    def grad(dy):
        return dy * w, tf.reduce_sum(dy * x, axis=0)

    return x * w, grad
'''

SCALE_W_LAYER = '''
import keras
from .ops import scale


class Scale(keras.layers.Layer):
    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="w")

    def call(self, x):
        return scale(x, {arg})
'''


def test_keras_weight_passed_to_another_modules_op(tmp_path):
    """TensorFlow 2.21 + Keras 3: the `keras.Variable` passed positionally raises "grad_fn must
    accept keyword argument 'variables'"; its `.value` is a plain input and trains."""
    pkg = _package(tmp_path, {"ops.py": SCALE_W_OPS, "layer.py": SCALE_W_LAYER.format(arg="self.w"),
                              "ok.py": SCALE_W_LAYER.format(arg="self.w.value")})
    assert _codes(pkg / "ops.py") == []
    assert [c for c in _codes(pkg / "layer.py") if c[0] == "CG004"] == [("CG004", 11)]
    assert [c for c in _codes(pkg / "ok.py") if c[0] == "CG004"] == []


STE_OPS = '''
import tensorflow as tf


@tf.custom_gradient
def ste_sign(x, clip_value=1.0):
    def grad(dy):
        return dy * tf.cast(tf.abs(x) <= clip_value, dy.dtype)

    return tf.sign(x), grad
'''


def test_defaulted_input_passed_at_another_modules_call(tmp_path):
    """`ste_sign(w, 0.5)` makes the default an input: TensorFlow 2.21 raises 'expected to return
    2 gradients, but returned 1'; `ste_sign(w)` is right."""
    caller = "from .ops import ste_sign\n\n\ndef binarize(w):\n    return ste_sign({args})\n"
    pkg = _package(tmp_path, {"ops.py": STE_OPS, "main.py": caller.format(args="w, 0.5"),
                              "ok.py": caller.format(args="w")})
    assert [c for c in _lint_unfiltered(pkg / "main.py") if c[0] == "CG010"] == [("CG010", 5)]
    assert [c for c in _lint_unfiltered(pkg / "ok.py") if c[0] == "CG010"] == []
