"""Positions from a codegen pass over only the statements holding findings
(`ModuleModel.positions_of`) are exactly libcst's whole-module positions, on every fixture,
rule example and a few of TensorFlow's own modules (comments, decorators, `;`-joined statements,
blank-line runs, a BOM, form feeds, CRLF)."""

from __future__ import annotations

import libcst as cst
import pytest

from cglint import source as pysource
from cglint.diagnostics import Finding
from cglint.model import ModuleModel
from test_cstwalk import CORPUS

EXTRA = [
    ("joined", "import tensorflow as tf\na = 1; b = 2\n\n\n# c\n@tf.custom_gradient\n\ndef f(x):\n  return x, lambda d: d\nf(a)\n"),
    ("crlf", "import tensorflow as tf\r\n\r\n@tf.custom_gradient\r\ndef f(x):\r\n    return x, lambda d: d\r\n\r\nf(1)\r\n"),
    ("formfeed", "import tensorflow as tf\n\x0c\n@tf.custom_gradient\ndef f(x):\n    return x, lambda d: d\n\x0c\nf(1)\n"),
    ("bom", "\ufeffimport tensorflow as tf\n\n@tf.custom_gradient\ndef f(x):\n    return x, lambda d: d\n"),
    ("footer", "def g():\n    return h(1)\n    # trailing comment in the block\n\n# module footer\n"),
]


@pytest.mark.parametrize("name,source", CORPUS + EXTRA, ids=[n for n, _ in CORPUS + EXTRA])
def test_statement_positions_equal_whole_module_positions(name, source):
    tree, error = pysource.parse(source)
    if tree is None:
        pytest.skip("Python does not compile it")
    text = pysource.analysis_text(source, tree)
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        pytest.skip("libcst cannot parse it")
    model = ModuleModel(module)
    # Every node the model can place (defs, their names, lambdas, calls): statements all over.
    placed = [n for n in _nodes(module) if id(n) in model._top_of]
    findings = [Finding(n, "") for n in placed]
    partial = model.positions_of(findings, pysource.statement_lines(tree, text))
    assert "_positions" not in model.__dict__, "fell back to the whole-module pass"
    full = ModuleModel(module).positions
    for node in placed:
        assert partial[node] == full[node], cst.Module(body=[]).code_for_node(node)


def _nodes(module):
    out = []

    class All(cst.CSTVisitor):
        def on_visit(self, node):
            out.append(node)
            return True

    module.visit(All())
    return out
