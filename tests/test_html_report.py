"""`--output-format html` without TensorFlow: what the user's code can put in the page is escaped,
the page degrades to tables with one line when matplotlib is missing, and a static run gets the
findings table. (tests/runtime/test_html_browser.py opens a real report in Chromium.)"""

from __future__ import annotations

import base64
import re
import subprocess
import sys

from cglint.report import Context, render

HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'

SAMPLE = {"arg": "x", "kind": "input", "dtype": "float32", "shape": [3], "seed": 0, "mode": "eager",
          "t": [-0.5, 0.0, 0.5], "custom": [1.0, 2.0, None], "autodiff": [0.5, 1.0, 1.5],
          "elements": {"custom": [1.0, 2.0, 3.0], "autodiff": [1.0, 1.5, 2.0], "total": 3}}


def _entry(**kw) -> dict:
    return {"path": "ops.py", "function": "op", "line": 4, "verdict": "mismatch", "reference": "autodiff",
            "max_rel_error": 0.42, "detail": "d/x off by 42% vs autodiff", "seed": 0, "inputs": "normal(3)",
            "modes": {"eager": "mismatch"}, "sample": SAMPLE,
            "args": [{"name": "x", "kind": "input", "shape": [3], "dtype": "float32", "verdict": "mismatch",
                      "reference": "autodiff", "max_rel_error": 0.42, "detail": ""}], **kw}


def test_text_from_the_users_code_is_escaped():
    entry = _entry(path=HOSTILE, function=HOSTILE, detail=HOSTILE, inputs=HOSTILE,
                   args=[{**_entry()["args"][0], "name": HOSTILE}], sample={**SAMPLE, "arg": HOSTILE})
    page = render("html", [], Context(runtime=[entry]))
    assert "<script" not in page and "onerror=alert" not in page.replace("onerror=alert(2)&gt;", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    # Attribute values cannot be closed by the quotes in a name.
    assert not re.search(r'="[^"]*"><img src=x', page)


def test_without_matplotlib_the_report_is_tables_and_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # `import` raises ImportError
    page = render("html", [], Context(runtime=[_entry()]))
    assert "<img" not in page
    notes = re.findall(r'<p class="note" id="no-plots">([^<]*)</p>', page)
    assert len(notes) == 1 and "matplotlib" in notes[0]
    assert 'data-arg="x"' in page and "42%" in page  # the table is all there


def test_with_matplotlib_each_mismatch_has_two_png_plots():
    page = render("html", [], Context(runtime=[_entry(), _entry(function="ok", verdict="match", sample=None)]))
    pngs = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(pngs) == 2
    assert all(base64.b64decode(p).startswith(b"\x89PNG\r\n\x1a\n") for p in pngs)
    assert "no-plots" not in page and "http" not in page  # self-contained: nothing to fetch


def test_one_off_by_number_in_every_view():
    """The table's percentage is the detail's: both round the stored 3 significant digits."""
    from cglint.gradcheck.verdict import pct

    for err in (0.1149, 0.115, 0.00123456, 2.5049):
        stored = float(f"{err:.3g}")  # what JSON's max_rel_error holds
        assert pct(err) == pct(stored)
        page = render("html", [], Context(runtime=[_entry(max_rel_error=stored, sample=None, args=[
            {**_entry()["args"][0], "max_rel_error": stored}])]))
        assert f"{pct(err)} ({stored:.3g})" in page


def test_static_run_writes_the_findings_table(tmp_path):
    (tmp_path / "op.py").write_text('''import tensorflow as tf


@tf.custom_gradient
def op(x):
    y = tf.math.tan(x)

    def grad(dy):
        return dy / tf.square(tf.math.cos(y))

    return y, grad
''')
    run = subprocess.run([sys.executable, "-m", "cglint", "--isolated", "--no-cache", "--output-format", "html",
                          "op.py"], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 1, run.stderr
    rows = re.findall(r'<tr class="finding" data-code="(\w+)" data-verdict="(\w+)">', run.stdout)
    assert rows == [("CG005", "none")]
    assert run.stdout.startswith("<!DOCTYPE html>") and run.stdout.rstrip().endswith("</html>")


def test_trace_entries_carry_what_the_report_draws(tmp_path, monkeypatch):
    """`cglint trace --output-format html`: a traced check's seed, modes and line sample reach the
    `runtime` entry the report renders (the events are what instrument.py writes)."""
    from cglint.trace import report as trace_report

    monkeypatch.chdir(tmp_path)
    (tmp_path / "ops.py").write_text("import tensorflow as tf\n\n\n@tf.custom_gradient\ndef op(x):\n"
                                     "    return x, lambda dy: 2 * dy\n")
    check = {k: v for k, v in _entry().items() if k not in ("path", "function", "line", "inputs")}
    event = {"event": "check", "function": {"path": str(tmp_path / "ops.py"), "firstlineno": 4, "qualname": "op"},
             "how": "eager", "signature": "(float32[3])", "covers": [], "variant": [], "report": check}
    assert trace_report.valid_event(event)
    _, runtime = trace_report.build(trace_report.group([event]), cwd=tmp_path)
    assert [(r["function"], r["seed"], r["modes"], r["sample"]["arg"]) for r in runtime] == [
        ("op", 0, {"eager": "mismatch"}, "x")]
    page = render("html", [], Context(runtime=runtime))
    assert page.count('<img src="data:image/png;base64,') == 2
    assert "checked at its first eager call with (float32[3])" in page
    json_page = render("json", [], Context(runtime=runtime))
    assert '"sample"' not in json_page and '"seed": 0' in json_page  # the plot data is the HTML's alone


def test_pytest_htmls_spelling_gets_the_option_that_writes_the_page():
    run = subprocess.run([sys.executable, "-m", "cglint", "--html", "report.html", "src/"], capture_output=True, text=True)
    assert run.returncode == 2
    assert "tip: a similar option exists: '--output-format html --output-file'" in run.stderr
