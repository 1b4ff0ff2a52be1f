"""Every fixture in fixtures/runtime/ through the runtime path `cglint --runtime=all` takes (the
static plan, the child's input search, check_gradient), in this process to share one
TensorFlow import: the verdict, the detail and the inputs the search found are pinned."""

import os
from pathlib import Path

import pytest
import tensorflow as tf

from cglint.engine import lint_file
from cglint.runtime import check_gradient
from cglint.runtime.child import check_one, import_by_path
from cglint.runtime.plan import plan_file

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "runtime"

# fixture -> (function, verdict, detail start, inputs the plan or search chose, modes)
EXPECTED = {
    "silu_beta.py": ("swish", "mismatch",
                     "d/beta has shape () but beta has shape (3,): a broadcast-collapsed gradient",
                     "normal(4, 3), uniform(3, low=0.5, high=1.5)", {"tf.function": "mismatch"}),
    "layer_norm_swap.py": ("layer_norm", "mismatch",
                           "gradients do not follow the order of variables: hard-coded order",
                           "normal(2, 8)", {"tf.function": "mismatch"}),
    "softplus_second_order.py": ("softplus", "mismatch",
                                 "second derivative: d/x off by", "normal(2, 3)",
                                 {"eager": "match", "second-order": "mismatch"}),
    "sign_grad_jvp.py": ("sign_backward", "intentional", "declared intentional: d/x off by",
                         "normal(2, 3)", {"forward": "mismatch"}),
    "complex_mul.py": ("modulate", "mismatch", "with complex inputs: d/w off by",
                       "normal(2, 3), normal(2, 3)", {"eager": "match", "complex": "mismatch"}),
    "scaled_tanh_int.py": ("scaled_tanh", "mismatch",
                           "integer input gain: TensorFlow drops the gradient the grad fn returns",
                           "module:FEATURES, module:GAIN", {"eager": "match"}),
    "logsumexp_underflow.py": ("log_marginal", "mismatch",
                               "d/scores is not finite (nan at 3 of 6 elements) where autodiff "
                               "is finite", "module:SCORES", {"eager": "mismatch"}),
    "clip_norm_op.py": ("clip_gradient", "intentional", "gradient clipping (x): matches autodiff",
                        "normal(2, 3), uniform(low=0.5, high=1.5)", {"eager": "intentional"}),
    "dense_random_init.py": ("dense_tanh", "match", "matches autodiff to", "normal(2, 16)",
                             {"eager": "match", "tf.function": "match"}),
    "keras_add_weight.py": ("dense_gelu", "match", "matches autodiff to",
                            "normal(2, 12), normal(12, 5), normal(5)", {"tf.function": "match"}),
    "varargs_sum.py": ("fused_residual", "match", "matches autodiff to",
                       "normal(2, 3), normal(2, 3), normal(2, 3)", {"eager": "match"}),
    "grad_multiplier.py": ("scale_gradient", "intentional",
                           "gradient reversed and scaled by 0.3: custom = -0.3 x autodiff for x",
                           "normal(2, 3), float(-0.3)", {"eager": "intentional"}),
    # Made inside a method: the child builds the class and calls it under trace's instrumentation.
    "keras_layer_call.py": ("dense_softsign", "mismatch", "d/softsign/variable off by 9.2% vs autodiff; d/x off by 9%",
                            "normal(2, 3)",
                            {"eager": "mismatch", "tf.function": "mismatch"}),
    # Made by a decorator factory: reached through the module's own application of it.
    # Named as the user calls it: the application, not the factory's inner `op`.
    "decorator_factory.py": ("softsign", "mismatch", "d/x off by", "normal(2, 3)", {"eager": "mismatch"}),
    "wraps_factory_pair.py": ("soft_gate", "mismatch", "d/x off by 12% vs autodiff", "normal(2, 3)",
                              {"eager": "mismatch"}),
    # Inputs from what the forward does with them: unpacked along an axis, complex beside real,
    # operands of a matrix product, a module weight initialised as `stateless_normal(...) * 0.3`.
    "dict_output_heads.py": ("negbin_head", "mismatch", "d/raw off by 250% vs autodiff", "normal(2, 2)",
                             {"eager": "mismatch"}),
    "complex_modulator.py": ("phase_shift", "mismatch", "d/signal off by 144% vs autodiff: the complex conjugate",
                             "normal(2, 3, mean=0.0, stddev=1.0, dtype=complex64), normal(2, 3, mean=0.0, stddev=1.0)",
                             {"eager": "mismatch"}),
    "explicit_weights.py": ("affine_tanh", "match", "matches autodiff to", "normal(2, 3), normal(3, 4), normal(4)",
                            {"tf.function": "match"}),
    "scaled_module_weight.py": ("projected_softsign", "match", "matches autodiff to", "normal(2, 5)",
                                {"tf.function": "match"}),
    # The call site passes a layer's (features,) weight: checked at that rank, not as a batch
    # (where summing over the batch would read as a collapsed gradient).
    "per_feature_weight.py": ("gated_tanh", "match", "matches autodiff to", "normal(2, 3), normal(3)",
                              {"tf.function": "match"}),
    "zero_grad_stop.py": ("frozen_targets", "intentional",
                          "gradient stopped: the grad fn returns zeros for every input (scores, tau)",
                          "normal(2, 3), uniform(low=0.5, high=1.5)", {"tf.function": "intentional"}),
    # Replayed draws: finite differences see the samples the tape recorded.
    "stochastic_rounding.py": ("dither_round", "intentional",
                               "straight-through estimator: autodiff and finite differences give zero for x",
                               "normal(2, 3)", {"eager": "intentional"}),
    # A method that is itself the custom gradient: the child builds the layer and calls it.
    "method_custom_gradient.py": ("PerChannelScale._scale", "mismatch", "d/x off by", "normal(2, 3)",
                                  {"eager": "mismatch"}),
    "module_call.py": ("scale", "match", "matches autodiff to 0", "normal()", {"tf.function": "match"}),
    "structured_inputs.py": ("product", "match", "matches autodiff to", "{'a': normal(2, 3), 'b': normal(2, 3)}",
                             {"eager": "match"}),
    "user_decorators.py": ("cube", "mismatch", "d/x off by 33% vs autodiff", "normal(2, 3)", {"eager": "mismatch"}),
    "tf_function_inside.py": ("fast_gelu", "error",
                              "the forward fails on every input: TypeError: To be compatible with "
                              "tf.function", None, None),
}


# What the static rules say about the same modules (fixtures/ is linted as a whole by
# tests/test_cli.py and tests/test_flake8.py): most of these bugs are only visible at runtime.
# grad_multiplier.py passes a Python float beside float32 inputs: converted to float32, which
# works eagerly and under tf.function (TF 2.21), so CG015 says nothing (DESIGN.md, "Evidence").
STATIC = {"layer_norm_swap.py": {"CG006"}, "tf_function_inside.py": {"CG001", "CG019"},
          # its bug, softsign's derivative at the output, is found statically by the evaluated maths too
          "keras_layer_call.py": {"CG005"},
          # wrong derivatives found by the evaluated maths (CG019): a wrong second derivative,
          # 2x^2 for x^3's, and sigmoid(1.702x) for the tanh GELU's derivative
          "softplus_second_order.py": {"CG019"}, "user_decorators.py": {"CG019"},
          "method_custom_gradient.py": {"CG019"}}  # d/x without the gain


def test_every_runtime_fixture_has_an_expectation():
    assert {p.name for p in FIXTURES.glob("*.py")} == set(EXPECTED)


def test_static_findings_on_the_runtime_fixtures():
    found = {p.name: {d.code for d in lint_file(str(p)).diagnostics} for p in FIXTURES.glob("*.py")}
    assert {name: codes for name, codes in found.items() if codes} == STATIC


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_verdict(name):
    function, verdict, detail, inputs, modes = EXPECTED[name]
    path = str(FIXTURES / name)
    result = lint_file(path)
    (planned,) = [p for p in plan_file(result, everything=True) if p.request["function"] == function]
    assert planned.skip is None
    module = import_by_path(path)
    got = check_one(module, result.source, planned.request, seed=0)
    shown = f"{name}: {got['verdict']} | {got['detail']} | inputs {got.get('inputs')} | {got.get('modes')}"
    assert got["verdict"] == verdict, shown
    assert got["detail"].startswith(detail), shown
    assert got.get("inputs") == inputs, shown
    for mode, v in (modes or {}).items():
        assert got["modes"][mode] == v, shown
    assert "0x" not in got["detail"], shown  # no object addresses: the same text every run


def test_forward_mode_difference_is_a_mismatch_when_order_2_is_asked_for():
    module = import_by_path(str(FIXTURES / "sign_grad_jvp.py"))
    x = tf.constant([[0.3, -1.2, 0.7], [1.4, 0.1, -0.6]])
    r = check_gradient(module.sign_backward, x, intentional=True, order=2)
    assert r.verdict == "mismatch", r.detail
    assert r.detail.startswith("forward mode (tf.autodiff.ForwardAccumulator): JVP of y off by "
                               "100% vs autodiff: TensorFlow builds forward-mode JVPs by "
                               "transposing the grad fn"), r.detail
    # A deliberately different first derivative makes the second differ too: not compared.
    assert r.modes["forward"] == "mismatch" and "second-order" not in r.modes


def test_correct_higher_order_pattern_matches_at_order_2():
    @tf.custom_gradient
    def softplus(x):
        def first_order(dy):
            @tf.custom_gradient
            def sigmoid_of(x_):
                s = tf.sigmoid(x_)
                return s, lambda ddy: ddy * s * (1.0 - s)
            return dy * sigmoid_of(x)
        return tf.math.softplus(x), first_order

    r = check_gradient(softplus, tf.constant([-1.5, 0.2, 2.0]), order=2)
    assert r.verdict == "match", r.detail
    assert r.modes == {"eager": "match", "tf.function": "match", "second-order": "match",
                       "forward": "match", "wide": "match"}


def test_a_diluted_wrong_entry_is_found_by_the_float64_rerun():
    # One Jacobian entry 0.1% off among 10^4: under the float32 tolerance, above float32
    # rounding, and ~10^5 times the float64 tolerance.
    n = 10_000
    mask = tf.one_hot(0, n)

    @tf.custom_gradient
    def sin(x):
        return tf.sin(x), lambda dy: dy * tf.cos(x) * (1.0 + 1e-3 * tf.cast(mask, x.dtype))

    x = tf.random.stateless_normal([n], seed=[4, 2]) * 0.1
    r = check_gradient(sin, x)
    assert r.verdict == "mismatch", r.detail
    assert r.detail.startswith("in float64 (the float32 comparison, ") and "d/x off by" in r.detail
    assert check_gradient(sin, x, float64_rerun=False).verdict == "match"
    r = check_gradient(lambda x: (tf.sin(x), lambda dy: dy * tf.cos(x)), x)
    assert r.verdict == "match", r.detail


def test_float32_gradient_for_a_float64_input_and_varargs_names():
    @tf.custom_gradient
    def double(x):
        return 2.0 * x, lambda dy: tf.cast(2.0 * dy, tf.float32)  # TensorFlow accepts it

    r = check_gradient(double, tf.constant([0.5, -1.0], tf.float64))
    assert r.verdict == "mismatch"
    assert r.detail.startswith("d/x is float32 but x is float64: TensorFlow accepts the gradient")

    @tf.custom_gradient
    def total(*parts):
        return tf.add_n(list(parts)), lambda dy: tuple(dy for _ in parts)

    r = check_gradient(total, tf.ones([2]), tf.ones([2]))
    assert r.verdict == "match" and [a.name for a in r.args] == ["parts[0]", "parts[1]"]


def test_python_number_constants_are_not_differentiated():
    EPS = 1e-3

    @tf.custom_gradient
    def safe_sqrt(x, eps):
        y = tf.sqrt(x + eps)
        return y, lambda dy: (dy * 0.5 / y, None)

    r = check_gradient(safe_sqrt, tf.constant([0.5, 2.0]), EPS)
    assert r.verdict == "match" and [a.name for a in r.args] == ["x"], r.detail
    # The same value as a tensor is an input TensorFlow differentiates: its None is reported.
    r = check_gradient(safe_sqrt, tf.constant([0.5, 2.0]), tf.constant(EPS))
    assert r.verdict == "intentional" and "gradient stopped" in r.detail, r.detail


os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def test_cli_runtime_order_2_reports_modes_end_to_end():
    # Real child processes, as users run it; the two modules are checked concurrently.
    import json
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "cglint", "--output-format", "json", "--runtime=all",
                          "--runtime-order", "2", "fixtures/runtime/sign_grad_jvp.py",
                          "fixtures/runtime/layer_norm_swap.py"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    by_function = {r["function"]: r for r in json.loads(run.stdout)["runtime"]}
    sign = by_function["sign_backward"]
    assert sign["verdict"] == "mismatch" and sign["detail"].startswith("forward mode"), sign
    assert sign["modes"]["forward"] == "mismatch"
    swap = by_function["layer_norm"]
    assert swap["modes"] == {"eager": "mismatch", "tf.function": "mismatch"}, swap
    assert "under tf.function: gradients swapped between variables" in swap["detail"], swap


def test_cli_runtime_all_checks_custom_gradients_made_in_call_and_dunder_call():
    import json
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "cglint", "--output-format", "json", "--runtime=all",
                          "fixtures/runtime/keras_layer_call.py", "fixtures/runtime/module_call.py"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    by_function = {r["function"]: r["verdict"] for r in json.loads(run.stdout)["runtime"]}
    # Named as the user calls them: the layer's method, then the op it makes (as trace names it).
    assert by_function == {"Softsign.call.<locals>.dense_softsign": "mismatch", "Scale.__call__.<locals>.scale": "match"}


def test_a_class_that_needs_constructor_arguments_says_what_would_check_it(tmp_path):
    path = tmp_path / "needs_args.py"
    # A size will not do: the constructor reads its argument's attributes.
    path.write_text((FIXTURES / "module_call.py").read_text().replace(
        "def __init__(self):\n        self.gain = tf.Variable(2.0)",
        "def __init__(self, config):\n        self.gain = tf.Variable(config.gain)"))
    result = lint_file(str(path))
    (planned,) = plan_file(result, everything=True)
    got = check_one(import_by_path(str(path)), result.source, planned.request, seed=0)
    assert got["verdict"] == "skipped"
    assert got["detail"].startswith("Scale() needs constructor arguments (TypeError: ")
    assert got["detail"].endswith("`cglint trace -- pytest` (or `pytest --cglint`) checks it where your own code "
                                  "builds and calls it")


def test_functions_exported_through_user_decorators_are_checked_under_their_own_names():
    path = str(FIXTURES / "user_decorators.py")
    result = lint_file(path)
    module = import_by_path(path)
    verdicts = {p.request["function"]: check_one(module, result.source, p.request, seed=0)["verdict"]
                for p in plan_file(result, everything=True)}
    assert verdicts == {"cube": "mismatch", "square": "match", "double": "mismatch"}


def test_inputs_built_from_how_the_forward_uses_them():
    path = str(FIXTURES / "structured_inputs.py")
    result = lint_file(path)
    module = import_by_path(path)
    got = {p.request["function"]: check_one(module, result.source, p.request, seed=0)
           for p in plan_file(result, everything=True)}
    assert {name: r["verdict"] for name, r in got.items()} == {"product": "match", "masked_square": "match",
                                                                 "pair": "match"}
    assert got["masked_square"]["inputs"] == "normal(2, 3), normal(2, 3, dtype=bool)"
    assert got["pair"]["inputs"] == "normal(2, 3), normal(2, 3)"


CLOSURES = '''
import tensorflow as tf


def soft_clip(x, limit):
    @tf.custom_gradient
    def _clip(t):
        y = limit * tf.tanh(t / limit)

        def grad(dy):
            return dy * (1.0 - tf.tanh(t / limit) ** 2)

        return y, grad

    return _clip(x)


def make_scaled_softplus(scale):
    @tf.custom_gradient
    def op(x):
        y = scale * tf.nn.softplus(x)

        def grad(dy):
            return dy * scale * tf.sigmoid(y)

        return y, grad

    return op


def make_square(axis=None):
    if axis is None:
        @tf.custom_gradient
        def square(x):
            return x * x, lambda dy: dy * 2.0 * x
    return square


def make_checked_identity(expected):
    @tf.custom_gradient
    def ident(x):
        def grad(dy):
            tf.debugging.assert_equal(dy, expected)
            return dy

        return tf.identity(x), grad

    return ident


def needs_a_config(config):
    @tf.custom_gradient
    def ident(x):
        return tf.identity(x), lambda dy: dy

    return ident(config.scale)
'''


def test_custom_gradients_made_inside_module_functions_are_reached_by_calling_them(tmp_path):
    # A closure over the function's argument, a factory returning the op (TensorFlow 2.21:
    # `make_scaled_softplus(s)(x)` trains with s * sigmoid(y) * dy, autodiff gives s * sigmoid(x) * dy),
    # a factory defining it under `if`, a grad fn asserting on the factory's argument, and a
    # function that cannot be called on tensors.
    path = tmp_path / "closures.py"
    path.write_text(CLOSURES)
    result = lint_file(str(path))
    planned = plan_file(result, everything=True)
    assert [p.skip for p in planned] == [None] * 5
    module = import_by_path(str(path))
    got = {p.request["reach"]["function"]: check_one(module, result.source, p.request, seed=0) for p in planned}
    assert {k: v["verdict"] for k, v in got.items()} == {
        "soft_clip": "match", "make_scaled_softplus": "mismatch", "make_square": "match",
        "make_checked_identity": "skipped", "needs_a_config": "skipped"}
    assert got["make_scaled_softplus"]["detail"].startswith("d/x off by")
    assert got["soft_clip"]["inputs"] == "normal(2, 3), uniform(low=0.5, high=1.5)"  # the outer's inputs
    # An assertion on a made-up argument failing is not the user's bug.
    assert got["make_checked_identity"]["detail"].startswith(
        "raised when make_checked_identity was called on made-up arguments (InvalidArgumentError")
    assert got["needs_a_config"]["detail"].startswith("calling needs_a_config on the inputs tried never reached the "
                                             "custom gradient; the last call raised AttributeError")


DEFAULTS_AND_SIZES = '''
import keras
import tensorflow as tf


@tf.custom_gradient
def grad_reverse(x, scale=1.0):
    return tf.identity(x), lambda dy: -scale * dy


@tf.custom_gradient
def shifted(x, shift=0.0):
    return x + shift, lambda dy: dy


def use(x):
    return grad_reverse(x) + shifted(x, 0.5)


@tf.custom_gradient
def fused_sum(*branches):
    return tf.add_n(branches), lambda dy: dy


class LowRank(keras.layers.Layer):
    def __init__(self, units, rank=2, **kwargs):
        super().__init__(**kwargs)
        self.units, self.rank = units, rank

    def build(self, input_shape):
        self.a = self.add_weight(shape=(input_shape[-1], self.rank), name="a")
        self.b = self.add_weight(shape=(self.rank, self.units), name="b")

    def call(self, x):
        @tf.custom_gradient
        def low_rank(t):
            def grad(dy, variables=None):
                return tf.matmul(dy, tf.matmul(self.a, self.b), transpose_b=True), [tf.zeros_like(v) for v in variables]

            return tf.matmul(tf.matmul(t, self.a), self.b), grad

        return low_rank(x)
'''


def test_inputs_are_what_callers_pass_and_constructors_get_sizes(tmp_path):
    # TensorFlow 2.21: `grad_reverse(x)` has one input (the default is no tensor), so its one
    # gradient is right; passed positionally, `scale` would be a second input needing a gradient.
    # `shifted(x, 0.5)` passes its default, which is then an input. A `*branches` forward
    # returning one gradient fails for two branches ("expected to return 2 gradients"). A layer
    # whose constructor needs `units` is built with a small size; its zero variable gradients differ
    # from autodiff.
    path = tmp_path / "defaults.py"
    path.write_text(DEFAULTS_AND_SIZES)
    result = lint_file(str(path))
    module = import_by_path(str(path))
    got = {p.request["function"]: check_one(module, result.source, p.request, seed=0)
           for p in plan_file(result, everything=True)}
    assert got["grad_reverse"]["verdict"] == "intentional", got["grad_reverse"]
    assert got["grad_reverse"]["inputs"].count("(") == 1
    assert got["shifted"]["verdict"] == "error" and "expected to return 2 gradients" in got["shifted"]["detail"]
    assert got["fused_sum"]["verdict"] == "error" and "expected to return 2 gradients" in got["fused_sum"]["detail"]
    assert got["low_rank"]["verdict"] == "mismatch", got["low_rank"]
    assert "off by 100% vs autodiff" in got["low_rank"]["detail"]


def test_lambda_custom_gradients_made_in_functions_and_methods_are_reached(tmp_path):
    """`tf.custom_gradient(lambda ...)` inside a function or a layer's method: Python names every
    lambda `<lambda>`, so the child tells the custom-gradient one apart by its line, and the
    verdict is named as the user calls it."""
    path = tmp_path / "lambdas.py"
    path.write_text('''import tensorflow as tf


def doubled(x):
    op = tf.custom_gradient(lambda t: (t * 2.0, lambda dy: dy * 3.0))
    return op(x)


class Halve(tf.Module):
    def __call__(self, x):
        f = tf.custom_gradient(lambda t: (t * 0.5, lambda dy: dy * 0.5))
        return f(x)
''')
    result = lint_file(str(path))
    planned = plan_file(result, everything=True)
    assert [(p.request.get("called_as"), p.skip) for p in planned] == [
        ("doubled.<locals>.<lambda>", None), ("Halve.__call__.<locals>.<lambda>", None)]
    module = import_by_path(str(path))
    got = [check_one(module, result.source, p.request, seed=0) for p in planned]
    assert [g["verdict"] for g in got] == ["mismatch", "match"], got
    assert got[0]["detail"].startswith("d/t off by 50% vs autodiff: custom = 1.5 x autodiff")
