"""The quick scan may skip what libcst parses, but never change a finding: every rule example
and every fixture gives the same diagnostics with and without it."""

from pathlib import Path

import pytest

from cglint import quickscan
from cglint.engine import lint_source
from cglint.files import may_hold_site
from cglint.rules import ALL_RULES

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = [code for rule in ALL_RULES for code in rule.INVALID + rule.VALID]
FIXTURES = sorted(ROOT.glob("fixtures/**/*.py"))


def findings(source, prefilter=True):
    result = lint_source(source, "m.py", prefilter=prefilter)
    return [(d.line, d.column, d.end_line, d.end_column, d.code, d.message) for d in result.diagnostics]


@pytest.mark.parametrize("source", EXAMPLES + [p.read_text() for p in FIXTURES],
                         ids=[f"example{i}" for i in range(len(EXAMPLES))] + [p.name for p in FIXTURES])
def test_prefiltered_analysis_finds_exactly_what_unfiltered_analysis_finds(source):
    if not may_hold_site(source):
        # Never parsed by design (not even for CG000): reading every file is cheap, parsing is not.
        assert findings(source) == []
        return
    assert findings(source) == findings(source, prefilter=False)


def test_irrelevant_modules_are_not_relevant():
    for source in (
        "import jax\n\n@jax.custom_gradient\ndef f(x):\n    return x, lambda g: g\n",
        '"""Mentions custom_gradient in a docstring only."""\nimport tensorflow as tf\n',
        "from tensorflow.python.ops import custom_gradient\nh = custom_gradient.copy_handle_data\n",
        "import torch\n\n@torch.custom_gradient\ndef f(x):\n    return x, lambda g: g\n",
    ):
        assert not quickscan.scan(source).relevant


def test_syntax_errors_are_left_to_libcst():
    assert quickscan.scan("def f(:\n") is None


REAL_WORLD_SHAPES = [
    # TensorFlow imported under a guard, the site inside a class inside another guard.
    '''import os
if not os.environ.get("NO_TF"):
    try:
        import tensorflow as tf
    except ImportError:
        tf = None
if tf:
    class Backend:
        def other(self):
            return 1

        def op(self, x):
            @tf.custom_gradient
            def inner(x):
                def grad(upstream):
                    return tf.ones_like(x)
                return x, grad
            return inner(x)
''',
    # A long class: only the method with the site and the one creating its weight matter.
    '''import tensorflow as tf

class Layer(tf.keras.layers.Layer):
    def build(self, shape):
        self.k = self.add_weight(shape=())

    def unrelated(self):
        return [i for i in range(3)]

    @tf.custom_gradient
    def call(self, x):
        return x * self.k, lambda dy: dy * self.k
''',
]


@pytest.mark.parametrize("source", REAL_WORLD_SHAPES)
def test_guarded_imports_and_class_members_are_relevant(source):
    full = findings(source, prefilter=False)
    assert full, "the shape must produce a finding for this test to mean anything"
    assert findings(source) == full
