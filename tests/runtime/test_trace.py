"""`cglint trace -- COMMAND` and `pytest --cglint`, end to end: real commands, real TensorFlow and
Keras 3 in the traced processes. Each traced run starts TensorFlow, so the runs are shared by
module-scoped fixtures and the assertions split over small tests."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "fixtures" / "trace_project"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}


def run(*args, cwd=ROOT, env=ENV, timeout=600):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=timeout)


def trace(*command, cwd=ROOT, options=()):
    return run("-m", "cglint", "trace", *options, "--", *command, cwd=cwd)


def line_of(path: Path, text: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if text in ln)


# --------------------------------------------------------------------------- the fixture project

@pytest.fixture(scope="module")
def traced_pytest(tmp_path_factory):
    """One run for both: `cglint trace` around `pytest --cglint` (they share one tracer)."""
    out = tmp_path_factory.mktemp("trace") / "report.json"
    proc = trace(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--cglint", "fixtures/trace_project",
                 options=("--output-format", "json", "--output-file", out))
    return proc, json.loads(out.read_text())


def test_trace_pytest_finds_the_wrong_closure_and_confirms_the_right_ones(traced_pytest):
    proc, report = traced_pytest
    by_name = {r["function"]: r for r in report["runtime"]}
    assert set(by_name) == {"SoftsignDense.call.<locals>.dense_softsign", "log1pexp", "Gain.apply"}, report
    wrong = by_name["SoftsignDense.call.<locals>.dense_softsign"]
    assert (wrong["path"], wrong["line"], wrong["verdict"]) == (
        "fixtures/trace_project/layers.py", line_of(PROJECT / "layers.py", "def dense_softsign"), "mismatch")
    assert "d/x off by" in wrong["detail"] and "kernel off by" in wrong["detail"]
    # First traced by model.fit (symbolic), then checked at the GradientTape step's eager call.
    assert "under tf.function" in wrong["checked"] and "later eager call" in wrong["checked"]
    assert wrong["tests"] == ["fixtures/trace_project/test_train.py::test_fit_two_steps",
                              "fixtures/trace_project/test_train.py::test_one_step_with_gradient_tape"]
    for name, text in (("log1pexp", "def log1pexp"), ("Gain.apply", "def apply")):
        r = by_name[name]
        assert (r["verdict"], r["reference"]) == ("match", "autodiff"), r
        assert r["line"] == line_of(PROJECT / ("ops.py"), text)
    assert by_name["Gain.apply"]["checked"].startswith("checked at its first eager call")


def test_trace_pytest_leaves_pytest_output_and_status_alone(traced_pytest):
    proc, report = traced_pytest
    before_plugin = proc.stdout[:proc.stdout.index("=== cglint: custom gradients")]
    assert re.fullmatch(r"\.\. +\[100%\]\n=+ ?", before_plugin), proc.stdout
    assert re.search(r"^2 passed in [\d.]+s( \([\d:]+\))?$", proc.stdout, re.M), proc.stdout  # (0:01:05) past 60 s
    assert proc.stderr == "", proc.stderr  # cglint's report went to the file
    assert report["trace"]["exit_status"] == 0  # pytest's own: --cglint alone does not fail the run
    assert proc.returncode == 1  # pytest passed, so the mismatch decides


def test_pytest_plugin_lists_per_test_what_was_checked(traced_pytest):
    out = traced_pytest[0].stdout
    section = out[out.index("cglint: custom gradients"):]
    tape_test = section[section.index("test_train.py::test_one_step_with_gradient_tape:"):]
    assert "Gain.apply (fixtures/trace_project/ops.py:" in tape_test
    fit_test = section[section.index("test_train.py::test_fit_two_steps:"):section.index("test_one_step_with")]
    assert "dense_softsign (fixtures/trace_project/layers.py:" in fit_test and "Gain.apply" not in fit_test
    assert re.search(r"layers\.py:\d+: SoftsignDense\.call\.<locals>\.dense_softsign: mismatch vs autodiff", section)
    assert "cglint: 3 custom gradients checked: 1 mismatch, 2 match." in section


def test_pytest_plugin_strict_fails_the_run_on_a_mismatch(tmp_path):
    (tmp_path / "test_op.py").write_text(
        "import tensorflow as tf\n\n\n"
        "@tf.custom_gradient\n"
        "def cube(x):\n"
        "    def grad(dy):\n"
        "        return dy * 2 * x  # should be 3 * x**2\n"
        "    return x ** 3, grad\n\n\n"
        "def test_cube():\n"
        "    assert cube(tf.constant([1.0, 2.0])).numpy().tolist() == [1.0, 8.0]\n")
    proc = run("-m", "pytest", "-q", "-p", "no:cacheprovider", "--cglint-strict", "test_op.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "test_op.py:5: cube: mismatch vs autodiff" in proc.stdout
    assert "1 passed" in proc.stdout and "--cglint-strict: failing the run" in proc.stdout


def test_pytest_plugin_is_inert_without_the_option(tmp_path):
    (tmp_path / "test_plain.py").write_text("import sys\n\n\ndef test_plain():\n"
                                            "    assert 'cglint.trace.instrument' not in sys.modules\n")
    proc = run("-m", "pytest", "-q", "-p", "no:cacheprovider", "test_plain.py", cwd=tmp_path)
    assert proc.returncode == 0 and "cglint" not in proc.stdout, proc.stdout


# --------------------------------------------------------------------------- scripts

MISSING_VARIABLES = """import tensorflow as tf

w = tf.Variable([1.0, 2.0])


@tf.custom_gradient
def scale(x):
    def grad(dy):
        return dy * w
    return x * w, grad


@tf.custom_gradient
def mul(a, b):
    def grad(dy):
        return dy * b  # one gradient for two inputs
    return a * b, grad


@tf.function
def step(a, b):
    with tf.GradientTape() as tape:
        tape.watch(a)
        y = mul(a, b)
    return tape.gradient(y, a)


try:
    step(tf.constant(1.0), tf.constant(2.0))
except Exception as e:  # InternalError: "Recorded operation 'mul' returned too few gradients"
    print("caught", type(e).__name__)
x = tf.constant([3.0, 4.0])
with tf.GradientTape() as tape:
    tape.watch(x)
    loss = tf.reduce_sum(scale(x))
print("not reached")
"""


def test_trace_script_missing_variables_is_an_error_at_the_def_line(tmp_path):
    (tmp_path / "script.py").write_text(MISSING_VARIABLES)
    proc = trace(sys.executable, "script.py", cwd=tmp_path)
    assert proc.returncode == 1  # the script died of TensorFlow's TypeError: its own status
    assert proc.stdout == "caught InternalError\n"
    err = proc.stderr
    # The script's traceback is as TensorFlow wrote it (cglint's frame is taken out) ...
    assert "TypeError: @tf.custom_gradient grad_fn must accept keyword argument 'variables'" in err
    assert "cglint/trace" not in err
    # ... then cglint's report: the error at the def line, with TensorFlow's message.
    assert ("script.py:7: scale: error: TypeError: @tf.custom_gradient grad_fn must accept keyword argument "
            "'variables', since function uses variables: ['Variable:0']") in err
    assert "= runtime: confirmed: TypeError" in err  # on the static CG004 finding
    assert "the command exited with status 1" in err
    # The gradient-count error under tf.function (which the script caught) is confirmed by the check
    # after the command, with the message TensorFlow gives eagerly.
    assert ("script.py:14: mul: error: ValueError: custom_gradient function expected to return 2 gradients, "
            "but returned 1 instead.\n      (first called under tf.function with (float32[], float32[]); "
            "checked after the command") in err


KEYWORDS = """import tensorflow as tf


@tf.custom_gradient
def mse(pred, target):
    diff = pred - target

    def grad(dy):
        print("grad fn used")
        return dy * 2.0 * diff, -dy * 2.0 * diff

    return tf.reduce_sum(diff * diff), grad


@tf.custom_gradient
def scaled(x, factor=1.0):
    def grad(dy):
        return dy * 2.0 * factor * x

    return factor * x * x, grad


p, t = tf.constant([1.0, 2.0]), tf.constant([0.5, 0.0])
with tf.GradientTape() as tape:
    tape.watch(p)
    loss = mse(pred=p, target=t) + tf.reduce_sum(scaled(p, factor=3.0))
print(tape.gradient(loss, p).numpy())
"""


def test_trace_keyword_only_tensors_are_an_error_and_python_keywords_are_checked(tmp_path):
    (tmp_path / "script.py").write_text(KEYWORDS)
    out = tmp_path / "report.json"
    proc = trace(sys.executable, "script.py", cwd=tmp_path, options=("--output-format", "json", "--output-file", out))
    # TensorFlow skips the grad fn when every tensor is a keyword: the program runs on autodiff's gradient
    assert "grad fn used" not in proc.stdout and proc.stdout.strip() == "[ 7. 16.]", proc.stdout
    assert proc.returncode == 1, proc.stderr
    by_name = {r["function"]: r for r in json.loads(out.read_text())["runtime"]}
    assert by_name["mse"]["verdict"] == "error"
    assert "keyword arguments only (pred=, target=)" in by_name["mse"]["detail"]
    # a Python number by keyword is bound for the check (which once failed on the partial's name)
    assert by_name["scaled"]["verdict"] == "match", by_name["scaled"]


SIDE_EFFECTS = """import gc, random
import numpy as np
import tensorflow as tf

tf.random.set_seed(1)
np.random.seed(0)
random.seed(0)
w = tf.Variable([1.0, 2.0])


@tf.custom_gradient
def noisy(x):
    print("forward runs")
    y = x * w + tf.random.uniform([2]) * 0.0
    def grad(dy, variables=None):
        return dy * w, [dy * x]
    return y, grad


@tf.custom_gradient
def square(x):
    def grad(dy):
        return dy * x * x  # should be 2 * x
    return x * x, grad


@tf.function
def graph_only(x):
    return square(x)


print(noisy(tf.constant([1.0, 1.0])).numpy())
print(graph_only(tf.constant([[1.0, 2.0]])).numpy())
print(tf.random.normal([3]).numpy(), tf.random.uniform([2], seed=3).numpy())
print(np.random.rand(), random.random())
print(sum(isinstance(o, tf.Variable) for o in gc.get_objects()), "variables")
"""


@pytest.fixture(scope="module")
def side_effects(tmp_path_factory):
    work = tmp_path_factory.mktemp("side")
    (work / "prog.py").write_text(SIDE_EFFECTS)
    plain = run("prog.py", cwd=work)
    report = tmp_path_factory.mktemp("side-report") / "report.json"
    traced = trace(sys.executable, "prog.py", cwd=work, options=("--output-format", "json", "--output-file", report))
    return plain, traced, json.loads(report.read_text())


def test_trace_changes_nothing_the_program_prints_or_draws(side_effects):
    plain, traced, _ = side_effects
    assert plain.returncode == 0, plain.stderr
    assert traced.stdout == plain.stdout  # same prints, same random numbers, same variable count
    assert traced.stdout.count("forward runs") == 1


def test_trace_checks_graph_only_signatures_after_the_command(side_effects):
    plain, traced, report = side_effects
    by_name = {r["function"]: r for r in report["runtime"]}
    assert by_name["noisy"]["verdict"] == "match"
    square = by_name["square"]
    assert square["verdict"] == "mismatch"
    assert square["checked"] == ("first called under tf.function with (float32[1, 2]); checked after the command "
                                 "on random inputs (float32[1, 2])")
    assert traced.returncode == 1


def test_trace_nothing_called_says_so_and_exits_0(tmp_path):
    proc = trace(sys.executable, "-c", "import sys; print(1); print('tensorflow' in sys.modules)", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout == "1\nFalse\n"  # TensorFlow is only imported by programs that import it
    assert proc.stderr == ("cglint trace: no custom gradient was called; nothing was checked "
                           "(the command exited with status 0).\n")


def test_trace_keeps_the_command_status_and_reports_bad_usage(tmp_path):
    assert trace(sys.executable, "-c", "import sys; sys.exit(3)", cwd=tmp_path).returncode == 3
    missing = trace("no-such-command-cglint", cwd=tmp_path)
    assert (missing.returncode, missing.stderr) == (2, "cglint trace: error: command not found: no-such-command-cglint\n")
    empty = run("-m", "cglint", "trace", cwd=tmp_path)
    assert empty.returncode == 2 and "no command given" in empty.stderr
    # A machine-readable report never shares a stream with the command or TensorFlow's logging.
    shared = trace(sys.executable, "-c", "raise SystemExit(5)", cwd=tmp_path, options=("--output-format", "json"))
    assert (shared.returncode, shared.stderr) == (2, "cglint trace: error: --output-format json needs --output-file "
                                                     "PATH: the command and TensorFlow also write to stdout and stderr\n")


# ------------------------------------------------- per-closure checks, autograph, the program's crash
REAL_SHAPES = """import tensorflow as tf
import keras


class Power(keras.layers.Layer):
    def __init__(self, power, **kwargs):
        super().__init__(**kwargs)
        self.power = power

    def call(self, x):
        @tf.custom_gradient
        def power(x):
            def grad(dy):
                return dy * 2.0 * x  # right for power 2 only
            return x ** self.power, grad
        return power(x)


@tf.function
def step(x):
    @tf.custom_gradient
    def cube(x):
        if tf.reduce_sum(x) > 0:
            y = x * x * x
        else:
            y = x
        def grad(dy):
            return dy * 2.0 * x * x  # should be 3 x^2
        return y, grad
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = cube(x)
    return tape.gradient(y, x)


@tf.custom_gradient
def lookup(x, table):
    y = x * table["scale"]
    def grad(dy):
        return dy * table["scale"], None
    return y, grad


x = tf.constant([1.0, 2.0, 3.0])
with tf.GradientTape(persistent=True) as tape:
    tape.watch(x)
    square, cube = Power(2.0)(x), Power(3.0)(x)  # one layer class, two configurations
print(tape.gradient(square, x).numpy(), tape.gradient(cube, x).numpy())
print(step(x).numpy())


@tf.custom_gradient
def wide_tanh(x):
    y = tf.tanh(x)
    return y, lambda dy: dy * (1.0 - x * x)  # derivative at the input: should be 1 - y^2


big = tf.random.normal([8192, 256])  # 2 million elements: over the check's budget
with tf.GradientTape() as tape:
    tape.watch(big)
    loss = tf.reduce_sum(wide_tanh(big))
print(tape.gradient(loss, big).shape)
lookup(x, {"scal": 2.0})  # the program's own crash inside a forward
"""


@pytest.fixture(scope="module")
def real_shapes(tmp_path_factory):
    work = tmp_path_factory.mktemp("real")
    (work / "prog.py").write_text(REAL_SHAPES)
    out = work / "report.json"
    proc = trace(sys.executable, "prog.py", cwd=work, options=("--output-format", "json", "--output-file", out))
    return work, proc, {r["function"]: r for r in json.loads(out.read_text())["runtime"]}


def test_trace_checks_each_configuration_of_a_layer(real_shapes):
    work, _, by_name = real_shapes
    power = by_name["Power.call.<locals>.power"]  # the second, buggy instance is the verdict
    assert (power["line"], power["verdict"]) == (line_of(work / "prog.py", "def power"), "mismatch")
    assert "d/x off by" in power["detail"] and power["checked"].endswith("where self.power=3.0")


def test_trace_maps_autograph_conversions_to_the_users_line(real_shapes):
    work, _, by_name = real_shapes
    cube = by_name["step.<locals>.cube"]  # not autograph's generated file and factory names
    assert (cube["path"], cube["line"], cube["verdict"]) == ("prog.py", line_of(work / "prog.py", "def cube"),
                                                             "mismatch")
    assert not any("autograph" in name or "autograph" in r["path"] for name, r in by_name.items())


def test_trace_reports_a_crash_in_a_forward_at_the_users_line(real_shapes):
    work, proc, by_name = real_shapes
    assert proc.returncode == 1 and "KeyError: 'scale'" in proc.stderr  # the program's own traceback
    lookup = by_name["lookup"]
    assert (lookup["verdict"], lookup["detail"]) == ("error", "KeyError: 'scale'")
    assert lookup["checked"] == f"raised while the command ran at prog.py:{line_of(work / 'prog.py', 'y = x * table')}"


def test_trace_reports_a_crash_in_a_grad_fn_at_its_line(tmp_path):
    """The backward pass raises inside the user's grad fn (TensorFlow 2.21 propagates the
    KeyError out of tape.gradient): that function's verdict is `error` with the exception."""
    (tmp_path / "prog.py").write_text(
        "import tensorflow as tf\n\nSCALES = {'scale': 2.0}\n\n\n@tf.custom_gradient\ndef scaled(x):\n"
        "    def grad(dy):\n        return dy * SCALES['scal']  # the program's own crash\n\n"
        "    return x * SCALES['scale'], grad\n\n\nx = tf.constant([1.0, 2.0])\n"
        "with tf.GradientTape() as tape:\n    tape.watch(x)\n    y = scaled(x)\nprint(tape.gradient(y, x))\n")
    out = tmp_path / "report.json"
    proc = trace(sys.executable, "prog.py", cwd=tmp_path, options=("--output-format", "json", "--output-file", out))
    assert proc.returncode == 1 and "KeyError: 'scal'" in proc.stderr  # the program's own traceback
    (entry,) = json.loads(out.read_text())["runtime"]
    assert (entry["function"], entry["verdict"], entry["detail"]) == ("scaled", "error", "KeyError: 'scal'")
    assert entry["checked"] == f"raised while the command ran at prog.py:{line_of(tmp_path / 'prog.py', 'SCALES[')}"


def test_trace_reports_a_tf_function_forward_that_raises_at_every_call(tmp_path):
    """tf.function stacked under the custom gradient: the forward returns (y, grad_fn), which
    tf.function refuses at every call, before any gradient. No check can run; the failure,
    raised inside TensorFlow, is the function's verdict."""
    (tmp_path / "prog.py").write_text(
        "import tensorflow as tf\n\n\ndef gelu_grad(x):\n    def grad(dy):\n        return dy * tf.sigmoid(1.702 * x)\n\n"
        "    return x * tf.sigmoid(1.702 * x), grad\n\n\ngelu = tf.custom_gradient(tf.function(gelu_grad))\n"
        "x = tf.constant([1.0, 2.0])\nwith tf.GradientTape() as tape:\n    tape.watch(x)\n    y = gelu(x)\n")
    out = tmp_path / "report.json"
    proc = trace(sys.executable, "prog.py", cwd=tmp_path, options=("--output-format", "json", "--output-file", out))
    assert proc.returncode == 1 and "To be compatible with tf.function" in proc.stderr  # the program's own
    (entry,) = json.loads(out.read_text())["runtime"]
    assert (entry["function"], entry["verdict"]) == ("gelu_grad", "error"), entry
    assert entry["detail"].startswith("the forward raised at every call the command made: TypeError: To be "
                                      "compatible with tf.function"), entry
    assert " at 0x" not in entry["detail"]


def test_trace_checks_inputs_over_the_budget_on_a_slice(real_shapes):
    _, _, by_name = real_shapes
    wide = by_name["wide_tanh"]
    assert wide["verdict"] == "mismatch" and "d/x off by" in wide["detail"], wide
    assert wide["checked"] == ("checked at its first eager call with (float32[8192, 256]), on the first 4096 of 8192 "
                               "rows (the inputs exceed the check's budget)")


def test_trace_checks_second_derivatives_when_asked(tmp_path):
    source = (ROOT / "fixtures" / "runtime" / "softplus_second_order.py").read_text()
    (tmp_path / "prog.py").write_text(source + "\n\nsoftplus(tf.constant([[0.5, -1.0, 2.0]]))\n")
    out = tmp_path / "report.json"
    proc = trace(sys.executable, "prog.py", cwd=tmp_path,
                 options=("--runtime-order", "2", "--output-format", "json", "--output-file", out))
    (entry,) = json.loads(out.read_text())["runtime"]
    assert proc.returncode == 1 and entry["verdict"] == "mismatch", entry
    assert entry["detail"].startswith("second derivative: d/x off by"), entry["detail"]


def test_a_check_frees_what_it_built_without_walking_the_whole_heap():
    import gc
    import weakref

    from cglint.trace.instrument import _collect_what_it_builds

    class Node:
        pass

    old = Node()
    old.self = old  # a cycle from before the check: not the check's to collect
    old_ref = weakref.ref(old)
    gc.disable()
    try:
        del old
        with _collect_what_it_builds():
            made = Node()
            made.self = made  # a tape-like cycle the check leaves behind
            made_ref = weakref.ref(made)
            del made
        assert made_ref() is None and old_ref() is not None
        assert gc.get_freeze_count() == 0  # the program's objects are unfrozen again
        gc.freeze()  # a program that froze its own objects keeps them frozen
        frozen = gc.get_freeze_count()
        with _collect_what_it_builds():
            pass
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
        gc.enable()
        gc.collect()
    assert old_ref() is None


# A custom gradient built in a graph: checked after the command, outside that graph.
OTHER_GRAPHS = """import tensorflow as tf


@tf.function
def step(x):
    w = tf.exp(x[0])  # a tensor of this function's graph, read by the grad fn only

    @tf.custom_gradient
    def scale(t):
        def grad(dy):
            return dy * w
        return t * w, grad

    return scale(x)


def reduce_prod(t, axis):  # TensorFlow Lattice's custom_reduce_prod, closing over a Python axis
    @tf.custom_gradient
    def fn(t):
        fwd = tf.reduce_prod(t, axis=axis)

        def grad_fn(dy):
            return tf.expand_dims(dy, axis=axis) * tf.math.divide_no_nan(tf.expand_dims(fwd, axis=axis), t)

        return fwd, grad_fn

    return fn(t)


print(step(tf.ones((2, 3))).shape)
tf.compat.v1.disable_eager_execution()  # the rest of the program builds a TF1 graph
print(len(reduce_prod(tf.ones((1, 5, 3)), -2).shape))
"""


def test_trace_exit_check_of_graph_built_functions_reports_no_error_of_its_own(tmp_path):
    """A check after the command runs outside the graph the function was built in: a tensor of that
    graph the grad fn holds cannot be used there (`skipped`, not `error`), and after
    `disable_eager_execution()` the check still runs eagerly (it was an `error`: "must be from the
    same graph", its random inputs built in the program's graph)."""
    (tmp_path / "prog.py").write_text(OTHER_GRAPHS)
    out = tmp_path / "report.json"
    proc = trace(sys.executable, "prog.py", cwd=tmp_path, options=("--output-format", "json", "--output-file", out))
    assert proc.returncode == 0 and proc.stdout == "(2, 3)\n2\n", (proc.stdout, proc.stderr)
    by_name = {r["function"]: r for r in json.loads(out.read_text())["runtime"]}
    scale = by_name["step.<locals>.scale"]
    assert scale["verdict"] == "skipped", scale
    assert scale["detail"].startswith("the forward or its grad fn uses a tensor of the graph it was built in"), scale
    assert "is out of scope" in scale["detail"]
    fn = by_name["reduce_prod.<locals>.fn"]
    assert fn["verdict"] == "match", fn
    assert fn["checked"] == ("first called under tf.function with (float32[1, 5, 3]); checked after the command "
                             "on random inputs (float32[1, 5, 3])")
