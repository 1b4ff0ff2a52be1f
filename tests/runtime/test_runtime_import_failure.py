"""`cglint --runtime`: an import that fails inside a custom gradient confirms that function (an
`error` with TensorFlow's message, not `skipped`), and progress per module on a terminal only.
One real run with stderr on a pseudo-terminal and one with stderr on a pipe, shared by the tests."""

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from support import read_terminal  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3", "TERM": "xterm", "COLUMNS": "120"}

# The import-time demo raises TensorFlow's gradient-count error from `mul`'s custom gradient.
DEMO = """import tensorflow as tf


@tf.custom_gradient
def mul(x, y):
    def grad(upstream):
        return upstream * y  # one gradient for two inputs
    return x * y, grad


@tf.custom_gradient
def double(x):
    def grad(upstream):
        return 2 * upstream
    return 2 * x, grad


x, y = tf.constant(2.0), tf.constant(3.0)
with tf.GradientTape() as tape:
    tape.watch([x, y])
    z = mul(x, y)
print(tape.gradient(z, [x, y]))
"""

FINE = """import tensorflow as tf


@tf.custom_gradient
def triple(x):
    def grad(upstream):
        return 3 * upstream
    return 3 * x, grad
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    work = tmp_path_factory.mktemp("imp")
    (work / "demo.py").write_text(DEMO)
    (work / "fine.py").write_text(FINE)
    return work


def _run_with_tty_stderr(args, cwd):
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "cglint", *args], cwd=cwd, env=ENV, stdout=subprocess.PIPE,
                            stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    terminal = read_terminal(master)
    stdout = proc.stdout.read().decode()
    proc.wait(timeout=600)
    os.close(master)
    return proc.returncode, stdout, terminal.decode(errors="replace")


@pytest.fixture(scope="module")
def tty_run(project):
    return _run_with_tty_stderr(["--runtime=all", "--output-format", "json", "."], project)


@pytest.fixture(scope="module")
def pipe_run(project):
    return subprocess.run([sys.executable, "-m", "cglint", "--runtime=all", "."], cwd=project, env=ENV,
                          capture_output=True, text=True, timeout=600)


def test_import_time_gradient_count_error_is_an_error_verdict(tty_run):
    rc, stdout, _ = tty_run
    assert rc == 1
    verdicts = {r["function"]: r for r in json.loads(stdout)["runtime"]}
    mul = verdicts["mul"]
    assert mul["verdict"] == "error", mul
    assert mul["detail"].startswith(
        "ValueError: custom_gradient function expected to return 2 gradients, but returned 1 instead.")
    # The module's other function was not in the traceback: the failed import skips it.
    assert verdicts["double"]["verdict"] == "skipped"
    assert verdicts["double"]["detail"].startswith("import failed: ValueError")
    assert verdicts["triple"]["verdict"] == "match"


def test_progress_per_module_on_a_terminal(tty_run):
    _, _, stderr = tty_run
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", stderr)  # drop the terminal control sequences
    assert re.search(r"runtime .*2/2 modules \d:\d\d:\d\d", text), stderr
    assert "demo.py" in text or "fine.py" in text


def test_no_progress_when_stderr_is_not_a_terminal(pipe_run):
    assert pipe_run.returncode == 1
    assert pipe_run.stderr == ""
    assert "demo.py:4: mul: error: ValueError: custom_gradient function expected to return 2 gradients" in \
        pipe_run.stdout
    assert "= runtime: confirmed: ValueError: custom_gradient function expected" in pipe_run.stdout  # CG007


def test_an_import_time_demo_failing_outside_the_custom_gradients_leaves_them_checkable(tmp_path):
    """The demo feeds a float16 tensor and a float32 one to a multiply; the failure passes through
    no custom gradient: the module's statements run one by one, the one that raises passed over,
    and its functions are checked (this one's gradient is right)."""
    from cglint.runtime import child

    path = tmp_path / "demo16.py"
    path.write_text(FINE + "\nprint(triple(tf.constant(1.0, tf.float16)) * tf.constant(2.0))\nLATER = 1\n")
    request, results = tmp_path / "request.json", tmp_path / "results.jsonl"
    request.write_text(json.dumps({"module_path": str(path), "functions": [{"function": "triple"}]}))
    child.main([str(request), str(results)])  # the child's own entry, in this process
    events = [json.loads(line) for line in results.read_text().splitlines()]
    assert events[0]["imported"] is True and events[0]["partial"].startswith("the module's import raised")
    r = events[1]["result"]
    assert r["verdict"] == "match", r
    assert r["detail"].endswith("(the module's import raised InvalidArgumentError: cannot compute Mul as input "
                                "#1(zero-based) was expected to be a half tensor but is a float tensor [Op:Mul] name:; "
                                "checked with its other statements run)"), r["detail"]
