"""The child-process runner: good modules get verdicts, bad ones cost `skipped`, never a crash.

All modules run concurrently from one fixture: each child pays a TensorFlow import."""

import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from cglint.runtime.runner import run_module_checks

GOOD = '''
import tensorflow as tf

W = tf.Variable([[0.1, 0.2], [0.2, 0.3], [0.3, 0.4]], name="w")
B = tf.Variable([0.1, 0.2], name="b")
BATCH = tf.constant([[0.1, 0.2, 0.3], [0.3, -0.2, 0.1]])


@tf.custom_gradient
def dense_tan(x):
    z = x @ W + B
    y = tf.tan(z)

    def grad(upstream, variables=None):
        g = upstream / tf.square(tf.cos(z))
        by_var = {W.ref(): tf.transpose(x) @ g, B.ref(): tf.reduce_sum(g, 0)}
        return g @ tf.transpose(W), [by_var[v.ref()] for v in variables]
    return y, grad


@tf.custom_gradient
def dense_tan_cos_y(x):
    z = x @ W + B
    y = tf.tan(z)

    def grad(upstream, variables=None):
        g = upstream / tf.square(tf.cos(y))
        by_var = {W.ref(): tf.transpose(x) @ g, B.ref(): tf.reduce_sum(g, 0)}
        return g @ tf.transpose(W), [by_var[v.ref()] for v in variables]
    return y, grad


@tf.custom_gradient
def product(a, b):
    return a * b, lambda dy: (dy * b, dy * a)


class Layer:
    @tf.custom_gradient
    def call(self, x):
        return tf.sin(x), lambda dy: dy * tf.cos(x)

    @staticmethod
    @tf.custom_gradient
    def static_op(x):
        return tf.sin(x), lambda dy: dy * tf.cos(x)
'''

EXIT_AT_IMPORT = "import os\nos._exit(3)\n"
SLEEP_FOREVER = "import time\nwhile True:\n    time.sleep(1)\n"
RAISE_AT_IMPORT = "raise RuntimeError('no GPU here')\n"
SYS_EXIT_AT_IMPORT = "import sys\nsys.exit(4)\n"

SLEEP_TIMEOUT = 15.0


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("mods")
    mods = {"good": GOOD, "exit": EXIT_AT_IMPORT, "sleep": SLEEP_FOREVER,
            "raise": RAISE_AT_IMPORT, "sysexit": SYS_EXIT_AT_IMPORT}
    paths = {}
    for name, src in mods.items():
        paths[name] = d / f"mod_{name}.py"
        paths[name].write_text(textwrap.dedent(src))
    good_functions = [
        {"function": "dense_tan", "line": 9},
        {"function": "dense_tan", "inputs": "x=module:BATCH"},
        {"function": "dense_tan", "inputs": "float64, normal(2, 3)"},
        {"function": "dense_tan_cos_y", "inputs": "uniform(2, 3, low=-1, high=1)"},
        {"function": "dense_tan_cos_y", "inputs": "uniform(2, 3)", "intentional": True},
        {"function": "product", "inputs": "b=constant([1., 2.]), normal(2)"},
        {"function": "product", "inputs": "normal(2"},
        {"function": "Layer.call"},
        {"function": "Layer.static_op", "shapes": [[4]]},
        {"function": "missing"},
    ]
    bad = [{"function": "op"}, {"function": "other"}]
    jobs = {"good": (paths["good"], good_functions, 120.0)}
    jobs.update({k: (paths[k], bad, SLEEP_TIMEOUT if k == "sleep" else 120.0)
                 for k in ("exit", "sleep", "raise", "sysexit")})
    t0 = time.monotonic()
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = {k: pool.submit(run_module_checks, str(p), fs, t) for k, (p, fs, t) in
                   jobs.items()}
        out = {k: f.result() for k, f in futures.items()}
    out["_elapsed"] = time.monotonic() - t0
    return out


def test_good_module_gets_verdicts(results):
    r = results["good"]
    assert len(r) == 10
    assert [x["function"] for x in r][:3] == ["dense_tan"] * 3
    assert r[0]["verdict"] == "match" and r[0]["line"] == 9, r[0]
    assert r[0]["inputs"] == "normal(2, 3)"  # found by the shape search from W's literal
    assert r[1]["verdict"] == "match" and r[1]["inputs"] == "x=module:BATCH", r[1]
    # float64 inputs against float32 variables: the forward cannot run, so no verdict
    assert r[2]["verdict"] == "skipped" and "forward raised" in r[2]["detail"], r[2]
    assert r[3]["verdict"] == "mismatch" and "off by" in r[3]["detail"], r[3]
    assert r[4]["verdict"] == "intentional" and "declared intentional" in r[4]["detail"]
    assert r[5]["verdict"] == "match", r[5]
    assert r[6]["verdict"] == "skipped" and r[6]["detail"].startswith("bad input spec")
    assert r[7]["verdict"] == "skipped" and "needs an instance of Layer" in r[7]["detail"]
    # A (4,) shape in the module: a batch of 4 features first, where reductions show.
    assert r[8]["verdict"] == "match" and r[8]["inputs"] == "normal(2, 4)", r[8]
    assert r[9]["verdict"] == "skipped" and "not reachable by import" in r[9]["detail"]
    assert all(x["path"].endswith("mod_good.py") for x in r)


def test_os_exit_at_import_is_skipped_per_function(results):
    r = results["exit"]
    assert [x["function"] for x in r] == ["op", "other"]
    assert all(x["verdict"] == "skipped" and x["detail"] == "child exited with code 3"
               for x in r), r


def test_hang_is_skipped_after_timeout(results):
    r = results["sleep"]
    assert all(x["verdict"] == "skipped" and x["detail"] == f"timed out after {SLEEP_TIMEOUT:g}s"
               for x in r), r
    assert results["_elapsed"] < SLEEP_TIMEOUT + 100


def test_raise_and_sys_exit_at_import_are_import_failures(results):
    for x in results["raise"]:
        assert x["verdict"] == "skipped"
        assert x["detail"] == "import failed: RuntimeError: no GPU here"
    for x in results["sysexit"]:
        assert x["verdict"] == "skipped"
        assert x["detail"] == "import failed: module called sys.exit(4)"
