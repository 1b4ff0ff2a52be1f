"""Jupyter notebooks: linted as one module of their code cells, reported and fixed per cell.

The fixture `fixtures/notebooks/seed_op.ipynb` is the seed's op split as a notebook splits it
(imports with a `!pip` line, variables with an output, the op, its use with TensorFlow's real
error as output), written by `scripts/make_notebook_fixture.py`."""

import json
import re
import shutil

import jsonschema
import nbformat
import pytest
from inprocess import cglint as inprocess
from support import FIXTURES, ROOT, cglint

from cglint import engine, fix, notebook
from cglint.rules import ALL_RULES

NB = FIXTURES / "notebooks" / "seed_op.ipynb"
SCHEMA = json.loads((ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())

# Where the seed's four bugs are: all in cell 4 (cell 1 is markdown), lines of that cell.
EXPECTED = [
    ("CG001", 4, 3, 5),  # @tf.function on the nested forward
    ("CG004", 4, 9, 9),  # def grad(upstream): no `variables`
    ("CG005", 4, 10, 30),  # tf.math.cos(y)
    ("CG002", 4, 14, 9),  # return dydx, dydw, dydb
]


def make(*cells, metadata=None, **kw):
    """A notebook (nbformat 4) with code cells, or ("markdown", text) pairs."""
    nb = nbformat.v4.new_notebook(metadata=metadata or {"language_info": {"name": "python"}})
    for i, cell in enumerate(cells):
        if isinstance(cell, tuple):
            nb.cells.append(nbformat.v4.new_markdown_cell(cell[1], id=f"c{i}"))
        else:
            nb.cells.append(nbformat.v4.new_code_cell(cell, id=f"c{i}"))
    return nbformat.writes(nb, **kw) + "\n"


def cli(*args, cwd=ROOT):
    """The CLI in this process (tests/inprocess.py): the done-means tests run the real command."""
    return inprocess(*args, cwd=cwd)


def found(raw: str, path="nb.ipynb"):
    result = engine.lint_notebook_text(raw, path, ALL_RULES)
    return [(d.code, d.cell, d.line, d.column) for d in result.diagnostics]


OP = """@tf.custom_gradient
def op(x):
    y = tf.tan(x * w)
    def grad(dy):
        return dy / tf.square(tf.cos(y))
    return y, grad
"""


# ---- the done-means of the fixture -----------------------------------------------------------


def test_fixture_reports_the_seed_bugs_with_cells_and_lines():
    run = cglint("fixtures/notebooks/")
    assert run.returncode == 1, run.stdout + run.stderr
    heads = [line for line in run.stdout.splitlines() if line.startswith("fixtures/")]
    assert [h[: h.index(" CG") + 6] for h in heads] == [
        f"fixtures/notebooks/seed_op.ipynb:cell {cell}:{line}:{col}: {code}" for code, cell, line, col in EXPECTED]
    # The code frame shows the cell's own line.
    assert "  10 |         yp = 1.0 / tf.square(tf.math.cos(y))" in run.stdout
    js = json.loads(cglint("--output-format", "json", "fixtures/notebooks/").stdout)["diagnostics"]
    assert [(d["code"], d["cell"], d["line"], d["column"]) for d in js] == EXPECTED
    concise = cglint("--output-format", "concise", NB).stdout.splitlines()
    assert concise[2].startswith(f"{NB}:cell 4:10:30: CG005 ")


def test_fix_rewrites_only_the_changed_cell_and_settles(tmp_path):
    work = tmp_path / "seed_op.ipynb"
    shutil.copy(NB, work)
    before = work.read_text()
    run = cglint("--fix", "--unsafe-fixes", work.name, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Found 4 problems (4 fixed, 0 remaining)." in run.stdout
    after = work.read_text()
    nbformat.validate(nbformat.reads(after, as_version=4))
    old, new = json.loads(before), json.loads(after)
    # Outputs, metadata, ids, execution counts: identical; only cell 4's source changed.
    assert new["metadata"] == old["metadata"] and new["nbformat_minor"] == old["nbformat_minor"]
    for i, (a, b) in enumerate(zip(old["cells"], new["cells"], strict=True)):
        assert {k: v for k, v in a.items() if k != "source"} == {k: v for k, v in b.items() if k != "source"}
        assert (a["source"] == b["source"]) == (i != 3), i
    # Byte for byte outside that cell's source value (indentation, key order, trailing newline).
    (start, end), (new_start, new_end) = (notebook.Notebook([], "", raw).spans()[3] for raw in (before, after))
    assert new_start == start and after[:start] == before[:start] and after[new_end:] == before[end:]
    assert before[start:end].startswith('[\n    "@tf.custom_gradient\\n",\n')
    assert after.endswith("}\n")
    source = "".join(new["cells"][3]["source"])
    assert "@tf.function" not in source and "tf.math.cos(z)" in source and "variables=None" in source
    assert "[{w.ref(): dydw, b.ref(): dydb}[v.ref()] for v in variables]" in source
    again = cglint("--fix", "--unsafe-fixes", work.name, cwd=tmp_path)
    assert again.returncode == 0 and "All checks passed" in again.stdout, again.stdout
    assert work.read_text() == after


def test_diff_shows_the_changed_cell_and_writes_nothing(tmp_path):
    work = tmp_path / "nb.ipynb"
    shutil.copy(NB, work)
    run = cli("--diff", "--unsafe-fixes", "nb.ipynb", cwd=tmp_path)
    assert run.returncode == 1
    assert run.stdout.startswith("--- a/nb.ipynb:cell 4\n+++ b/nb.ipynb:cell 4\n@@ ")
    assert "-    @tf.function\n" in run.stdout and "+    z = x @ w + b\n" in run.stdout
    assert '"cell_type"' not in run.stdout
    assert "Would fix 4 problems in 1 file." in run.stderr
    assert work.read_bytes() == NB.read_bytes()


def test_runtime_on_the_fixed_notebook_matches(tmp_path):
    pytest.importorskip("tensorflow")
    work = tmp_path / "seed_op.ipynb"
    shutil.copy(NB, work)
    assert cli("--fix", "--unsafe-fixes", work.name, cwd=tmp_path).returncode == 0
    run = cglint("--runtime=all", "--output-format", "json", work.name, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    (check,) = json.loads(run.stdout)["runtime"]
    assert (check["path"], check["cell"], check["line"], check["function"]) == ("seed_op.ipynb", 4, 1, "custom_op")
    assert check["verdict"] == "match", check
    assert check["inputs"] == "module:x"  # from the call in cell 5: the cells ran as one module
    from cglint.report import Context, render

    text = render("text", [], Context(runtime=[check]))  # the text report of the same verdict
    assert "  seed_op.ipynb:cell 4:1: custom_op: match vs autodiff: " in text


# ---- cells, magics and positions -------------------------------------------------------------


def test_magics_are_masked_line_for_line():
    code, masked = notebook.mask("%matplotlib inline\n!pip install -q x \\\n   y\nfiles = !ls\nx?\nimport tensorflow as tf\n"
                                 "for i in range(2):\n    !echo $i\n%time f()")
    assert code.splitlines() == ["pass", "pass", "", "pass", "pass", "import tensorflow as tf",
                                 "for i in range(2):", "    pass", "pass"]
    assert masked == {1, 2, 3, 4, 5, 8, 9}
    assert notebook.mask("%%time\nx = 1\n") == ("\nx = 1\n", frozenset({1}))
    assert notebook.mask("%%bash\necho hi\nls\n") == ("\n\n\n", frozenset({1, 2, 3}))
    assert notebook.mask("a = 1  # 100% sure\nb = a != 2\n")[1] == frozenset()
    # As in IPython, only where a statement starts: not inside brackets, strings or a continuation.
    python = 'msg = ("%s and %s"\n       % (a, b))\ndoc = """\n%not a magic\n"""\nn = 7 \\\n    % 3\n'
    assert notebook.mask(python) == (python, frozenset())
    assert notebook.mask("x = (1,\n     2)\n%time f()\n")[1] == frozenset({3})


def test_positions_after_magics_and_markdown_cells_are_cell_lines():
    raw = make("%load_ext autoreload\n%autoreload 2\nimport tensorflow as tf\nw = tf.Variable(1.0)",
               ("markdown", "## the op"), "%%time\n" + OP)
    # OP's grad at line 4 of its code, cos(y) at 5:31: one more in the %%time cell (cell 3).
    assert found(raw) == [("CG004", 3, 5, 9), ("CG005", 3, 6, 31)]


def test_a_cell_that_does_not_parse_is_one_CG000_and_the_rest_is_linted():
    raw = make("import tensorflow as tf\nw = tf.Variable(1.0)", "def broken(:\n    pass", OP)
    assert found(raw) == [("CG000", 2, 1, 12), ("CG004", 3, 4, 9), ("CG005", 3, 5, 31)]
    result = engine.lint_notebook_text(raw, "nb.ipynb", ALL_RULES)
    assert result.diagnostics[0].message.startswith("cannot parse: ")


def test_noqa_is_per_line_in_cells():
    raw = make("import tensorflow as tf\nw = tf.Variable(1.0)", OP.replace("def grad(dy):", "def grad(dy):  # noqa: CG004"))
    assert found(raw) == [("CG005", 2, 5, 31)]
    raw = make("# cglint: noqa: CG005\nimport tensorflow as tf\nw = tf.Variable(1.0)", OP)
    assert found(raw) == [("CG004", 2, 4, 9)]


def test_unknown_noqa_codes_are_warned_about_at_the_cell_line(tmp_path):
    (tmp_path / "nb.ipynb").write_text(make("import tensorflow as tf\nw = tf.Variable(1.0)",
                                            OP.replace("def op(x):", "def op(x):  # noqa: CG999")))
    run = cli("nb.ipynb", cwd=tmp_path)
    assert "nb.ipynb:cell 2:2: unknown rule code 'CG999'" in run.stderr, run.stderr


def test_directories_include_notebooks_and_excludes_apply(tmp_path):
    (tmp_path / "a.ipynb").write_text(make("import tensorflow as tf\nw = tf.Variable(1.0)", OP))
    (tmp_path / "skip").mkdir()
    (tmp_path / "skip" / "b.ipynb").write_text(make("import tensorflow as tf\nw = tf.Variable(1.0)", OP))
    (tmp_path / "pyproject.toml").write_text('[tool.cglint]\nextend-exclude = ["skip/"]\n')
    out = json.loads(cli("--output-format", "json", ".", cwd=tmp_path).stdout)["diagnostics"]
    assert {d["path"] for d in out} == {"a.ipynb"} and len(out) == 2


def test_notebooks_that_are_not_python_or_not_notebooks(tmp_path):
    python = ("import tensorflow as tf\nw = tf.Variable(1.0)", OP)  # would have two findings in a Python notebook
    assert found(make(*python, metadata={"language_info": {"name": "R"}})) == []
    julia = {"kernelspec": {"name": "julia-1.10", "language": "julia", "display_name": "Julia"}}
    assert found(make(*python, metadata=julia)) == []
    assert len(found(make(*python))) == 2
    cases = {"bad.ipynb": '{"cells": [custom_gradient', "v3.ipynb": '{"nbformat": 3, "worksheets": [], "x": "custom_gradient"}',
             "invalid.ipynb": '{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", '
                              '"source": "custom_gradient"}]}'}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
    run = cli("--output-format", "concise", "-q", ".", cwd=tmp_path)
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    lines = sorted(run.stdout.splitlines())
    assert lines[0].startswith("bad.ipynb:1:1: CG000 cannot read notebook: not valid JSON")
    assert lines[1].startswith("invalid.ipynb:1:1: CG000 cannot read notebook: invalid notebook: ")
    assert lines[2].startswith("v3.ipynb:1:1: CG000 cannot read notebook: not an nbformat 4 notebook")
    (tmp_path / "quiet.ipynb").write_text("not json, and no mention of the decorator")
    assert cli("quiet.ipynb", cwd=tmp_path).returncode == 0


# ---- output formats ----------------------------------------------------------------------------


def test_sarif_regions_are_on_the_notebook_file_lines_with_the_cell_in_properties(tmp_path):
    """As the github and gitlab formats: the region is the `.ipynb` file's line that holds the
    code, and the cell and the position in it are properties."""
    sarif = json.loads(cli("--output-format", "sarif", NB).stdout)
    jsonschema.validate(sarif, SCHEMA)
    results = sarif["runs"][0]["results"]
    regions = [(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]) for r in results]
    props = [(code, reg["properties"]["cell"], reg["properties"]["cellLine"], reg["properties"]["cellColumn"])
             for code, reg in regions]
    assert props == EXPECTED
    file_lines = NB.read_text().splitlines()
    assert file_lines[regions[0][1]["startLine"] - 1].strip() == '"    @tf.function\\n",'
    assert file_lines[regions[2][1]["startLine"] - 1].strip().startswith('"        yp = 1.0 / tf.square(tf.math.cos(y))')
    assert all("startColumn" not in reg for _, reg in regions)  # the cell's columns are not the file's
    # The same lines as the github annotations.
    github = [int(m) for m in re.findall(r",line=(\d+),", cli("--output-format", "github", NB).stdout)]
    assert [reg["startLine"] for _, reg in regions] == github
    # A fix in cell coordinates is described in properties, not offered as a replacement of the file's text.
    cg004 = next(r for r in results if r["ruleId"] == "CG004")
    assert "fixes" not in cg004
    (edit,) = cg004["properties"]["fix"]["edits"]
    assert edit["region"]["properties"] == {"cell": 4} and edit["text"] == ", variables=None"


def test_github_annotations_point_at_the_notebook_file_line():
    run = cli("--output-format", "github", NB)
    lines = NB.read_text().splitlines()
    first = run.stdout.splitlines()[0]
    assert first.startswith(f"::warning file={NB},line=")
    line = int(first.split("line=")[1].split(",")[0])
    assert lines[line - 1].strip() == '"    @tf.function\\n",'
    assert "title=CG001 (nested-tf-function) cell 4%3A3::" in first


# ---- writing back ------------------------------------------------------------------------------


def test_rewrite_keeps_layout_escapes_and_string_sources(tmp_path):
    nb = nbformat.v4.new_notebook(metadata={"language_info": {"name": "python"}})
    nb.cells.append(nbformat.v4.new_code_cell("import tensorflow as tf\nw = tf.Variable(1.0)  # é", id="a"))
    nb.cells.append(nbformat.v4.new_code_cell(OP, id="b"))
    raw = json.dumps(nb, indent=2, ensure_ascii=True)  # one string per source, \u escapes, no final newline
    outcome = fix.fix_notebook_text(raw, "nb.ipynb", ALL_RULES, unsafe=True)
    assert outcome.changed and len(outcome.applied) == 2
    new = outcome.new_source
    assert new.isascii() and not new.endswith("\n")
    old_cells, new_cells = json.loads(raw)["cells"], json.loads(new)["cells"]
    assert new_cells[0] == old_cells[0] and isinstance(new_cells[1]["source"], str)
    assert "tf.cos(z)" in new_cells[1]["source"]
    head = raw[:raw.index('"source": "@tf')]
    assert new.startswith(head)
    assert fix.fix_notebook_text(new, "nb.ipynb", ALL_RULES, unsafe=True).changed is False


def test_add_noqa_writes_comments_into_the_cells(tmp_path):
    work = tmp_path / "nb.ipynb"
    shutil.copy(NB, work)
    run = cli("--add-noqa", "nb.ipynb", cwd=tmp_path)
    assert "Added 4 noqa directives." in run.stderr
    nbformat.validate(nbformat.reads(work.read_text(), as_version=4))
    assert cli("nb.ipynb", cwd=tmp_path).returncode == 0
    assert '"        return dydx, dydw, dydb  # noqa: CG002\\n",' in work.read_text()


def test_an_edit_of_a_magic_line_is_refused():
    nb = notebook.read(make("!pip install x\nimport tensorflow as tf", OP))
    with pytest.raises(notebook.NotebookError, match="magic"):
        nb.rewrite(nb.code.replace("pass\n", "import os\n", 1))


def test_stdin_with_a_notebook_filename():
    run = cglint("-", "--stdin-filename", "nb.ipynb", "--output-format", "concise", stdin=NB.read_text())
    assert run.stdout.splitlines()[0].startswith("nb.ipynb:cell 4:3:5: CG001")
    fixed = cglint("-", "--stdin-filename", "nb.ipynb", "--fix", stdin=NB.read_text())
    nbformat.validate(nbformat.reads(fixed.stdout, as_version=4))
    assert '"    @tf.function\\n"' not in fixed.stdout


def test_baseline_keys_cell_lines_and_gitlab_points_at_the_file(tmp_path):
    work = tmp_path / "nb.ipynb"
    shutil.copy(NB, work)
    assert cli("--write-baseline", "baseline.json", "nb.ipynb", cwd=tmp_path).returncode == 0
    # A new cell above the op and a new bug in a new cell: only the new one is reported.
    nb = nbformat.read(work, as_version=4)
    nb.cells.insert(3, nbformat.v4.new_code_cell("scale = 2.0", id="scale"))
    nb.cells.append(nbformat.v4.new_code_cell(OP.replace("def op", "def op2"), id="op2"))
    nbformat.write(nb, work)
    run = cli("--baseline", "baseline.json", "--output-format", "concise", "-q", "nb.ipynb", cwd=tmp_path)
    assert [line.split(" ")[:3] for line in run.stdout.splitlines()] == [
        ["nb.ipynb:cell", "7:4:9:", "CG004"], ["nb.ipynb:cell", "7:5:31:", "CG005"]], run.stdout
    issues = json.loads(cli("--output-format", "gitlab", "nb.ipynb", cwd=tmp_path).stdout)
    lines = work.read_text().splitlines()
    first = issues[0]["location"]["lines"]["begin"]
    assert lines[first - 1].strip() == '"    @tf.function\\n",'


@pytest.mark.parametrize("path", sorted((FIXTURES / "rules").glob("*_bad.py")) + [FIXTURES / "seed" / "original.py"],
                         ids=lambda p: p.name)
def test_a_module_split_into_cells_has_the_same_findings_at_the_same_places(path):
    """Every bad fixture cut into cells at its blank lines, with a magic and a markdown cell
    between: the same findings, each at the same text, and rewriting unchanged code is a no-op."""
    from cglint import engine

    source = path.read_text()
    chunks = [c for c in source.split("\n\n\n") if c.strip()]
    cells = []
    for i, chunk in enumerate(chunks):
        cells += [chunk.strip("\n"), ("markdown", f"part {i}")] if i % 2 else ["%matplotlib inline\n" + chunk.strip("\n")]
    raw = make(*cells)
    nb = notebook.read(raw)
    assert nb.rewrite(nb.code) == (raw, {})
    result = engine.lint_notebook_text(raw, "nb.ipynb", ALL_RULES)
    expected = engine.lint_source(source, str(path), ALL_RULES).diagnostics

    def text_at(lines, line, col, end_line, end_col):
        return lines[line - 1][col - 1:] if end_line != line else lines[line - 1][col - 1:end_col - 1]

    got = [(d.code, text_at(notebook.frame_lines(result, d), d.line, d.column, d.end_line, d.end_column))
           for d in result.diagnostics]
    source_lines = source.splitlines()
    want = [(d.code, text_at(source_lines, d.line, d.column, d.end_line, d.end_column)) for d in expected]
    if path.name == "cg000_bad.py":  # one broken cell, reported in that cell; the file stops at its error
        assert [c for c, _ in got] == ["CG000"] and [c for c, _ in want] == ["CG000"]
    else:
        assert got == want, "\n".join(map(str, result.diagnostics))
