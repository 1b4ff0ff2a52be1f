"""`cglint trace`'s report layer: tracer events -> verdicts at def lines, merged with the static
findings of the traced files, in text, JSON and SARIF. The events are the JSON lines the tracer
writes (tests/runtime/test_trace.py produces real ones from real TensorFlow runs)."""

import json
from pathlib import Path

import jsonschema

from cglint.report import Context, render
from cglint.trace import report

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())

# CG004 at the grad fn (line 8): the forward reads `w`, the grad fn takes no `variables`.
SOURCE = """import tensorflow as tf

w = tf.Variable(1.0)


@tf.custom_gradient
def op(x):
    def grad(dy):
        return dy * w
    return x * w, grad


@tf.custom_gradient
def fine(x):
    def grad(dy):
        return 2 * dy
    return 2 * x, grad
"""


def events(path: str) -> list[dict]:
    op = {"path": path, "firstlineno": 6, "qualname": "op"}  # Python counts from the decorator
    fine = {"path": path, "firstlineno": 13, "qualname": "fine"}
    match = {"verdict": "match", "reference": "autodiff", "max_rel_error": 0.0, "detail": "matches autodiff to 0"}
    return [
        {"event": "symbolic", "function": fine, "signature": "(float32[None])", "covered": False,
         "context": "test_x.py::test_fit"},
        {"event": "check", "function": fine, "how": "eager", "signature": "(float32[3])",
         "covers": ["(float32[None])"], "report": match, "context": "test_x.py::test_tape"},
        {"event": "raised", "function": op, "where": "call",
         "message": "TypeError: @tf.custom_gradient grad_fn must accept keyword argument 'variables'",
         "at": path + ":9"},
    ]


def test_events_become_verdicts_at_def_lines_merged_with_static_findings(tmp_path, monkeypatch):
    (tmp_path / "ops.py").write_text(SOURCE)
    monkeypatch.chdir(tmp_path)
    results, runtime = report.build(report.group(events(str(tmp_path / "ops.py"))))
    by_name = {r["function"]: r for r in runtime}
    assert (by_name["op"]["line"], by_name["op"]["verdict"]) == (7, "error")
    assert by_name["op"]["checked"] == "raised while the command ran at ops.py:9"  # the user's line
    fine = by_name["fine"]
    assert (fine["path"], fine["line"], fine["verdict"]) == ("ops.py", 14, "match")
    assert fine["checked"] == ("first called under tf.function with (float32[None]); checked at a later eager "
                               "call with (float32[3])")
    assert fine["tests"] == ["test_x.py::test_fit", "test_x.py::test_tape"]
    (result,) = results
    (finding,) = result.diagnostics
    assert (finding.code, finding.line, finding.runtime["verdict"]) == ("CG004", 8, "error")
    assert report.failing(runtime)
    assert report.summary_line(runtime, 0) == ("cglint trace: 2 custom gradients checked: 1 error, 1 match "
                                               "(the command exited with status 0).")

    text = render("text", results, Context(root=tmp_path, runtime=runtime))
    assert "  = runtime: confirmed: TypeError: @tf.custom_gradient grad_fn must accept" in text
    assert "  ops.py:14: fine: match vs autodiff: matches autodiff to 0\n      (first called under tf.function" in text

    out = json.loads(render("json", results, Context(root=tmp_path, runtime=runtime)))
    assert out["diagnostics"][0]["runtime"]["verdict"] == "error"
    assert [r["function"] for r in out["runtime"]] == ["fine", "op"]

    sarif = json.loads(render("sarif", results, Context(root=tmp_path, runtime=runtime)))
    jsonschema.validate(sarif, SCHEMA, cls=jsonschema.Draft4Validator, format_checker=jsonschema.FormatChecker())
    (run,) = sarif["runs"]
    static, checked = run["results"]
    assert static["ruleId"] == "CG004" and static["properties"]["runtime"]["verdict"] == "error"
    assert checked["ruleId"] == "runtime-check" and checked["locations"][0]["physicalLocation"]["region"] == \
        {"startLine": 7}
    assert run["tool"]["driver"]["rules"][checked["ruleIndex"]]["id"] == "runtime-check"
    assert [r["function"] for r in run["properties"]["runtime"]] == ["fine", "op"]


def test_a_symbolic_call_the_process_never_checked_is_skipped_with_the_reason(tmp_path):
    (tmp_path / "ops.py").write_text(SOURCE)
    fn = {"path": str(tmp_path / "ops.py"), "firstlineno": 13, "qualname": "fine"}
    _, runtime = report.build(report.group([{"event": "symbolic", "function": fn, "signature": "(float32[2])",
                                             "covered": False}]), cwd=tmp_path)
    (r,) = runtime
    assert r["verdict"] == "skipped" and "process ended before cglint's exit check" in r["detail"]
    # ... and what would check it, with the command.
    assert r["detail"].endswith("; to check it: call it eagerly once in the command (an eager call is checked with "
                                "its real inputs), or a `# cglint: example x=normal(2, 3)` comment above its def "
                                "gives `cglint --runtime=all ops.py` its inputs")
    assert not report.failing(runtime)


def test_a_forward_that_raised_in_tensorflow_is_an_error_only_if_no_call_ever_ran(tmp_path):
    """tf.function stacked under the custom gradient raises at every call (its forward returns a
    function): no check can run, and the failure is the verdict. Where another call ran and was
    checked, a failure on some input is the program's business, not the gradient's."""
    (tmp_path / "ops.py").write_text(SOURCE)
    fn = {"path": str(tmp_path / "ops.py"), "firstlineno": 13, "qualname": "fine"}
    raised = {"event": "raised", "function": fn, "where": "forward",
              "message": "TypeError: To be compatible with tf.function, Python functions must return zero or more "
                         "Tensors", "at": str(tmp_path / "ops.py") + ":16"}
    skipped = {"event": "check", "function": fn, "how": "eager", "signature": "(float32[3])", "covers": [],
               "report": {"verdict": "skipped", "detail": "forward raised on these inputs: TypeError: ..."}}
    _, runtime = report.build(report.group([skipped, raised]), cwd=tmp_path)
    (r,) = runtime
    assert r["verdict"] == "error" and r["detail"].startswith(
        "the forward raised at every call the command made: TypeError: To be compatible with tf.function"), r
    match = {**skipped, "report": {"verdict": "match", "reference": "autodiff", "max_rel_error": 0.0,
                                   "detail": "matches autodiff to 0"}}
    _, runtime = report.build(report.group([match, raised]), cwd=tmp_path)
    assert [x["verdict"] for x in runtime] == ["match"]


def test_no_events_says_nothing_was_checked():
    assert report.build([]) == ([], [])
    assert report.summary_line([], 3) == ("cglint trace: no custom gradient was called; nothing was checked "
                                          "(the command exited with status 3).")


def test_the_worst_closure_variant_decides_and_is_named(tmp_path, monkeypatch):
    """The same code closing over other values (a layer used twice) is checked per variant; the
    verdict is the worst one's, and says which values it had."""
    (tmp_path / "ops.py").write_text(SOURCE)
    monkeypatch.chdir(tmp_path)
    fine = {"path": str(tmp_path / "ops.py"), "firstlineno": 13, "qualname": "fine"}
    report_of = {"match": {"verdict": "match", "reference": "autodiff", "max_rel_error": 0.0, "detail": "ok"},
                 "mismatch": {"verdict": "mismatch", "reference": "autodiff", "max_rel_error": 0.75,
                              "detail": "d/x off by 75% vs autodiff"}}
    evs = [{"event": "check", "function": fine, "how": "eager", "signature": "(float32[3])", "covers": [],
            "variant": ["self.built=True", variant], "report": report_of[verdict]}
           for variant, verdict in (("self.power=2.0", "match"), ("self.power=3.0", "mismatch"))]
    _, runtime = report.build(report.group(evs))
    assert [(r["verdict"], r["checked"]) for r in runtime] == [
        ("mismatch", "checked at its first eager call with (float32[3]), where self.power=3.0")]
    _, single = report.build(report.group(evs[1:]))  # one variant: nothing to tell apart
    assert single[0]["checked"] == "checked at its first eager call with (float32[3])"


def test_closure_variants_describe_configuration_not_tensors():
    from cglint.trace.instrument import closure_variant

    class Layer:
        def __init__(self, power):
            self.name, self.power, self.activation, self._cache = f"layer_{power}", power, abs, object()

    class Tensor:  # what the tracer takes for a tensor: the call's input, covered by the signature
        dtype, shape = type("D", (), {"is_floating": True})(), (3,)

    def make(layer, x, mode):
        def f(y):
            return layer, x, mode, y
        return f

    a = closure_variant(make(Layer(2.0), Tensor(), "fast"))
    assert a == ("layer.activation=builtins.abs", "layer.power=2.0", "mode='fast'")  # no name, no private, no tensor
    assert closure_variant(make(Layer(2.0), Tensor(), "fast")) == a  # same configuration, same variant
    assert closure_variant(make(Layer(3.0), Tensor(), "fast")) != a
    assert closure_variant(lambda y: y) == ()

    def converted(ag__, mode):  # a function autograph converted closes over its module of helpers
        def f(y):
            return ag__, mode, y
        return f

    helpers = type("Module", (), {})()
    helpers.converted_call = len
    assert closure_variant(converted(helpers, "fast")) == ("mode='fast'",)


def _wrapper(vjp_fwd, vjp_bwd):
    """The shape of `tfp.math`'s custom_gradient decorator: one generic forward for every function."""
    closure = {}

    def f_wrapped(*args):
        args = [a for i, a in enumerate(args) if i not in closure]
        val, aux = vjp_fwd(*args)
        return val, lambda g: vjp_bwd(aux, g)
    return f_wrapped


def _square_fwd(x):
    return x * x, x


def _exp_fwd(x):
    return x, x


def test_functions_one_wrapper_makes_get_one_entry_each_under_their_own_names():
    from cglint.trace.instrument import Tracer

    tracer = Tracer()
    square, exp = _wrapper(_square_fwd, abs), _wrapper(_exp_fwd, abs)
    a, b = tracer._record(square), tracer._record(exp)
    assert (a.key["qualname"], a.key["firstlineno"]) == ("_square_fwd", _square_fwd.__code__.co_firstlineno)
    assert b.key["qualname"] == "_exp_fwd" and tracer._record(_wrapper(_square_fwd, abs)) is a
    # A forward with its own parameters is its own function, whatever it closes over; so is a
    # wrapper around a library function (the wrapper is the user's code then).
    def make(fn):
        def forward(x):
            return fn(x), None
        return forward

    assert tracer._record(make(_square_fwd)).key["qualname"].endswith("make.<locals>.forward")
    # Named inputs and extra `*args`, calling a closed-over factory (TFP's `_chunked_matmul_cgrad(x1,
    # x2, x, *kernel_args)` builds its kernel by `kernel_fn(*kernel_args)`): its own function too.
    def chunked(kernel_fn):
        def cgrad(x, *kernel_args):
            return kernel_fn(*kernel_args)(x), None
        return cgrad

    assert tracer._record(chunked(_square_fwd)).key["qualname"].endswith("chunked.<locals>.cgrad")
    assert tracer._record(_wrapper(json.dumps, abs)).key["qualname"] == "_wrapper.<locals>.f_wrapped"
    # TensorFlow's own wrappers (`tf.recompute_grad`'s `inner(*args)`) stay library code: unchecked.
    scope: dict = {}
    exec(compile(_WRAPPER_SOURCE, "/venv/lib/site-packages/tensorflow/python/ops/custom_gradient.py", "exec"), scope)
    assert tracer._record(scope["recompute_grad"](_square_fwd)) is None


_WRAPPER_SOURCE = """
def recompute_grad(f):
    def inner(*args):
        return f(*args), None
    return inner
"""


ORDER = """import tensorflow as tf

w = tf.Variable(1.0)
b = tf.Variable(0.5)


@tf.custom_gradient
def op(x):
    def grad(dy, variables=None):
        return dy * w * 3.0, [dy * x, tf.reduce_sum(dy)]
    return x * w + b, grad
"""


def test_a_verdict_confirms_only_findings_with_its_own_symptom(tmp_path, monkeypatch):
    """CG006 (a hard-coded variable order) in a function whose check fails on a wrong input
    derivative: the mismatch is in the report, but it does not "confirm" CG006."""
    (tmp_path / "ops.py").write_text(ORDER)
    monkeypatch.chdir(tmp_path)
    key = {"path": str(tmp_path / "ops.py"), "firstlineno": 7, "qualname": "op"}
    value = {"verdict": "mismatch", "reference": "autodiff", "max_rel_error": 2.0, "detail": "d/x off by 200% vs autodiff"}
    order = {"verdict": "mismatch", "reference": "autodiff", "max_rel_error": 1.0,
             "detail": "gradients do not follow the order of variables: hard-coded order"}
    for verdict, confirmed in ((value, False), (order, True)):
        evs = [{"event": "check", "function": key, "how": "eager", "signature": "(float32[])", "covers": [],
                "report": verdict}]
        results, runtime = report.build(report.group(evs))
        (cg006,) = [d for d in results[0].diagnostics if d.code == "CG006"]
        assert runtime[0]["verdict"] == "mismatch"
        assert (cg006.runtime is not None) is confirmed, verdict["detail"]


def test_symptoms_per_rule():
    from cglint.gradcheck.symptoms import shows

    value = {"verdict": "mismatch", "detail": "d/x off by 35% vs autodiff"}
    raised = {"verdict": "error", "detail": "ValueError: too many values to unpack (expected 2)"}
    graph = {"verdict": "mismatch", "detail": "under tf.function (model.fit) only: d/x off by 10%",
             "modes": {"eager": "match", "tf.function": "mismatch"}}
    dtype = {"verdict": "mismatch", "detail": "d/x is float32 but x is float64: TensorFlow accepts the gradient"}
    assert [shows("CG005", v) for v in (value, raised, graph, dtype)] == [True, False, True, False]
    assert [shows("CG002", v) for v in (value, raised, graph, dtype)] == [False, True, False, False]
    assert [shows("CG012", v) for v in (value, raised, graph, dtype)] == [False, True, True, False]
    assert [shows("CG016", v) for v in (value, raised, graph, dtype)] == [False, False, False, True]
    assert shows("CG006", value) is False
    assert all(shows(code, {"verdict": "match", "detail": "matches autodiff to 0"}) for code in ("CG005", "CG006"))


def test_an_autograph_copy_is_one_entry_with_the_full_name():
    key = {"path": "/p/quantizers.py", "firstlineno": 690}
    full, copy = {**key, "qualname": "DoReFa.call.<locals>.op"}, {**key, "qualname": "call.<locals>.op"}
    other = {**key, "firstlineno": 12, "qualname": "op"}
    check = {"event": "check", "how": "eager", "signature": "(float32[3])",
             "report": {"verdict": "intentional", "detail": "straight-through estimator"}}
    fns = report.group([{**check, "function": copy, "context": "t.py::a"}, {**check, "function": other},
                        {**check, "function": full, "context": "t.py::b"}])
    assert [(f.qualname, f.firstlineno, len(f.checks), f.contexts) for f in fns] == [
        ("DoReFa.call.<locals>.op", 690, 2, ["t.py::b", "t.py::a"]), ("op", 12, 1, [])]
