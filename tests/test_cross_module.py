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
    pkg.mkdir()
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
