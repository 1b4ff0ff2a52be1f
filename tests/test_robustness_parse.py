"""Inputs that once crashed, hung or misled cglint (issue 14): each test is one reproducer.

Python's parser is the judge: a file Python compiles never gets CG000, one it refuses for
nesting gets CG000 where Python says (and libcst, which crashes on such nesting, never sees it);
lines are counted as Python counts them, whatever `str.splitlines` thinks."""

import ast
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cglint import engine, fix, noqa
from cglint import source as pysource
from cglint.report import Context, render

HEAD = "import tensorflow as tf\n\n"
SITE = ("@tf.custom_gradient\ndef op(x):\n    y = tf.math.tan(x)\n"
        "    return y, lambda dy: dy * tf.math.cos(y)\n")
SPLITLINES_ONLY = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def diags(source, prefilter=True):
    return [(d.line, d.column, d.code, d.message) for d in engine.lint_source(source, "m.py", prefilter=prefilter).diagnostics]


def codes_at(source, prefilter=True):
    return [(d[0], d[2]) for d in diags(source, prefilter)]


def cg005_line(source):
    """Where Python puts the `cos(y)` call."""
    tree = ast.parse(source)
    return next(n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "cos")


def run_cli(*args, cwd=None, timeout=60):
    return subprocess.run([sys.executable, "-m", "cglint", "--isolated", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


def test_deep_parentheses_are_cg000_where_python_says_not_a_segfault(tmp_path):
    source = HEAD + "@tf.custom_gradient\ndef op(x):\n    z = " + "(" * 1500 + "x" + ")" * 1500 + \
        "\n    return x, lambda dy: dy\n"
    with pytest.raises(SyntaxError) as python:
        compile(source, "m.py", "exec")
    found = diags(source)
    assert [(d[0], d[1], d[2]) for d in found] == [(python.value.lineno, python.value.offset, "CG000")]
    assert "too many nested parentheses" in found[0][3]
    (tmp_path / "deep.py").write_text(source)
    (tmp_path / "ok.py").write_text(HEAD + SITE)
    run = run_cli("--output-format", "concise", ".", cwd=tmp_path)  # the process survives
    assert run.returncode == 1, run.stderr
    assert "deep.py:5:209: CG000" in run.stdout and "ok.py:6:31: CG005" in run.stdout


def test_deep_parentheses_after_an_earlier_error_are_cg000_not_a_segfault(tmp_path):
    """Found by the long fuzz run (a U+FEFF mutation + deep nesting): Python stops at its first
    error ("invalid non-printable character U+FEFF" on line 1), so it never says "too many
    nested parentheses"; libcst skips a leading U+FEFF, read on and crashed (SIGSEGV) on the
    nesting. Whatever Python's first error, text nested deeper than Python allows never reaches
    libcst. (Errors Python's parser finds only after the whole parse, `f(**a, *b)`, `del f()`,
    come after its tokenizer's nesting error: line 6.)"""
    deep = HEAD + "@tf.custom_gradient\ndef op(x):\n    return " + "(" * 3000 + "x" + ")" * 3000 + ", lambda dy: dy\n"
    cases = {"bom.py": b"\xef\xbb\xbf" * 2 + deep.encode(),  # the file's BOM, then U+FEFF in the text
             "unpacking.py": b"f(**a, *b)\n" + deep.encode(),
             "delete.py": b"del f()\n" + deep.encode()}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "ok.py").write_text(HEAD + SITE)
    run = run_cli("--output-format", "json", ".", cwd=tmp_path)
    assert run.returncode == 1, (run.returncode, run.stderr)
    found = {(Path(d["path"]).name, d["line"], d["code"]) for d in json.loads(run.stdout)["diagnostics"]}
    assert found == {("bom.py", 1, "CG000"), ("unpacking.py", 6, "CG000"), ("delete.py", 6, "CG000"),
                     ("ok.py", 6, "CG005")}
    assert diags("\ufeff" + deep)[0][:3] == (1, 1, "CG000")  # the text API (editors) too


@pytest.mark.parametrize("kind", ["unary", "subscript", "binop", "call", "ifexp"])
def test_deep_expressions_python_accepts_are_linted_quickly(kind):
    n = 900
    expr = {"unary": "-" * n + "x", "subscript": "x" + "[0]" * n, "binop": " + ".join(["x"] * n),
            "call": "x" + "()" * n, "ifexp": "x if x else " * (n // 3) + "x"}[kind]
    source = HEAD + "@tf.custom_gradient\ndef op(x):\n    y = tf.math.tan(x)\n    z = " + expr + \
        "\n    return y, lambda dy: dy * tf.math.cos(y)\n"
    compile(source, "m.py", "exec")
    start = time.process_time()  # CPU time: the parse's cost, whatever the machine's load
    for prefilter in (True, False):
        assert codes_at(source, prefilter) == [(7, "CG005")]
    assert time.process_time() - start < 20  # unstubbed, libcst alone took minutes on 3,000 levels
    # The fix keeps the expression libcst never saw.
    fixed = fix.fix_source(source, "m.py", unsafe=True).new_source
    assert expr in fixed and "tf.math.cos(x)" in fixed


def test_a_deep_decorator_is_stubbed_too():
    """Found by the long fuzz run (seed 7): a decorator 1,000 subscripts deep before
    `.custom_gradient`. The statement's length was measured from the `def` line, without its
    decorators, so the expression was never stubbed and the model's walk ran out of stack:
    a false CG000 "nesting too deep" on a file Python compiles."""
    source = HEAD + "@(tf" + "[0]" * 1000 + ").custom_gradient\ndef op(x):\n    y = tf.math.tan(x)\n" \
        "    return y, lambda dy: dy * tf.math.cos(y)\n\n\n" \
        "@tf.custom_gradient\ndef op2(x):\n    y = tf.math.tan(x)\n    return y, lambda dy: dy * tf.math.cos(y)\n"
    compile(source, "m.py", "exec")
    line = source.splitlines().index("def op2(x):") + 1
    for prefilter in (True, False):
        assert codes_at(source, prefilter) == [(line + 2, "CG005")], codes_at(source, prefilter)


def test_huge_literal_is_stubbed_for_libcst_and_kept_by_fixes():
    table = "TABLE = [" + "0.5, " * 50_000 + "]\n"
    source = HEAD + table + SITE
    text = pysource.analysis_text(source, ast.parse(source))
    assert len(text) == len(source) and pysource.split_lines(text)[3:] == pysource.split_lines(source)[3:]
    assert "TABLE = (_" in text
    assert codes_at(source) == codes_at(source, prefilter=False) == [(7, "CG005")]
    assert table in fix.fix_source(source, "m.py", unsafe=True).new_source


@pytest.mark.parametrize("char", SPLITLINES_ONLY, ids=[f"U+{ord(c):04X}" for c in SPLITLINES_ONLY])
def test_characters_only_splitlines_breaks_at_keep_every_finding_and_line(char):
    # In a comment and in a string everywhere; as whitespace between statements where Python
    # allows it (form feed).
    sources = [HEAD + f"# note{char}more\n" + SITE, HEAD + f'DOC = "a{char}b"\n\n' + SITE,
               HEAD + f'"""a{char}\nb{char}"""\n' + SITE]
    if char == "\x0c":
        sources += [HEAD + "\x0c\n\n" + SITE + "\n\x0c\n\nSCALE = 2.0\n", "import tensorflow as tf\n\x0c\n" + SITE]
    for source in sources:
        compile(source, "m.py", "exec")
        line = cg005_line(source)
        assert codes_at(source, prefilter=False) == codes_at(source) == [(line, "CG005")], repr(source)
        # --add-noqa puts the comment on that line, and it suppresses the finding
        new, changed, skipped = noqa.add_noqa(source, engine.lint_source(source, "m.py").diagnostics)
        assert changed == 1 and not skipped and codes_at(new) == []
        compile(new, "m.py", "exec")


def test_add_noqa_never_writes_inside_a_multiline_string():
    source = ('import tensorflow as tf\n@tf.custom_gradient\ndef op(x):\n    y = tf.math.tan(x)\n\x0c\n'
              '    s = """first\nsecond\nthird"""; return y, lambda dy: dy * tf.math.cos(y)\nz = 1\n')
    new, changed, _ = noqa.add_noqa(source, engine.lint_source(source, "m.py").diagnostics)
    assert changed == 1
    assert 'third"""; return y, lambda dy: dy * tf.math.cos(y)  # noqa: CG005\n' in new
    assert ast.literal_eval(new.split("s = ", 1)[1].split(";")[0]) == "first\nsecond\nthird"


def test_lone_cr_in_a_docstring_counts_as_a_line_break():
    source = '"""Ops.\rWritten on an old Mac editor."""\n' + HEAD + SITE
    assert codes_at(source) == codes_at(source, prefilter=False) == [(cg005_line(source), "CG005")] == [(8, "CG005")]


def test_cr_only_file_sarif_fix_regions_are_the_sources_and_fixes_keep_cr():
    source = ("import tensorflow as tf\r\rw = tf.Variable(1.0)\r\r@tf.custom_gradient\rdef op(x):\r"
              "    y = tf.math.tan(x * w)\r\r    def grad(dy, variables=None):\r"
              "        return dy * tf.math.cos(y), [dy]\r\r    return y, grad\r")
    result = engine.lint_source(source, "m.py")
    assert [(d.line, d.code) for d in result.diagnostics] == [(10, "CG005")]
    sarif = json.loads(render("sarif", [result], Context(unsafe_fixes=True)))
    (res,) = sarif["runs"][0]["results"]
    regions = [r["deletedRegion"] for f in res["fixes"] for c in f["artifactChanges"] for r in c["replacements"]]
    lines = pysource.split_lines(source, keepends=True)
    # apply the regions to the source (bottom-up): the result is what --fix writes
    texts = [r["insertedContent"]["text"] for f in res["fixes"] for c in f["artifactChanges"] for r in c["replacements"]]
    text = source
    starts = pysource.line_starts(source)
    spans = sorted(((starts[r["startLine"] - 1] + r["startColumn"] - 1, starts[r["endLine"] - 1] + r["endColumn"] - 1, t)
                    for r, t in zip(regions, texts)), reverse=True)
    assert all(a[0] >= b[1] for a, b in zip(spans, spans[1:])), "regions overlap"
    for start, end, t in spans:
        text = text[:start] + t + text[end:]
    fixed = fix.fix_source(source, "m.py", unsafe=True).new_source
    assert text == fixed and "\n" not in fixed and len(lines) < len(pysource.split_lines(fixed))


def test_tab_indented_line_in_space_indented_code_is_linted_and_kept():
    source = HEAD + ("@tf.custom_gradient\ndef op(x):\n    y = tf.math.tan(x)\n    def grad(dy):\n"
                     "\t    return dy * tf.math.cos(y)\n    return y, grad\n")
    compile(source, "m.py", "exec")
    assert codes_at(source) == codes_at(source, prefilter=False) == [(7, "CG005")]
    fixed = fix.fix_source(source, "m.py", unsafe=True).new_source
    assert "\t    return dy * tf.math.cos(x)\n" in fixed


def test_form_feed_libcst_drops_is_kept_by_fixes():
    source = HEAD + "x = 1\n\x0cy = 2\n" + SITE
    assert codes_at(source) == [(8, "CG005")]
    fixed = fix.fix_source(source, "m.py", unsafe=True).new_source
    assert "\x0cy = 2\n" in fixed and "tf.math.cos(x)" in fixed


def test_latin1_coding_cookie_is_decoded_and_written_back_as_latin1(tmp_path):
    path = tmp_path / "ops.py"
    path.write_bytes(("# -*- coding: latin-1 -*-\n# Régularisation\n" + HEAD + SITE).encode("latin-1"))
    run = run_cli("--output-format", "concise", str(path))
    assert run.returncode == 1 and ":8:31: CG005" in run.stdout, run.stdout + run.stderr
    run = run_cli("--fix", "--unsafe-fixes", str(path))
    data = path.read_bytes()
    assert b"R\xe9gularisation" in data and b"tf.math.cos(x)" in data, run.stderr


def test_identifier_libcst_rejects_is_cg000_without_a_traceback(tmp_path):
    source = HEAD + "@tf.custom_gradient\ndef op(x):\n    return x, lambda dy: dy\n\n\U00013b4f = 1\n"
    assert [d[2] for d in diags(source)] == ["CG000"]
    (tmp_path / "u.py").write_text(source, encoding="utf-8")
    run = run_cli(str(tmp_path / "u.py"))
    assert run.returncode == 1 and "Traceback" not in run.stderr and "CG000" in run.stdout


def test_deeply_nested_toml_is_a_configuration_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.cglint]\nselect = " + "[" * 2000 + "]" * 2000 + "\n")
    (tmp_path / "a.py").write_text("x = 1\n")
    run = subprocess.run([sys.executable, "-m", "cglint", "a.py"], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines() == [f"cglint: error: {tmp_path / 'pyproject.toml'}: invalid TOML: "
                                               "arrays or tables nested too deeply"]


# ---- failures the fuzz run found (scripts/fuzz.py) ---------------------------------------------


def test_bom_character_left_in_the_text_is_pythons_error_not_a_fix():
    # libcst drops a leading U+FEFF (its edits were one character early); Python refuses one left
    # in the text after decoding (a second BOM in the file): CG000 where Python says, no fix.
    source = "\ufeff" + HEAD + SITE
    (d,) = engine.lint_source(source, "m.py").diagnostics
    assert (d.code, d.line, d.column) == ("CG000", 1, 1) and "U+FEFF" in d.message and d.fix is None
    assert fix.fix_source(source, "m.py").new_source == source


def test_nesting_python_accepts_in_a_lambda_is_no_false_cg000():
    # 199 nested lists (Python allows 200) inside a grad lambda: the model's walk ran out of stack
    source = HEAD + ("@tf.custom_gradient\ndef op(x):\n    return tf.tan(x), lambda dy: " + "[" * 199 + "dy" + "]" * 199
                     + " / tf.square(tf.cos(x))\n")
    compile(source, "m.py", "exec")
    assert "CG000" not in [d[2] for d in diags(source)]
    assert diags(source) == diags(source, prefilter=False)


def test_a_lone_surrogate_is_cg000_where_it_is():
    """Only an editor's buffer can hold half a UTF-16 pair (no file decodes to one): CG000 at it,
    naming it, not a codec message at 1:1."""
    source = HEAD + SITE.replace("tf.math.tan(x)", 'tf.math.tan(x)  # "\ud83d"')
    (d,) = engine.lint_source(source, "m.py").diagnostics
    assert (d.line, d.column, d.code) == (5, 28, "CG000")
    assert d.message == "cannot parse: lone surrogate U+D83D (half of a UTF-16 pair; no Python file can hold it)"


@pytest.mark.parametrize("feed", ["\x0c", "  \x0c", "\x0c\x0c"])
def test_a_form_feed_opening_a_nested_block_is_analysed_where_python_puts_it(feed):
    """Found by the long fuzz run: a form feed at the start of the first line of a nested block
    (Python resets its indentation count there) made libcst's tokenizer refuse a file Python
    compiles ("not analysed"). The finding is where it is on disk, and the fix keeps the feed."""
    base = ("import tensorflow as tf\n\n\n@tf.custom_gradient\ndef op(x):\n    y = tf.math.tan(x)\n\n"
            "    def grad(dy):\n{}        return dy * tf.math.cos(y)\n\n    return y, grad\n")
    source = base.format(feed)
    compile(source, "m.py", "exec")
    plain = [(d.line, d.column, d.end_line, d.end_column, d.code) for d in engine.lint_source(base.format(""), "m.py").diagnostics]
    assert plain == [(9, 21, 9, 35, "CG005")]
    for prefilter in (True, False):
        result = engine.lint_source(source, "m.py", prefilter=prefilter)
        assert not result.warnings
        assert [(d.line, d.column, d.end_line, d.end_column, d.code) for d in result.diagnostics] == \
            [(9, 21 + len(feed), 9, 35 + len(feed), "CG005")]
    fixed = fix.fix_source(source, "m.py", unsafe=True)
    assert fixed.new_source == source.replace("cos(y)", "cos(x)")


def test_a_fix_in_a_tab_indented_block_keeps_the_blocks_indentation():
    """Found by the long fuzz run: libcst is given indenting tabs as spaces (it compares tab
    and space indentation differently from Python); a fix that adds a statement to such a block
    wrote its lines with the spaces, next to the block's tab, and the result did not compile."""
    source = ("import tensorflow as tf\n\nw = tf.Variable([[1.0, 2.0], [3.0, 4.0]])\nb = tf.Variable([0.5, -0.5])\n\n\n"
              "@tf.custom_gradient\ndef dense(x):\n    def grad(dy, variables=None):\n"
              "\t    return dy @ tf.transpose(w), [tf.transpose(x) @ dy, tf.reduce_sum(dy, 0)]\n\n"
              "    return x @ w + b, grad\n")
    compile(source, "m.py", "exec")
    assert [d.code for d in engine.lint_source(source, "m.py").diagnostics] == ["CG006"]
    fixed = fix.fix_source(source, "m.py", unsafe=True)
    assert fixed.changed
    compile(fixed.new_source, "m.py", "exec")
    assert "\t    grads_by_variable = {w.ref(): tf.transpose(x) @ dy, b.ref(): tf.reduce_sum(dy, 0)}\n" \
        "\t    return dy @ tf.transpose(w), [grads_by_variable[v.ref()] for v in variables]\n" in fixed.new_source


def test_a_fix_with_an_edit_per_call_site_in_a_long_module_renders_in_seconds():
    """Found by the long fuzz run: one CG004 fix edits every call of the op (400 of them in a
    345 KB module); turning it into text edits (JSON, SARIF, editors) transformed and printed
    the whole module once per edit, 27 minutes. Now each edit is printed with its top-level
    statement only, and the edits are the same as the whole module's."""
    from pathlib import Path

    from cglint.diagnostics import Fix

    example = (Path(__file__).resolve().parents[1] / "fixtures" / "keras" / "cg004_weight_passed_layer.py").read_text()
    source = "\n\n".join([example] * 150)
    result = engine.lint_source(source, "m.py")
    (d,) = [d for d in result.diagnostics if d.fix is not None and len(d.fix.edits) >= 150]
    started = time.process_time()
    edits = fix.text_edits(source, result.module, d.fix)
    assert time.process_time() - started < 20
    assert len(edits) == len(d.fix.edits)
    for k in (0, 77, len(edits) - 1):  # as the whole module's transform writes them
        one = Fix([d.fix.edits[k]], applicability=d.fix.applicability, description="")
        whole = one.apply(result.module).code
        assert pysource.splice(source, source, whole) in [(e.start, e.end, e.text) for e in edits]


def test_python_parses_from_several_threads_at_once():
    # The language server lints and fixes on two threads. In CPython 3.11 an AST build that a
    # collection interrupts (a finalizer runs Python code, another thread takes over and builds
    # a tree from a different stack depth) fails with "SystemError: AST constructor recursion
    # depth mismatch", unless cglint builds one tree at a time (pysource.python_ast).
    import threading
    import time

    text = "".join(f"def f{i}(x):\n    return [x + {i} for _ in range(3)]\n" for i in range(400))
    errors: list[BaseException] = []

    class Finalized:
        def __del__(self) -> None:
            time.sleep(0)  # lets another thread run

    def work(depth: int) -> None:
        if depth:
            return work(depth - 1)
        try:
            for _ in range(20):
                for _ in range(50):
                    cycle = Finalized()
                    cycle.me = cycle  # collected by the cyclic collector, mid-parse
                tree, problem = pysource.parse(text)
                assert tree is not None and problem is None
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(depth,)) for depth in (0, 7, 0, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.parametrize("text", ["", "a", "a\n", "a\r\nb\rc\n", "\n\n", "\r", "x\r\n\r\ny", "a\x0cb\nc", "a\u2028b\r\n"])
def test_split_lines_breaks_where_python_does(text):
    # Texts without the characters only `str.splitlines` breaks at take its C fast path.
    import re

    ends = [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    starts = [0, *ends]
    want = [text[a:b] for a, b in zip(starts, [*ends, len(text)]) if a < len(text) or a != b]
    want = [w for w in want if w] if not text.endswith(("\n", "\r")) else want
    assert "".join(pysource.split_lines(text, keepends=True)) == text
    assert pysource.split_lines(text, keepends=True) == [w for w in want if w]
    assert pysource.split_lines(text) == [w.rstrip("\r\n") if w.endswith(("\r", "\n")) else w for w in want if w]


def test_an_import_of_a_hundred_thousand_parts_is_cg000_not_minutes():
    """Found by bench/fuzz_hostile.py: CPython's parser is quadratic in the parts of an import's
    dotted name (100,000 parts: 17 s of CPU). Beyond MAX_IMPORT_DOTS the statement is CG000
    where it starts, without reaching Python's parser; a long but sane import is linted."""
    n = 100_000
    source = HEAD + SITE + "\ndef f():\n    import " + "a." * n + "b\n"
    found = diags(source)
    assert [(line, code) for line, _, code, _ in found] == [(9, "CG000")]
    assert f"import statement too complex: {n:,} dots" in found[0][3]
    assert pysource._long_import("from " + "." * 10 + "a" + ".b" * (pysource.MAX_IMPORT_DOTS // 2) + " import c\n") is None
    continued = "import a" + ".\\\n a" * (pysource.MAX_IMPORT_DOTS + 1) + "\n"
    assert pysource._long_import("x = 1\n" + continued) == (2, pysource.MAX_IMPORT_DOTS + 1)
    assert pysource._long_import("x = 'a." + "a." * n + "'\n") is None  # dots outside an import
