"""Runtime isolation against hostile modules (issue 14): each module's failure costs that module
`skipped` with the reason, never another module's verdict; a module named like a standard-library
module affects only itself; static mode never imports or executes linted code.

All children run concurrently from one fixture: each pays a TensorFlow import."""

import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

from cglint.runtime.runner import run_module_checks

SITE = '''
import tensorflow as tf


@tf.custom_gradient
def op(x):
    y = tf.math.tan(x)

    def grad(dy):
        return dy * (1.0 + y * y)

    return y, grad
'''
HOSTILE = {
    "crash": "import ctypes\nctypes.string_at(0)\n" + SITE,  # segmentation fault at import
    "noisy": "import os, sys\nfor _ in range(64):\n    sys.stdout.write('x' * 65536)\n    sys.stderr.write('y' * 65536)\n"
             "sys.stdout.flush()\n" + SITE,
    "hungry": "blob = bytearray(1 << 62)\n" + SITE,  # more memory than any machine has
    "random": SITE,  # named like standard-library modules, next to the others
    "inspect": "import os\n" + SITE + "\nos._exit(3)\n",
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    (d / "good.py").write_text(textwrap.dedent(SITE))
    for name, src in HOSTILE.items():
        (d / f"{name}.py").write_text(src)
    names = ["good", *HOSTILE]
    with ThreadPoolExecutor(len(names)) as pool:
        futures = {n: pool.submit(run_module_checks, str(d / f"{n}.py"), [{"function": "op"}], 240.0) for n in names}
        return {n: f.result()[0] for n, f in futures.items()}


def test_good_module_and_stdlib_named_module_get_their_verdicts(results):
    assert results["good"]["verdict"] == "match", results["good"]
    assert results["random"]["verdict"] == "match", results["random"]  # was: every module skipped


def test_each_hostile_module_costs_only_itself_a_skipped_with_the_reason(results):
    assert results["crash"]["verdict"] == "skipped" and "SIGSEGV" in results["crash"]["detail"]
    assert results["inspect"]["verdict"] == "skipped" and "exited with code 3" in results["inspect"]["detail"]
    assert results["hungry"]["verdict"] == "skipped" and "MemoryError" in results["hungry"]["detail"]
    assert results["noisy"]["verdict"] == "match", results["noisy"]  # megabytes of output change nothing


def test_static_mode_never_imports_the_linted_code(tmp_path):
    marker = tmp_path / "imported"
    (tmp_path / "ops.py").write_text(f"open({str(marker)!r}, 'w').close()\n" + SITE.replace("1.0 + y * y", "tf.cos(y)"))
    for args in ([], ["--fix", "--unsafe-fixes"]):
        run = subprocess.run([sys.executable, "-m", "cglint", "--isolated", *args, "ops.py"], cwd=tmp_path,
                             capture_output=True, text=True)
        assert "Traceback" not in run.stderr
    assert not marker.exists()
