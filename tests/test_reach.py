"""Reach: TensorFlow through a configured re-export, an unimported `tf`, TensorFlow's own
module-local `custom_gradient`, Keras 3's `keras.ops.custom_gradient`, and CG013 in files that
never mention `custom_gradient`. Each TensorFlow behaviour named here was checked with
TensorFlow 2.21 + Keras 3.15 (the buggy shapes raise as the messages say)."""

import json

from support import cglint

from cglint import files, quickscan
from cglint.engine import lint_source

# Three inputs, two gradients: TensorFlow raises "expected to return 3 gradients, but returned 2".
FMA = '''
@tf.custom_gradient
def fma(p, q, r):
    def grad(dy):
        return dy * q, dy * p

    return p * q + r, grad
'''


def codes(source, **kwargs):
    return [(d.line, d.column, d.code) for d in lint_source(source, "m.py", **kwargs).diagnostics]


def test_a_configured_reexport_of_tensorflow_is_tensorflow(tmp_path):
    (tmp_path / "ops.py").write_text("from lingvo import compat as tf\n" + FMA)
    assert json.loads(cglint("--output-format", "json", str(tmp_path)).stdout)["diagnostics"] == []
    (tmp_path / "pyproject.toml").write_text('[tool.cglint]\ntensorflow-aliases = ["lingvo.compat"]\n')
    found = json.loads(cglint("--output-format", "json", str(tmp_path)).stdout)["diagnostics"]
    assert [(d["line"], d["column"], d["code"]) for d in found] == [(6, 9, "CG007")]
    # The same through `from lingvo.compat import custom_gradient` and the library call.
    source = "from lingvo.compat import custom_gradient\n" + FMA.replace("@tf.", "@")
    assert codes(source, tensorflow_aliases=("lingvo.compat",)) == [(6, 9, "CG007")]
    assert codes(source, tensorflow_aliases=()) == []


def test_tensorflow_aliases_must_be_module_names(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.cglint]\ntensorflow-aliases = "lingvo.compat"\n')
    (tmp_path / "m.py").write_text("x = 1\n")
    run = cglint(str(tmp_path / "m.py"), cwd=tmp_path)
    assert run.returncode == 2 and "tensorflow-aliases" in run.stderr and "Traceback" not in run.stderr
    (tmp_path / "pyproject.toml").write_text('[tool.cglint]\ntensorflow-aliases = ["lingvo compat"]\n')
    run = cglint(str(tmp_path / "m.py"), cwd=tmp_path)
    assert run.returncode == 2 and "dotted module names" in run.stderr


def test_an_unimported_tf_is_tensorflow():
    # A snippet or notebook cell: `import tensorflow as tf` ran elsewhere.
    assert codes(FMA) == [(5, 9, "CG007")]
    # ... but not a `tf` the module binds itself.
    assert codes("tf = load_backend()\n" + FMA) == []
    assert codes("def op(tf):\n    return tf.custom_gradient\n" + FMA) == []


def test_tensorflows_own_module_local_custom_gradient():
    # TensorFlow's custom_gradient.py decorates its own helpers with the module-local name.
    source = '''
from tensorflow.python.util.tf_export import tf_export


@tf_export("custom_gradient")
def custom_gradient(f=None):
    return f


def grad_pass_through(f):
    @custom_gradient
    def _grad_pass_through_op(x):
        def grad(dy, dz):
            return dy

        return f(x) * 2.0, grad

    return _grad_pass_through_op
'''
    assert [c for _, _, c in codes(source)] == ["CG008"]
    # A module's own unrelated `custom_gradient` is not TensorFlow's.
    assert codes(source.replace('@tf_export("custom_gradient")\n', "")) == []


KERAS_LAYER = '''
import keras
from keras import ops


class SoftClip(keras.layers.Layer):
    def build(self, input_shape):
        self.scale = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="scale")

    def call(self, x):
        @ops.custom_gradient
        def soft_clip(x):
            y = ops.tanh(x) * self.scale

            def grad(*args, upstream=None):
                if upstream is None:
                    (upstream,) = args
                return upstream * self.scale * (1.0 - ops.tanh(x) ** 2)

            return y, grad

        return soft_clip(x)
'''


def test_keras_ops_custom_gradient_sites_are_checked():
    # On the TensorFlow backend this raises "grad_fn must accept keyword argument 'variables'".
    result = lint_source(KERAS_LAYER, "m.py")
    assert len(result.model.sites) == 1 and result.model.sites[0].keras_ops
    assert [(d.line, d.column, d.code) for d in result.diagnostics] == [(15, 17, "CG004")]
    # Keras's own backend-agnostic example: nothing to say.
    clean = '''
from keras import ops


@ops.custom_gradient
def log1pexp(x):
    e = ops.exp(x)

    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        return ops.multiply(upstream, 1.0 - 1.0 / ops.add(1, e))

    return ops.log(1 + e), grad
'''
    assert codes(clean) == []


def test_rule_docs_say_whether_keras_ops_sites_are_checked():
    from cglint.rules import ALL_RULES
    from cglint.rules._keras_ops import KERAS_OPS

    for rule in ALL_RULES:
        doc = rule.documentation()
        assert ("## Keras 3" in doc) == (rule.code in KERAS_OPS), rule.code


FORGOTTEN = '''
import tensorflow as tf


class Binarize(tf.keras.layers.Layer):
    def _ste_sign(self, x):
        def grad(dy):
            return dy * tf.cast(tf.abs(x) <= 1.0, dy.dtype)

        return tf.sign(x), grad

    def call(self, inputs):
        return self._ste_sign(inputs) * 2.0
'''


def test_cg013_reaches_files_that_never_mention_custom_gradient(tmp_path):
    assert "custom_gradient" not in FORGOTTEN and files.may_hold_site(FORGOTTEN)
    (tmp_path / "layer.py").write_text(FORGOTTEN)
    found = json.loads(cglint("--output-format", "json", str(tmp_path)).stdout)["diagnostics"]
    assert [(d["line"], d["column"], d["code"]) for d in found] == [(6, 9, "CG013")]
    # The text test lets through only TensorFlow modules returning a nested def's name.
    for source in (
        FORGOTTEN.replace("tensorflow", "numpy").replace("tf.", "np."),  # no TensorFlow
        FORGOTTEN.replace("return tf.sign(x), grad", "return tf.sign(x)"),  # grad not returned
        "import tensorflow as tf\n\ndef f(x):\n    return x, g\n",  # no nested def
        "import tensorflow as tf\n\ndef f(x, g):\n    def h(y):\n        return y\n    return make(x, h)\n",
    ):
        assert not files.may_hold_site(source), source
        assert lint_source(source, "m.py").parsed is False


def test_quick_scan_reaches_the_same_sites_as_the_model():
    for source, aliases in ((FMA, ()), ("from lingvo import compat as tf\n" + FMA, ("lingvo.compat",)),
                            (KERAS_LAYER, ())):
        assert quickscan.scan(source, aliases).relevant
        full = codes(source, prefilter=False, tensorflow_aliases=aliases)
        assert codes(source, tensorflow_aliases=aliases) == full and full
