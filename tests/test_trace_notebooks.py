"""`cglint trace -- jupyter nbconvert --to notebook --execute NB.ipynb` (docs/notebooks.md): the
kernel's functions, compiled from cells as `/tmp/ipykernel_<pid>/<hash>.py`, are reported at the
notebook's cells with the notebook's static findings; a notebook's skip messages name that command.
The events are those instrument.py writes; the real run is in the closing note of issue #36."""

from __future__ import annotations

import nbformat

from cglint.gradcheck.report import next_step
from cglint.trace import report as trace_report
from cglint.trace.notebooks import remap

OP = '''@tf.custom_gradient
def op(x):
    y = tf.math.tan(x)

    def grad(dy):
        return dy / tf.square(tf.math.cos(y))

    return y, grad'''

MISMATCH = {"verdict": "mismatch", "reference": "autodiff", "max_rel_error": 0.57,
            "detail": "d/x off by 57% vs autodiff", "args": []}


def _notebook(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# an op"), nbformat.v4.new_code_cell("import tensorflow as tf"),
                nbformat.v4.new_code_cell(OP), nbformat.v4.new_code_cell("op(tf.constant([0.1, 0.2]))")]
    nbformat.write(nb, tmp_path / "nb.ipynb")


def _event(path: str, line: int = 1, qualname: str = "op") -> dict:
    return {"event": "check", "function": {"path": path, "firstlineno": line, "qualname": qualname},
            "how": "eager", "signature": "(float32[2])", "covers": [], "variant": [], "report": dict(MISMATCH)}


def test_a_kernel_cell_function_is_reported_at_its_notebook_cell(tmp_path, monkeypatch):
    _notebook(tmp_path)
    monkeypatch.chdir(tmp_path)
    events = remap([_event("/tmp/ipykernel_4242/3141592653.py")],
                   ["jupyter", "nbconvert", "--to", "notebook", "--execute", "nb.ipynb"])
    results, runtime = trace_report.build(trace_report.group(events), cwd=tmp_path)
    assert [(r["path"], r["cell"], r["function"], r["verdict"]) for r in runtime] == [("nb.ipynb", 3, "op", "mismatch")]
    (result,) = results
    found = [(d.code, d.cell, d.line, d.runtime and d.runtime["verdict"]) for d in result.diagnostics]
    assert ("CG005", 3, 6, "mismatch") in found  # the cell's finding carries the verdict


def test_other_paths_and_other_names_keep_the_kernels_file(tmp_path, monkeypatch):
    _notebook(tmp_path)
    monkeypatch.chdir(tmp_path)
    command = ["jupyter", "nbconvert", "--execute", "nb.ipynb"]
    kept = [_event(str(tmp_path / "train.py")), _event("/tmp/ipykernel_1/2.py", qualname="other"),
            _event("/tmp/ipykernel_1/2.py", line=3)]  # line 3 of the cell is no def
    paths = [e["function"]["path"] for e in remap([dict(e) for e in kept], command)]
    assert paths == [str(tmp_path / "train.py"), "/tmp/ipykernel_1/2.py", "/tmp/ipykernel_1/2.py"]
    assert remap([_event("/tmp/ipykernel_1/2.py")], ["python", "train.py"])[0]["function"]["path"] == "/tmp/ipykernel_1/2.py"


def test_a_notebooks_skip_message_names_the_nbconvert_command():
    said = next_step("no inputs could be built: the forward failed on all 3 candidate shapes", "runtime", "nb.ipynb")
    assert "`cglint trace -- jupyter nbconvert --to notebook --execute nb.ipynb`" in said and "pytest" not in said
    child = ("a closure of `make`; `cglint trace -- pytest` (or `pytest --cglint`) checks it where your own code "
             "builds and calls it")
    said = next_step(child, "runtime", "nb.ipynb")
    assert "jupyter nbconvert --to notebook --execute nb.ipynb" in said and "pytest" not in said
    assert "`cglint trace -- pytest tests/`" in next_step("timed out", "runtime", "ops.py")
