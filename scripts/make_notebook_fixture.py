"""Writes fixtures/notebooks/seed_op.ipynb: the seed's op as a user writes it in Jupyter.

The cells are the seed (fixtures/seed/original.py) split as a notebook splits it: imports (with
a shell escape, as in Colab), the variables, the op, and its use. The outputs are real: each
code cell is run here, in order, in one namespace, with TensorFlow (magics masked as cglint
masks them), and its printed text, last-expression value or error is stored as Jupyter would.

    python scripts/make_notebook_fixture.py
"""

from __future__ import annotations

import ast
import contextlib
import io
import sys
import traceback
from pathlib import Path

import nbformat
from nbformat import v4

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from cglint.notebook import mask  # noqa: E402

TARGET = ROOT / "fixtures" / "notebooks" / "seed_op.ipynb"

CELLS = [
    ("intro", "markdown", """# tan(x @ w + b) with a hand-written gradient

The op as first written, before cglint: run the cells in order."""),
    ("imports", "code", """!pip install -q tensorflow-cpu
import tensorflow as tf

print(tf.__version__)"""),
    ("variables", "code", """w = tf.Variable([[1.0, 2.0], [2.0, 3.0], [3.0, 4.0]], name="w")  # shape (3, 2)
b = tf.Variable([1.0, 2.0], name="b")  # shape (2,)
x = tf.constant([[0.1, 0.2, 0.3], [0.1, 0.1, 0.1]])  # shape (2, 3)
x.shape"""),
    ("op", "code", """@tf.custom_gradient
def custom_op(x):
    @tf.function
    def forward(x):
        return tf.math.tan(x @ w + b)

    y = forward(x)

    def grad(upstream):
        yp = 1.0 / tf.square(tf.math.cos(y))
        dydx = (upstream * yp) @ tf.transpose(w)
        dydw = tf.transpose(x) @ (upstream * yp)
        dydb = tf.reduce_sum(upstream * yp, axis=0)
        return dydx, dydw, dydb

    return y, grad"""),
    ("use", "code", """with tf.GradientTape() as tape:
    tape.watch(x)
    loss = tf.reduce_mean(custom_op(x) ** 2)
print(tape.gradient(loss, [x, w, b]))"""),
]


def run(code: str, namespace: dict, count: int) -> list:
    """The outputs Jupyter would store for `code`: stdout as a stream, the value of a final
    expression as an execute_result, an exception as an error."""
    tree = ast.parse(code)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    out, outputs = io.StringIO(), []
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(tree, "<cell>", "exec"), namespace)
            value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace) if last else None
    except Exception as exc:  # noqa: BLE001 - the notebook shows what TensorFlow raised
        if out.getvalue():
            outputs.append(v4.new_output("stream", name="stdout", text=out.getvalue()))
        lines = traceback.format_exception_only(type(exc), exc)
        outputs.append(v4.new_output("error", ename=type(exc).__name__, evalue=str(exc),
                                     traceback=[line.rstrip("\n") for line in lines]))
        return outputs
    if out.getvalue():
        outputs.append(v4.new_output("stream", name="stdout", text=out.getvalue()))
    if last is not None and value is not None:
        outputs.append(v4.new_output("execute_result", data={"text/plain": repr(value)}, execution_count=count))
    return outputs


def main() -> None:
    nb = v4.new_notebook(metadata={
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python", "version": "3.11"},
    })
    namespace: dict = {"__name__": "__main__"}
    count = 0
    for cell_id, kind, source in CELLS:
        if kind == "markdown":
            nb.cells.append(v4.new_markdown_cell(source, id=cell_id))
            continue
        count += 1
        code, _ = mask(source)
        cell = v4.new_code_cell(source, id=cell_id, execution_count=count, outputs=run(code, namespace, count))
        nb.cells.append(cell)
    nbformat.validate(nb)
    nbformat.write(nb, TARGET)
    print(f"wrote {TARGET.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
