"""The runtime planner works from the static model alone: what to check and with which inputs."""

import os
import subprocess
import sys
from pathlib import Path

from cglint.engine import lint_source
from cglint.runtime.plan import plan_file

ROOT = Path(__file__).resolve().parents[1]

MODULE = '''import tensorflow as tf

w = tf.Variable([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
batch = tf.constant([[0.1, 0.2, 0.3]])


# cglint: example x=normal(4, 3) float64
@tf.custom_gradient
def commented(x):
    y = tf.tan(x @ w)
    return y, lambda dy: dy / tf.square(tf.cos(y))


@tf.custom_gradient
def called(x):  # cglint: intentional
    y = tf.tan(x @ w)
    return y, lambda dy, variables=None: (-dy, [-dy for _ in variables])


@tf.custom_gradient
def searched(x):
    return x * 2.0, lambda dy: dy * 2.0


def make():
    @tf.custom_gradient
    def inner(x):
        return tf.tan(x), lambda dy: dy / tf.square(tf.cos(x))
    return inner


class Layer:
    @tf.custom_gradient
    def call(self, x):
        return x, lambda dy: dy


mul = tf.custom_gradient(lambda x: (x, lambda dy: dy))
out = called(batch)
'''


def plans(everything):
    return {p.request["function"]: p for p in plan_file(lint_source(MODULE, "m.py"), everything)}


def test_flagged_mode_plans_only_functions_with_findings():
    flagged = plans(False)
    assert set(flagged) == {"commented"}
    assert {d.code for d in flagged["commented"].diagnostics} == {"CG004", "CG005"}


def test_inputs_come_from_example_comment_then_call_site_then_search():
    every = plans(True)
    assert every["commented"].request["inputs"] == "x=normal(4, 3) float64"
    assert every["called"].request["inputs"] == "module:batch"
    assert every["called"].request["intentional"] is True
    assert "inputs" not in every["searched"].request
    assert every["searched"].request["shapes"] == [[3, 2], [1, 3]]


def test_reachability():
    every = plans(True)
    # Made inside a function: the child calls `make` and checks `inner` where that reaches it.
    assert every["inner"].skip is None
    assert every["inner"].request["reach"] == {"function": "make", "site": "inner", "qualname": "make.<locals>.inner"}
    # A method that is itself the custom gradient needs an instance: the child builds the class.
    assert every["Layer.call"].skip is None
    assert every["Layer.call"].request["reach"] == {"class": "Layer", "method": "call", "qualname": "Layer.call",
                                                    "direct": True}
    assert every["mul"].skip is None


def test_planning_does_not_import_tensorflow():
    # In a fresh interpreter: other tests in this process may have imported TensorFlow.
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import test_runtime_plan as t; t.plans(True); "
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'")
    run = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert run.returncode == 0, run.stderr


def test_spec_language_dicts_and_boolean_masks():
    from cglint.runtime.spec import parse_spec, roles

    (d,) = parse_spec("features={'a': normal(2, 3), 'b': uniform(3, low=0.5, high=1.5)}")
    assert d.kind == "dict" and d.name == "features"
    assert {k: (v.kind, v.shape) for k, v in d.value.items()} == {"a": ("normal", (2, 3)), "b": ("uniform", (3,))}
    (m,) = parse_spec("normal(2, dtype=bool)")
    assert m.dtype == "bool"
    source = "def f(x, mask, feats):\n    return tf.where(mask, x, feats['k'] * ~mask), None\n"
    assert roles(source, "f") == {"mask": "bool", "feats": ("k",)}
    lam = "pair = logged(tf.custom_gradient(lambda a, b: (a * b, None)))\n"
    from cglint.runtime.spec import parameters

    assert parameters(lam, "pair") == ["a", "b"]


# A custom gradient made in a class defined inside a function: nothing at module level builds it.
NESTED = '''import tensorflow as tf


def make_clip(limit):
    class Clip:
        def __call__(self, x):
            return tf.custom_gradient(lambda t: (tf.clip_by_value(t, -limit, limit), lambda dy: dy * tf.math.cos(t)))(x)

    return Clip()
'''


def test_every_skipped_says_what_would_check_it_with_the_command(tmp_path):
    from cglint.gradcheck.report import next_step

    (tmp_path / "layer.py").write_text(NESTED)
    run = subprocess.run([sys.executable, "-m", "cglint", "--isolated", "--no-cache", "--runtime=all",
                          "--output-format", "json", "--output-file", "report.json", "layer.py"],
                         capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr
    import json

    (r,) = json.loads((tmp_path / "report.json").read_text())["runtime"]
    assert (r["function"], r["verdict"]) == ("<lambda>", "skipped")
    assert r["detail"] == ("nested inside another function: not reachable by import; to check it: "
                           "`cglint trace -- pytest tests/` (or `pytest --cglint`) checks it where your code calls it")
    # Each reason the runtime skips for names its way forward.
    for reason, wanted in [
        ("no inputs could be built: the forward failed on all 4 candidates", "# cglint: example x=normal(2, 3)"),
        ("inconclusive for x: autodiff is not finite", "`cglint trace -- pytest tests/`"),
        ("a lambda with no module-level name", "`pytest --cglint`"),
        ("timed out after 120s", "`--runtime-timeout`"),
        ("out of memory: the module exhausted memory; MemoryError", "`memory-limit` in [tool.cglint.runtime]"),
        ("import failed: RuntimeError: no GPU here", "make the module importable"),
        ("child exited with code 3", "`cglint trace -- pytest tests/`"),
    ]:
        detail = next_step(reason, "runtime", "m.py")
        assert detail.startswith(reason + "; to check it: ") and wanted in detail, detail
        assert next_step(detail, "runtime") == detail  # said once
    child_hint = "C() needs constructor arguments; `cglint trace -- pytest` (or `pytest --cglint`) checks it"
    assert next_step(child_hint, "runtime") == child_hint  # the child's own hint is not doubled
    traced = next_step("the forward creates a tf.Variable on every call", "trace", "m.py")
    assert traced.endswith("to check it: create the variable once outside the forward (CG011), then run the command again")


def test_modules_in_mixed_precision_ask_for_a_half_precision_probe():
    src = "import keras\nimport tensorflow as tf\n\n\n@tf.custom_gradient\ndef op(x):\n    return x, lambda dy: dy\n"
    for policy, want in (("mixed_float16", "float16"), ("mixed_bfloat16", "bfloat16"), (None, None)):
        text = src + (f"\nkeras.mixed_precision.set_global_policy('{policy}')\n" if policy else "")
        (planned,) = plan_file(lint_source(text, "m.py"), True)
        assert planned.request.get("half") == want
