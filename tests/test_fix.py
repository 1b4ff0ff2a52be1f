"""Fixes: what each rule's fix writes, safe/unsafe gating, the fixpoint, atomic writes that keep
line endings and mode, dropped fixes, and --fix/--diff on every fixture."""

import json
import os
import re
import shutil
import stat
import subprocess
import sys

import libcst as cst
import nbformat
import pytest
from support import ENV, FIXTURES, cglint

from cglint.diagnostics import Finding, Fix
from cglint.engine import lint_source
from cglint.fix import fix_file, fix_source, text_edits
from cglint.rules import ALL_RULES, select_rules
from cglint.rules.base import Rule


def fixed(source, unsafe=False, rules=ALL_RULES):
    return fix_source(source, "m.py", rules, unsafe=unsafe)


# ---- each rule's fix -----------------------------------------------------------------------

CG001_NESTED = '''import tensorflow as tf

@tf.custom_gradient
def op(x):
    @tf.function
    def forward(x):
        return tf.tan(x)

    y = forward(x)
    return y, lambda dy: dy / tf.square(tf.cos(x))
'''


def test_cg001_removes_a_plain_nested_decorator_safely():
    out = fixed(CG001_NESTED)
    assert [a.code for a in out.applied] == ["CG001"] and out.applied[0].safe
    assert "@tf.function" not in out.new_source and "    def forward(x):\n" in out.new_source


def test_cg001_decorator_with_options_is_unsafe():
    src = CG001_NESTED.replace("@tf.function", "@tf.function(jit_compile=True)")
    assert not fixed(src).changed
    assert "@tf.function" not in fixed(src, unsafe=True).new_source


def test_cg001_unwraps_calls_and_parenthesizes_lambdas():
    src = CG001_NESTED.replace("    y = forward(x)", "    y = tf.function(forward)(x) + tf.function(lambda a: a)(x)")
    out = fixed(src)
    assert "    y = forward(x) + (lambda a: a)(x)\n" in out.new_source


def test_cg001_moves_tf_function_above_custom_gradient():
    src = "import tensorflow as tf\n\n# op\n@tf.custom_gradient\n@tf.function\ndef op(x):\n    return x, lambda d: d\n"
    out = fixed(src)
    assert out.new_source == "import tensorflow as tf\n\n# op\n@tf.function\n@tf.custom_gradient\ndef op(x):\n    return x, lambda d: d\n"


CG005_INLINE = '''import tensorflow as tf

w = tf.Variable([[1.0]])
b = tf.Variable([0.0])


@tf.custom_gradient
def op(x):
    # the forward
    y = tf.tan(x @ w + b)

    def grad(dy, variables=None):
        g = dy / tf.square(tf.cos(y))
        return g @ tf.transpose(w), [{w.ref(): tf.transpose(x) @ g, b.ref(): tf.reduce_sum(g, 0)}[v.ref()] for v in variables]

    return y, grad
'''


def test_cg005_names_an_inline_pre_activation():
    out = fixed(CG005_INLINE)
    assert [a.code for a in out.applied] == ["CG005"]
    assert "    # the forward\n    z = x @ w + b\n    y = tf.tan(z)\n" in out.new_source
    assert "tf.square(tf.cos(z))" in out.new_source
    assert not out.remaining


def test_cg005_picks_a_fresh_name_when_z_is_taken():
    src = CG005_INLINE.replace("b = tf.Variable([0.0])", "b = tf.Variable([0.0])\nz = 3")
    out = fixed(src)
    assert "    y_pre = x @ w + b\n    y = tf.tan(y_pre)\n" in out.new_source


def test_cg005_helper_forward_is_unsafe():
    src = (FIXTURES / "seed" / "original.py").read_text()
    safe = fixed(src)
    assert {a.code for a in safe.applied} == {"CG001"}
    assert "CG005" in {d.code for d in safe.remaining}
    unsafe = fixed(src, unsafe=True)
    assert "    z = x @ w + b\n    y = forward(x)\n" in unsafe.new_source


def test_cg005_no_fix_when_the_input_is_rebound():
    src = '''import tensorflow as tf

@tf.custom_gradient
def op(x):
    y = tf.tan(x)
    x = x * 2
    return y, lambda dy: dy / tf.square(tf.cos(y))
'''
    out = fixed(src, unsafe=True)
    assert not out.changed and [d.code for d in out.remaining] == ["CG005"]


def test_cg003_calls_the_callable_with_variables():
    src = (FIXTURES / "rules" / "cg003_bad.py").read_text()
    out = fixed(src)
    assert "(lambda vs: [tf.reduce_sum(dy * x) for _ in vs])(variables)" in out.new_source


def test_seed_fix_needs_cg004_then_cg003():
    src = (FIXTURES / "seed" / "seed_fix.py").read_text()
    assert not fixed(src).changed  # CG003 waits for a `variables` parameter, which is unsafe to add
    out = fixed(src, unsafe=True)
    assert [a.code for a in out.applied] == ["CG004", "CG003"]
    assert "def grad(upstream, variables=None):" in out.new_source
    assert "return dydx, grad_vars(variables)" in out.new_source


@pytest.mark.parametrize("params,expected", [
    ("dy", "dy, variables=None"),
    ("dy,", "dy, variables=None"),
    ("*dys", "*dys, variables=None"),
    ("dy, /", "dy, /, variables=None"),
])
def test_cg004_adds_the_parameter(params, expected):
    src = f"import tensorflow as tf\nw = tf.Variable(1.0)\n\n@tf.custom_gradient\ndef op(x):\n    def grad({params}):\n        return dy\n    return x * w, grad\n"
    out = fixed(src, unsafe=True, rules=select_rules(["CG004"]))
    assert f"def grad({expected}):" in out.new_source
    assert not fixed(src, rules=select_rules(["CG004"])).changed  # unsafe


def test_cg002_keys_gradients_by_name_whatever_their_order():
    src = '''import tensorflow as tf

w = tf.Variable(1.0)
b = tf.Variable(0.0)

@tf.custom_gradient
def op(x):
    def grad(dy, variables=None):
        db = tf.reduce_sum(dy)
        dw = tf.reduce_sum(dy * x)
        return dy * w, db, dw

    return x * w + b, grad
'''
    out = fixed(src, unsafe=True)
    assert "return dy * w, [{b.ref(): db, w.ref(): dw}[v.ref()] for v in variables]" in out.new_source
    assert "by name" in out.applied[0].description


def test_cg002_ambiguous_names_get_no_fix():
    src = '''import tensorflow as tf

w = tf.Variable(1.0)
b = tf.Variable(0.0)

@tf.custom_gradient
def op(x):
    def grad(dy, variables=None):
        dw = tf.reduce_sum(dy * x)
        dw2 = tf.reduce_sum(dy)
        return dy * w, dw, dw2

    return x * w + b, grad
'''
    assert not fixed(src, unsafe=True).changed


def test_cg002_expressions_follow_first_read_order_and_are_hoisted():
    src = ALL_RULES[2].INVALID[0]
    out = fixed(src, unsafe=True)
    assert ("        grads_by_variable = {w.ref(): tf.transpose(x) @ g, b.ref(): tf.reduce_sum(g, 0)}\n"
            "        return g @ tf.transpose(w), [grads_by_variable[v.ref()] for v in variables]\n") in out.new_source
    assert "first reads `w`, `b`" in out.applied[0].description


# ---- properties ----------------------------------------------------------------------------

EXAMPLES = [pytest.param(code, id=f"{rule.code}-{i}") for rule in ALL_RULES[1:] for i, code in enumerate(rule.INVALID)]


@pytest.mark.parametrize("code", EXAMPLES)
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_every_example_fixes_to_a_parsing_fixpoint(code, unsafe):
    out = fixed(code, unsafe)
    cst.parse_module(out.new_source)
    compile(out.new_source, "m.py", "exec")
    assert not fixed(out.new_source, unsafe).changed
    before = lint_source(code, "m.py").diagnostics
    # CG004's unsafe fix says so itself: with a `variables` parameter "its return must then
    # include the variable gradients", so CG002 (one tensor returned) may follow it.
    announced = [d for d in out.remaining if d.code == "CG002" and any(a.code == "CG004" for a in out.applied)
                 and not any(b.code == "CG002" and b.line == d.line for b in before)]
    assert len(before) - (len(out.remaining) - len(announced)) == len(out.applied)


def test_fixed_seed_is_clean_of_cg002_cg004_cg005():
    out = fixed((FIXTURES / "seed" / "original.py").read_text(), unsafe=True)
    assert [a.code for a in out.applied] == ["CG001", "CG004", "CG005", "CG002"]
    assert not {"CG002", "CG004", "CG005"} & {d.code for d in out.remaining}
    assert "return dydx, [{w.ref(): dydw, b.ref(): dydb}[v.ref()] for v in variables]" in out.new_source


class _BreaksParsing(Rule):
    """A rule whose fix would produce `def f(x, x)`: must be dropped and reported."""

    code, name, summary = "CG001", "test-only", "test-only"

    def check(self, model):
        fn = model.module.body[0]
        dup = fn.params.with_changes(params=[*fn.params.params, fn.params.params[0]])
        yield Finding(fn.name, "dup", fix=Fix([(fn.params, dup)], True, "duplicate the parameter"))


def test_a_fix_that_breaks_the_file_is_dropped_and_reported():
    source = "def f(x):\n    return x, lambda dy: dy\n\nimport tensorflow as tf\ng = tf.custom_gradient(f)\n"
    out = fix_source(source, "m.py", [_BreaksParsing])
    assert not out.changed and not out.applied
    assert len(out.dropped) == 1 and "would not compile" in out.dropped[0].reason


def test_text_edits_reproduce_the_fix():
    src = CG005_INLINE
    result = lint_source(src, "m.py")
    d = next(d for d in result.diagnostics if d.code == "CG005")
    edits = text_edits(src, result.module, d.fix)
    assert len(edits) == 2
    new = src
    for e in reversed(edits):
        new = new[: e.start] + e.text + new[e.end :]
    assert new == d.fix.apply(result.module).code


# ---- files: line endings, BOM, mode, atomicity ----------------------------------------------


def test_crlf_and_bom_and_mode_are_kept(tmp_path):
    path = tmp_path / "m.py"
    path.write_bytes(b"\xef\xbb\xbf" + CG005_INLINE.replace("\n", "\r\n").encode())
    os.chmod(path, 0o640)
    out = fix_file(str(path), ALL_RULES)
    assert out.applied
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")
    assert data.count(b"\r\n") == data.count(b"\n")  # every line ending is still CRLF
    assert b"    z = x @ w + b\r\n    y = tf.tan(z)\r\n" in data
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["m.py"]  # no temporary file left behind


def test_symlink_target_is_fixed_and_link_kept(tmp_path):
    real = tmp_path / "real.py"
    real.write_text(CG005_INLINE)
    link = tmp_path / "link.py"
    link.symlink_to(real)
    fix_file(str(link), ALL_RULES)
    assert link.is_symlink() and "tf.tan(z)" in real.read_text()


# ---- the command line on every fixture -------------------------------------------------------


def _count(cwd):
    return len(json.loads(cglint("--output-format", "json", "--isolated", ".", cwd=cwd).stdout)["diagnostics"])


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_fix_every_fixture(tmp_path, unsafe):
    work = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, work)
    before = _count(work)
    flags = ["--fix", "--unsafe-fixes"] if unsafe else ["--fix"]
    run = cglint(*flags, "--isolated", ".", cwd=work)
    assert run.returncode in (0, 1) and "Traceback" not in run.stderr, run.stderr
    summary = next(line for line in run.stdout.splitlines() if line.startswith("Found "))
    fixed_n = int(summary.split("(")[1].split()[0])
    assert fixed_n > 0
    for path in work.rglob("*.py"):
        if path.name != "cg000_bad.py":
            cst.parse_module(path.read_text())
    for path in work.rglob("*.ipynb"):  # notebooks are fixed too, and stay valid
        nbformat.validate(nbformat.reads(path.read_text(), as_version=4))
    sources = [*work.rglob("*.py"), *work.rglob("*.ipynb")]
    snapshot = {p: p.read_bytes() for p in sources}
    again = cglint(*flags, "--isolated", ".", cwd=work)  # a full lint of the fixed tree: nothing left to fix
    assert "fixed" not in again.stdout.split("\n")[-2]
    assert {p: p.read_bytes() for p in sources} == snapshot
    after = int(re.search(r"^Found (\d+) problems? in \d+ files?\.$", again.stdout, re.M)[1])
    assert before - after == fixed_n, (run.stdout, again.stdout)


def test_unsafe_fix_makes_the_seed_clean_of_the_contract_bugs(tmp_path):
    shutil.copy(FIXTURES / "seed" / "original.py", tmp_path / "original.py")
    run = cglint("--fix", "--unsafe-fixes", "--output-format", "json", "original.py", cwd=tmp_path)
    codes = {d["code"] for d in json.loads(run.stdout)["diagnostics"]}
    assert not codes & {"CG002", "CG004", "CG005"}
    assert "Fixed 4 problems (0 remaining)." in run.stderr


def test_diff_prints_and_writes_nothing(tmp_path):
    (tmp_path / "m.py").write_text(CG005_INLINE)
    run = cglint("--diff", "m.py", cwd=tmp_path)
    assert run.returncode == 1
    assert run.stdout.startswith("--- a/m.py\n+++ b/m.py\n")
    assert "+    z = x @ w + b\n" in run.stdout and "-    y = tf.tan(x @ w + b)\n" in run.stdout
    assert "Would fix 1 problem in 1 file." in run.stderr
    assert (tmp_path / "m.py").read_text() == CG005_INLINE
    (tmp_path / "m.py").write_text((FIXTURES / "seed" / "correct.py").read_text())
    assert cglint("--diff", "m.py", cwd=tmp_path).returncode == 0


def test_fix_from_stdin_prints_the_fixed_source(tmp_path):
    run = subprocess.run([sys.executable, "-m", "cglint", "--fix", "-", "--stdin-filename", "ops.py"], input=CG005_INLINE,
                         capture_output=True, text=True, cwd=tmp_path, env=ENV)
    assert run.returncode == 0
    assert "    y = tf.tan(z)\n" in run.stdout
    assert "1 fixed" in run.stderr


def test_cg006_keys_a_hard_coded_order():
    out = fixed((FIXTURES / "rules" / "cg006_bad.py").read_text(), unsafe=True)
    assert [a.code for a in out.applied] == ["CG006"] and not out.applied[0].safe
    assert ("grads_by_variable = {self.kernel.value.ref(): tf.transpose(x) @ g, self.bias.value.ref(): tf.reduce_sum(g, 0)}"
            in out.new_source)
    assert "[grads_by_variable[v.ref()] for v in variables]" in out.new_source


def test_one_fix_for_two_findings_counts_both():
    src = '''import tensorflow as tf

w = tf.Variable(1.0)
b = tf.Variable(0.0)

@tf.custom_gradient
def op(x):
    def grad(dy, variables=None):
        dw = tf.reduce_sum(dy * x)
        db = tf.reduce_sum(dy)
        return dy * w, (dw, db)

    return x * w + b, grad
'''
    assert sorted(d.code for d in lint_source(src, "m.py").diagnostics) == ["CG002", "CG006"]
    out = fixed(src, unsafe=True)
    assert sorted(a.code for a in out.applied) == ["CG002", "CG006"] and not out.remaining
    assert "return dy * w, [{w.ref(): dw, b.ref(): db}[v.ref()] for v in variables]" in out.new_source


def test_a_fix_keeps_the_lines_libcst_misprints():
    # libcst prints this module's tail without the empty line between the indented and the
    # dedented comment; the fix must change the `cos(y)` it is about and nothing else.
    source = ("import tensorflow as tf\n\n\n@tf.custom_gradient\ndef op(x):\n    y = tf.math.tan(x)\n"
              "    return y, lambda dy: dy * tf.math.cos(y)\n    # trailing\n\n  # odd\n# end\n")
    assert cst.parse_module(source).code != source  # the libcst behaviour this guards against
    out = fix_source(source, "m.py", unsafe=True)
    assert out.new_source == source.replace("tf.math.cos(y)", "tf.math.cos(x)")
