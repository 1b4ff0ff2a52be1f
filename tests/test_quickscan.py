"""The quick scan may skip or shrink what libcst parses, but never change a finding: every
rule example and every fixture gives the same diagnostics reduced and in full."""

from pathlib import Path

import pytest

from cglint import quickscan
from cglint.engine import lint_source
from cglint.files import may_hold_site
from cglint.rules import ALL_RULES

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = [code for rule in ALL_RULES for code in rule.INVALID + rule.VALID]
FIXTURES = sorted(ROOT.glob("fixtures/**/*.py"))


def findings(source, reduce, prefilter=True):
    result = lint_source(source, "m.py", reduce=reduce, prefilter=prefilter)
    return [(d.line, d.column, d.end_line, d.end_column, d.code, d.message) for d in result.diagnostics]


@pytest.mark.parametrize("source", EXAMPLES + [p.read_text() for p in FIXTURES],
                         ids=[f"example{i}" for i in range(len(EXAMPLES))] + [p.name for p in FIXTURES])
def test_reduced_analysis_finds_exactly_what_full_analysis_finds(source):
    if not may_hold_site(source):
        # Never parsed by design (not even for CG000): reading every file is cheap, parsing is not.
        assert findings(source, reduce=True) == []
        return
    full = findings(source, reduce=False, prefilter=False)
    assert findings(source, reduce=True) == full
    assert findings(source, reduce=False) == full


def test_irrelevant_modules_are_not_relevant():
    for source in (
        "import jax\n\n@jax.custom_gradient\ndef f(x):\n    return x, lambda g: g\n",
        '"""Mentions custom_gradient in a docstring only."""\nimport tensorflow as tf\n',
        "from tensorflow.python.ops import custom_gradient\nh = custom_gradient.copy_handle_data\n",
        "import torch\n\n@torch.custom_gradient\ndef f(x):\n    return x, lambda g: g\n",
    ):
        assert not quickscan.scan(source).relevant


def test_reduction_blanks_unrelated_statements_and_keeps_positions():
    source = (
        "import tensorflow as tf\n"
        "w = tf.Variable(1.0)\n"
        "def unrelated():\n    return 1\n"
        "class Big:\n    def method(self):\n        return 2\n"
        "@tf.custom_gradient\ndef op(x):\n    return x * w, lambda dy: dy\n"
        "def caller():\n    return op(x=1.0)\n"
    )
    reduced = quickscan.scan(source).reduced
    assert reduced.count("\n") == source.count("\n")
    assert "unrelated" not in reduced and "class Big" not in reduced
    kept = [line for line in reduced.splitlines() if line]
    assert kept == [line for line in source.splitlines() if line and line not in (
        "def unrelated():", "    return 1", "class Big:", "    def method(self):", "        return 2")]


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
def test_reduction_keeps_guarded_imports_and_class_members_that_matter(source):
    full = findings(source, reduce=False, prefilter=False)
    assert full, "the shape must produce a finding for this test to mean anything"
    assert findings(source, reduce=True) == full
