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


# ---- Keras 3 weights and data flow ----------------------------------------------------------


def _vars(code):
    (site,) = model(code).sites
    return {(v.name, v.keras, v.trainable, v.exact) for v in site.variables}


KERAS_LAYER = '''
import keras
import tensorflow as tf

class L(keras.layers.Layer):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(2)
        self.alpha = keras.Variable(1.0)
        self.plain = tf.Variable(1.0)

    def build(self, shape):
        self.kernel = self.add_weight(shape=(3,))
        self.frozen = self.add_weight(shape=(3,), trainable=False)

    def call(self, x):
        kernel, bias = self.trainable_weights
        w = self.kernel

        @tf.custom_gradient
        def op(x):
            y = {body}
            return y, lambda dy, variables=None: (dy, [dy for _ in variables])

        return op(x)
'''


@pytest.mark.parametrize(
    "body,expected",
    [
        ("x * self.kernel", {("self.kernel", True, True, True)}),
        ("x * w", {("w", True, True, True)}),  # an alias made in the enclosing method
        ("x * kernel + bias", {("kernel", True, True, True), ("bias", True, True, True)}),  # unpacked
        ("x * self.alpha", {("self.alpha", True, True, True)}),  # keras.Variable
        ("x * self.plain", {("self.plain", False, True, True)}),  # a tf.Variable on a Keras layer
        # Reading the backing variable is reading the weight (keyed as `self.kernel.value.ref()`).
        ("x * self.kernel.value", {("self.kernel", True, True, True)}),
        ("x * self.frozen", {("self.frozen", True, False, True)}),
        ("self.dense(x)", {("self.dense", True, True, False)}),  # a sublayer: weights not listed
    ],
)
def test_keras_weights_through_data_flow(body, expected):
    assert _vars(KERAS_LAYER.replace("{body}", body)) == expected


def test_containers_of_variables_on_a_module():
    code = '''
import tensorflow as tf

class M(tf.Module):
    def __init__(self):
        self.ws = [tf.Variable(1.0), tf.Variable(2.0)]
        self.params = {"w": tf.Variable(1.0), "b": tf.Variable(0.0)}

    def __call__(self, x):
        b = self.params["b"]

        @tf.custom_gradient
        def op(x):
            return x * self.ws[0] + b, lambda dy: dy

        return op(x)
'''
    assert _vars(code) == {("self.ws[0]", False, True, True), ("self.ws[1]", False, True, True),
                           ("b", False, True, True)}


def test_legacy_keras_add_weight_is_a_tf_variable():
    code = KERAS_LAYER.replace("import keras\n", "import keras\nimport tf_keras\n").replace(
        "class L(keras.layers.Layer)", "class L(tf_keras.layers.Layer)").replace("{body}", "x * self.kernel")
    assert _vars(code) == {("self.kernel", False, True, True)}


def test_a_read_sees_the_binding_in_effect():
    m = model('''
import tensorflow as tf

def f(x):
    h = tf.sigmoid(x)
    y = h * x
    h = x
    if y is None:
        h = tf.tan(x)
    g = lambda dy: h
    return x

def g(x):
    x = tf.tan(x)
    return x
''')
    f, g = (s for s in m.root.nested)
    lam = f.nested[0]
    (read,) = [n for n in lam.reads if n.value == "h"]
    # After `h = x` (unconditional) only the later bindings can hold: `x` (the parameter, names
    # are followed), or `tan(x)` from the if; not `sigmoid(x)`.
    held = m.resolve(read, lam)
    assert type(held[0]).__name__ == "Param" and m.module.code_for_node(held[1]) == "tf.tan(x)" and len(held) == 2
    (y_read,) = [n for n in f.reads if n.value == "h"][:1]  # `y = h * x` reads h = sigmoid(x)
    assert [m.module.code_for_node(v) for v in m.resolve(y_read, f)] == ["tf.sigmoid(x)"]
    (arg,) = [n for n in g.reads if n.value == "x"][:1]  # `tf.tan(x)` reads the parameter
    assert [type(v).__name__ for v in m.resolve(arg, g)] == ["Param"]


def test_partial_and_higher_order_grad_fns():
    m = model('''
import functools
import tensorflow as tf

def _grad(dy, x, scale, variables=None):
    return dy * scale * x

@tf.custom_gradient
def op(x):
    return x * x, functools.partial(_grad, x=x, scale=2.0)

@tf.custom_gradient
def cube(x):
    @tf.custom_gradient
    def grad(dy):
        return dy * 3.0 * x * x, lambda ddx: ddx * 3.0 * x * x
    return x * x * x, grad
''')
    op, cube, _inner = m.sites
    (g,) = op.grad_fns
    assert (g.name, g.upstream_params, g.upstream_names, g.accepts_variables) == ("_grad", ["dy"], ["dy"], True)
    (h,) = cube.grad_fns
    # The grad fn's own `(value, grad_grad)` return: TensorFlow receives the value alone.
    assert [m.module.code_for_node(r.value) for r in h.returns] == ["dy * 3.0 * x * x"]
    assert h.returns[0].pair is None


def test_call_arguments_helpers_and_return_pairs():
    from cglint.model import argument, positional_arguments

    m = model('''
import tensorflow as tf

def dtan(a, *, k=1):
    return 1 / tf.square(tf.cos(a))

@tf.custom_gradient
def op(x):
    y = tf.tan(x)
    def grad(dy, *rest, variables=None):
        return dy * dtan(y), [dy]
    return y, grad
''')
    (site,) = m.sites
    (grad,) = site.grad_fns
    call = next(c for c, _ in site.calls() if isinstance(c.func, cst.Name) and c.func.value == "dtan")
    assert m.module.code_for_node(argument(call, 0, "a")) == "y"
    assert argument(call, 1) is None and positional_arguments(call) is not None
    helper = m.helper(call.func, grad.scope)
    assert helper is not None and helper.params == ["a"]
    assert grad.upstream_names == ["dy", "rest"]
    (ret,) = grad.returns
    assert [m.module.code_for_node(e) for e in ret.pair] == ["dy * dtan(y)", "[dy]"]


def test_findings_know_their_site_and_positions_are_computed_once():
    from cglint.engine import lint_source
    from cglint.rules import RULES_BY_CODE

    code = KERAS_LAYER.replace("{body}", "x * self.kernel").replace(
        "lambda dy, variables=None: (dy, [dy for _ in variables])", "lambda dy: dy")
    mod = cst.parse_module(code)
    m = ModuleModel(mod)
    (finding,) = RULES_BY_CODE["CG004"]().check(m)
    assert finding.site is m.sites[0]
    first = m.positions
    assert m.positions is first
    result = lint_source(code, "l.py", [RULES_BY_CODE["CG004"]], prefilter=False)
    assert result.model.positions[result.model.sites[0].forward].start.line == 21  # `@tf.custom_gradient`


def test_a_sublayer_read_for_its_configuration_reads_no_variable():
    assert _vars(KERAS_LAYER.replace("{body}", "tf.reshape(x, (-1, self.dense.units))")) == set()
    assert _vars(KERAS_LAYER.replace("{body}", "x @ self.dense.kernel")) == {("self.dense.kernel", True, True, True)}


def test_call_site_findings_know_the_site_they_call():
    from cglint.rules import RULES_BY_CODE

    m = model("import tensorflow as tf\n\n@tf.custom_gradient\ndef op(x):\n    return x, lambda dy: dy\n\ny = op(x=1.0)\n")
    (finding,) = RULES_BY_CODE["CG010"]().check(m)
    assert finding.site is m.sites[0]


def _called_by_every_site(m: ModuleModel, call: cst.Call, scope) -> object:
    """`site_called_by` as it is defined: the first site under the callee's name that
    `is_reached_by` the call (asking each in turn)."""
    func = call.func
    key = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
    found = next((s for s in m.sites_by_call_name.get(key, ()) if s.is_reached_by(call, scope)), None)
    on_self = isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in ("self", "cls")
    if found is None and not isinstance(func, cst.Name) and not on_self:
        # a callee that is a table entry, a factory's result or a module's attribute: the site
        # when every function it may be is one (`ste_sign(threshold=1.0)(x)`)
        reached = m.sites_reached(func, scope)
        return reached[0] if reached and all(s is not None for s in reached) else None
    return found


CALLERS = '''
import tensorflow as tf
from tensorflow import keras


class Dense(keras.layers.Layer):
    def call(self, inputs):
        @tf.custom_gradient
        def forward(x):
            return x, lambda dy: dy

        return forward(inputs)

    @tf.custom_gradient
    def _op(self, x):
        return x, lambda dy: dy

    def other(self, x):
        return self._op(x) + forward(x)


class Other(keras.layers.Layer):
    def call(self, inputs):
        @tf.custom_gradient
        def forward(x):
            return x, lambda dy: dy

        forward = tf.identity
        return forward(inputs) + self._op(inputs)

    @tf.custom_gradient
    def _op(self, x):
        return x, lambda dy: dy


def _fwd(x):
    return x, lambda dy: dy


op = tf.custom_gradient(_fwd)
again = op
op2 = alias = tf.custom_gradient(_fwd)


def use(x, flag):
    if flag:
        op = tf.custom_gradient(_fwd)
    return op(x) + _fwd(x) + again(x) + alias(x) + op2(x)
'''


def test_site_called_by_answers_as_asking_every_site():
    # The index behind `site_called_by` must give what asking each site under the name gives:
    # on the callers above (shared nested names, methods, rebinding, aliases, branches) and on
    # every fixture and rule example.
    from test_cstwalk import CORPUS

    checked = hits = 0
    for _, code in [("callers", CALLERS), *CORPUS]:
        try:
            m = model(code)
        except cst.ParserSyntaxError:
            continue
        for call, scope in m.all_calls:
            want = _called_by_every_site(m, call, scope)
            assert m.site_called_by(call, scope) is want, cst.Module([]).code_for_node(call)
            checked += 1
            hits += want is not None
    assert checked > 1000 and hits > 50
