"""Runtime isolation against hostile modules (issue 14): each module's failure costs that module
`skipped` with the reason, never another module's verdict; a module named like a standard-library
module affects only itself; static mode never imports or executes linted code.

All children run concurrently from one fixture: each pays a TensorFlow import."""

import json
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


# A memo that never forgets, in the forward; lookup tables built at import. Both allocate in a
# loop until the child's memory limit stops them (np.zeros: the pages are not written, so without
# a limit the loop ends at 64 GiB of address space, not with the machine out of memory).
LEAKY_FORWARD = '''
import numpy as np
import tensorflow as tf

_seen = []


@tf.custom_gradient
def op(x):
    while len(_seen) < 256:
        _seen.append(np.zeros(1 << 25))  # 256 MiB a step
    y = tf.math.tan(x)

    def grad(dy):
        return dy * (1.0 + y * y)

    return y, grad
'''
LEAKY_IMPORT = "import numpy as np\n\nTABLES = []\nwhile len(TABLES) < 256:\n    TABLES.append(np.zeros(1 << 25))\n" + SITE
WRONG = SITE.replace("1.0 + y * y", "tf.cos(y)")


def test_a_module_that_exhausts_the_memory_limit_is_skipped_and_its_neighbours_get_verdicts(tmp_path):
    """`memory-limit` in [tool.cglint.runtime] caps each module's child (RLIMIT_DATA): the
    module that runs out of memory, in its forward or at import, is one `skipped` saying so
    (not an `error`: its gradient was never shown wrong); the others are checked as usual."""
    (tmp_path / "pyproject.toml").write_text("[tool.cglint.runtime]\nmemory-limit = 1536\n")
    for name, src in {"good": SITE, "wrong": WRONG, "leaky": LEAKY_FORWARD, "tables": LEAKY_IMPORT}.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(src))
    run = subprocess.run([sys.executable, "-m", "cglint", "--runtime=all", "--output-format", "json", "."],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert "Traceback" not in run.stderr, run.stderr
    verdicts = {r["path"]: r for r in json.loads(run.stdout)["runtime"]}
    assert verdicts["good.py"]["verdict"] == "match", verdicts["good.py"]
    assert verdicts["wrong.py"]["verdict"] == "mismatch", verdicts["wrong.py"]
    for name in ("leaky.py", "tables.py"):
        assert verdicts[name]["verdict"] == "skipped", verdicts[name]
        assert "out of memory: the module exhausted the runtime memory limit (1536 MiB" in verdicts[name]["detail"]
        assert "MemoryError" in verdicts[name]["detail"]
    assert verdicts["tables.py"]["detail"].startswith("import failed: out of memory")
    assert run.returncode == 1  # the mismatch

