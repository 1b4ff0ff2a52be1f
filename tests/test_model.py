"""The model: which functions are TensorFlow custom-gradient sites and what is known of them."""

import libcst as cst
import pytest

from cglint.model import ModuleModel


def model(code: str) -> ModuleModel:
    return ModuleModel(cst.parse_module(code))


@pytest.mark.parametrize(
    "imports,decorator",
    [
        ("import tensorflow as tf", "tf.custom_gradient"),
        ("import tensorflow", "tensorflow.custom_gradient"),
        ("import tensorflow.compat.v1 as tf", "tf.custom_gradient"),
        ("import tensorflow.compat.v2 as tf", "tf.custom_gradient"),
        ("import tensorflow as tf", "tf.compat.v1.custom_gradient"),
        ("from tensorflow import custom_gradient as cg", "cg"),
        ("from tensorflow.python.ops import custom_gradient", "custom_gradient.custom_gradient"),
        ("from tensorflow.python.ops.custom_gradient import custom_gradient", "custom_gradient"),
    ],
)
def test_tensorflow_spellings_are_sites(imports, decorator):
    m = model(f"{imports}\n\n@{decorator}\ndef op(x):\n    return x, lambda dy: dy\n")
    assert [s.name for s in m.sites] == ["op"]


@pytest.mark.parametrize(
    "code",
    [
        "import jax\n\n@jax.custom_gradient\ndef op(x):\n    return x, lambda dy: dy\n",
        "from tensorflow_probability.python.math import custom_gradient\n"
        "y = custom_gradient(fx=x, gx=g, x=x)\n",
        "import mesh_tensorflow as mtf\n\n@mtf.custom_gradient\ndef op(x):\n    return x, lambda dy: dy\n",
        # Not imported at all: an unrelated local name.
        "def custom_gradient(f):\n    return f\n\n@custom_gradient\ndef op(x):\n    return x, lambda dy: dy\n",
    ],
)
def test_other_custom_gradients_are_not_sites(code):
    assert model(code).sites == []


def test_call_forms_and_lambda_forward():
    m = model(
        "import tensorflow as tf\n"
        "def fwd(x, y):\n    return x * y, lambda dz: (dz * y, dz * x)\n"
        "mul = tf.custom_gradient(fwd)\n"
        "mul2 = tf.custom_gradient(f=fwd)\n"
        "ident = tf.custom_gradient(lambda x: (x, lambda dy: dy))\n"
    )
    assert sorted((s.name, tuple(sorted(s.call_names))) for s in m.sites) == [
        ("<lambda>", ("ident",)),
        ("fwd", ("mul",)),
        ("fwd", ("mul2",)),
    ]
    fwd = next(s for s in m.sites if s.name == "fwd")
    assert fwd.inputs == ["x", "y"] and len(fwd.grad_fns) == 1
    assert fwd.grad_fns[0].upstream_params == ["dz"]
    assert [len(r.elements) for r in fwd.grad_fns[0].returns] == [2]


def test_method_inputs_exclude_self_and_variables_from_add_weight():
    m = model(
        "import tensorflow as tf\n"
        "class L(tf.keras.layers.Layer):\n"
        "    def build(self, shape):\n"
        "        self.k = self.add_weight(shape=())\n"
        "        self.steps = self.add_weight(shape=(), trainable=False)\n"
        "    @tf.custom_gradient\n"
        "    def call(self, x, y):\n"
        "        return x * self.k * self.steps + y, lambda d, variables=None: (d, d, [d])\n"
    )
    (site,) = m.sites
    assert site.name == "L.call" and site.is_method and site.inputs == ["x", "y"]
    assert {v.name: v.trainable for v in site.variables} == {"self.k": True, "self.steps": False}
    assert [v.name for v in site.trainable_variables] == ["self.k"]
    grad = site.grad_fns[0]
    assert grad.accepts_variables and grad.upstream_params == ["d"]


def test_variables_read_by_forward_not_by_grad_fn():
    m = model(
        "import tensorflow as tf\n"
        "w = tf.Variable(1.0)\nv = tf.compat.v1.get_variable('v', shape=())\nu = tf.Variable(2.0)\n"
        "def make():\n    c = tf.Variable(3.0)\n"
        "    @tf.custom_gradient\n"
        "    def op(x):\n"
        "        def helper(a):\n            return a * v\n"
        "        def grad(dy):\n            return dy * u\n"
        "        return helper(x) * w * c, grad\n"
        "    return op\n"
    )
    (site,) = m.sites
    assert sorted(v.name for v in site.variables) == ["c", "v", "w"]


def test_output_count_flattens_literals():
    m = model(
        "import tensorflow as tf\n"
        "@tf.custom_gradient\ndef one(x):\n    return tf.tan(x), lambda d: d\n"
        "@tf.custom_gradient\ndef three(x):\n    y = (x, (2 * x, 3 * x))\n    return y, lambda a, b, c: a\n"
        "@tf.custom_gradient\ndef unknown(x):\n    return helper(x), lambda *d: d[0]\n"
        "@tf.custom_gradient\ndef split(x):\n    return tf.split(x, 2), lambda a, b: a\n"
    )
    counts = {s.name: s.output_count for s in m.sites}
    assert counts == {"one": 1, "three": 3, "unknown": None, "split": None}


def test_bindings_follow_names():
    m = model(
        "import tensorflow as tf\n"
        "@tf.custom_gradient\ndef op(x):\n    z = x * 2\n    y = tf.tan(z)\n    out = y\n    return out, lambda d: d\n"
    )
    (site,) = m.sites
    (value,) = m.resolve(cst.Name("out"), site.scope)
    assert m.qualname(value.func) == "tensorflow.tan"


def test_grad_fn_signature_questions():
    m = model(
        "import tensorflow as tf\n"
        "@tf.custom_gradient\ndef op(x, y, scale=2.0):\n"
        "    def grad(d1, d2=None, variables=None):\n        return d1, d1, None\n"
        "    return (x, y), grad\n"
        "@tf.custom_gradient\ndef kw(x):\n    return x, lambda d, **extra: (d, [d for _ in extra['variables']])\n"
        "@tf.custom_gradient\ndef pos_vars(x):\n    return x, lambda d, variables: (d, [])\n"
    )
    op, kw, pos_vars = m.sites
    assert (op.required_inputs, len(op.inputs)) == (2, 3)
    g = op.grad_fns[0]
    assert g.upstream_params == ["d1", "d2"] and g.required_upstream == 1
    assert g.variables_param == "variables" and not g.reads("variables") and g.reads("d1")
    assert kw.grad_fns[0].variables_param == "extra" and kw.grad_fns[0].reads("extra")
    # `variables` is passed by keyword, so even without a default it is not an upstream gradient.
    assert pos_vars.grad_fns[0].upstream_params == ["d"]


def test_flat_count_counts_none_entries():
    m = model("import tensorflow as tf\n@tf.custom_gradient\ndef op(x, y):\n    return x, lambda d: (d, None)\n")
    (site,) = m.sites
    assert m.flat_count(site.grad_fns[0].returns[0].value, site.grad_fns[0].scope) == 2


@pytest.mark.parametrize(
    "expr,stop",
    [
        ("None", True), ("0.0", True), ("tf.zeros_like(x)", True), ("(None, tf.zeros([3]))", True),
        ("[None] * 3", True), ("[tf.zeros_like(v) for v in vs]", True), ("1.0", False),
        ("(None, x)", False), ("tf.ones_like(x)", False),
    ],
)
def test_is_no_gradient(expr, stop):
    from cglint.model import is_no_gradient

    m = model(f"import tensorflow as tf\ndef f(x, vs):\n    return {expr}\n")
    scope = m.root.nested[0]
    assert is_no_gradient(m, scope.returns[0].value, scope) is stop


def test_calls_that_reach_a_site_and_forwarded_calls():
    m = model(
        "import tensorflow as tf\n"
        "@tf.custom_gradient\ndef op(x):\n    return x, lambda d: d\n"
        "def fwd(x):\n    return x, lambda d: d\n"
        "wrapped = tf.custom_gradient(fwd)\n"
        "a = op(1.0)\nb = wrapped(1.0)\nc = fwd(1.0)\n"
        "def shadow(op):\n    return op(1.0)\n"
        "y, g = fwd(2.0)\nz = fwd(3.0)[0]\n"
    )
    by_call = {}
    for call, scope in m.all_calls:
        name = call.func.value if isinstance(call.func, cst.Name) else None
        by_call.setdefault(name, []).append([s.name for s in m.sites if s.is_reached_by(call, scope)])
    assert by_call["op"] == [["op"], []]  # the parameter `op` in shadow() is not the site
    assert by_call["wrapped"] == [["fwd"]]
    assert by_call["fwd"] == [[], [], []]  # the undecorated forward itself is a plain call
    forwarded = [c for c, _ in m.all_calls if id(c) in m.forwarded_calls]
    assert [m.module.code_for_node(c) for c in forwarded] == ["op(1.0)", "fwd(2.0)", "fwd(3.0)"]
