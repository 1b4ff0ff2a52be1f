"""CG011 variable-created-inside."""

from typing import Iterator

from cglint.diagnostics import Finding
from cglint.model import GradientSite
from cglint.rules.base import Invalid, Rule


class VariableCreatedInside(Rule):
    """
    ## What it does
    Flags `tf.Variable(...)`, `tf.compat.v1.get_variable(...)` and `.add_weight(...)` calls
    inside a custom-gradient forward or its grad fn. Creating a variable once and storing it
    on `self` (the lazy `if self.v is None: self.v = tf.Variable(...)` pattern) is left alone,
    also through another name for the object the closure captures (`module = self`) when an
    `if` testing that attribute guards it.

    ## Why is this bad?
    The forward runs on every call, so a variable created there is a new variable each
    step: its value is reset every time, and it is never among the model's trainable
    variables, so its "training" does nothing. Under `tf.function` (and so in `model.fit`)
    TensorFlow refuses it outright: `ValueError: tf.function only supports singleton
    tf.Variables created on the first call.` Create the variable once, outside (in
    `__init__`/`build` or at module level), and read it in the forward.
    """

    code = "CG011"
    name = "variable-created-inside"
    summary = "`tf.Variable(...)` created inside the custom-gradient forward"

    INVALID = [
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def scale(x):
    w = tf.Variable(2.0)

    def grad(dy, variables=None):
        return dy * w, [tf.reduce_sum(dy * x)]

    return x * w, grad
''',
            at="6:9"),
        Invalid(
            '''
import tensorflow as tf

class Gate(tf.keras.layers.Layer):
    @tf.custom_gradient
    def call(self, x):
        k = self.add_weight(shape=(), initializer="ones")

        def grad(dy, variables=None):
            return dy * k, [tf.reduce_sum(dy * x)]

        return x * k, grad
''',
            at="7:13"),
        Invalid(
            '''
import tensorflow.compat.v1 as tf

@tf.custom_gradient
def biased(x):
    b = tf.get_variable("b", shape=(), initializer=tf.zeros_initializer())

    def grad(dy, variables=None):
        return dy, [tf.reduce_sum(dy)]

    return x + b, grad
''',
            at="6:9"),
        Invalid(
            '''
import tensorflow as tf


@tf.custom_gradient
def stochastic_round(x):
    rng = tf.random.Generator.from_non_deterministic_state()
    y = tf.floor(x + rng.uniform(tf.shape(x)))

    def grad(dy):
        return dy

    return y, grad
''',
            at="7:11"),
    ]
    VALID = [
        '''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scale(x):
    def grad(dy, variables=None):
        return dy * w, [tf.reduce_sum(dy * x)]

    return x * w, grad
''',
        '''
import tensorflow as tf

class Gate(tf.keras.layers.Layer):
    def build(self, shape):
        self.k = self.add_weight(shape=(), initializer="ones")

    @tf.custom_gradient
    def call(self, x):
        def grad(dy, variables=None):
            return dy * self.k, [tf.reduce_sum(dy * x)]

        return x * self.k, grad
''',
        '''
import tensorflow as tf

class Lazy(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = None

    @tf.custom_gradient
    def __call__(self, x):
        if self.w is None:
            self.w = tf.Variable(2.0)

        def grad(dy, variables=None):
            return dy * self.w, [tf.reduce_sum(dy * x)]

        return x * self.w, grad
''',
        # Made once, on the first call, on the module the closure captures; non-trainable running
        # statistics (TensorFlow 2.21: eager and under tf.function, one variable, updated in place).
        '''
import tensorflow as tf

class RunningCentre(tf.Module):
    def __init__(self, momentum=0.99):
        super().__init__()
        self.momentum = momentum
        self.mean = None

    def __call__(self, x):
        module = self

        @tf.custom_gradient
        def centre(x):
            batch_mean = tf.reduce_mean(x, axis=0)
            if module.mean is None:
                module.mean = tf.Variable(batch_mean, trainable=False)
            else:
                module.mean.assign(module.momentum * module.mean + (1.0 - module.momentum) * batch_mean)
            return x - module.mean, lambda dy: dy

        return centre(x)
''',
        # TF1 graph code: under `variable_scope(reuse=AUTO_REUSE)` the first call creates the
        # variable and later calls share it (Session gradients match autodiff, TF 2.21)
        '''
import tensorflow as tf
import tensorflow.compat.v1 as tf1


@tf.custom_gradient
def film(h, cond):
    with tf1.variable_scope("film", reuse=tf1.AUTO_REUSE):
        w = tf1.get_variable("w", shape=[3, 4])
    gamma = tf.matmul(cond, w)

    def grad(dy, variables=None):
        return (dy * gamma, tf.matmul(dy * h, w, transpose_b=True)), [tf.matmul(cond, dy * h, transpose_a=True)]

    return h * gamma, grad


def build():
    tf1.disable_eager_execution()
    h = tf1.placeholder(tf.float32, [None, 4])
    cond = tf1.placeholder(tf.float32, [None, 3])
    return film(h, cond) + film(h, cond)
''',
    ]

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        model = site.model
        cls = site.scope.enclosing_class()
        kept_on_self = {id(v) for values in cls.attributes.values() for v in values} if cls is not None else set()
        for call, _ in site.calls():
            if id(call) in kept_on_self or _kept_outside(site, call):
                continue
            if model.is_variable_call(call) and not _reused(site, call):
                yield Finding(
                    call,
                    f"a variable is created inside the custom-gradient forward `{site.name}`: it is a new variable "
                    "on every call (reset each step, never trained), and under tf.function TensorFlow raises "
                    "'only supports singleton tf.Variables created on the first call'; create it once outside",
                )
            elif model.qualname(call.func) in VARIABLE_MAKERS:
                yield Finding(
                    call,
                    f"`{model.qualname(call.func)}` inside the custom-gradient forward `{site.name}` creates a "
                    "variable (the generator's state) on every call: under tf.function TensorFlow raises 'only "
                    "supports singleton tf.Variables created on the first call' (TF 2.21), and eagerly each call "
                    "starts a fresh stream; create it once outside",
                )


# Objects whose construction creates a tf.Variable (their state), verified on TF 2.21: made in a
# custom-gradient forward under tf.function they raise "only supports singleton tf.Variables".
VARIABLE_MAKERS = frozenset({
    "tensorflow.random.Generator", "tensorflow.random.Generator.from_seed",
    "tensorflow.random.Generator.from_non_deterministic_state", "tensorflow.random.Generator.from_key_counter",
    "tensorflow.random.Generator.from_state", "tensorflow.random.experimental.Generator",
    "tensorflow.random.experimental.Generator.from_seed",
    "tensorflow.random.experimental.Generator.from_non_deterministic_state",
})
def _reused(site: GradientSite, call) -> bool:
    """`get_variable(...)` under `variable_scope(..., reuse=AUTO_REUSE or True)`: in the TF1 graphs
    such code builds, the first call creates the variable and later ones reuse it, so the forward
    shares one variable (TF 2.21, Session gradients match autodiff). Whether the module is also
    run eagerly, where each call would make a fresh one, the code here does not show: no claim."""
    import libcst as cst

    model = site.model
    if not (model.qualname(call.func) or "").endswith("get_variable"):
        return False
    node = model.parent(call)
    while node is not None and node is not site.forward:
        if isinstance(node, cst.With):
            for item in node.items:
                scope_call = item.item
                if isinstance(scope_call, cst.Call) and (model.qualname(scope_call.func) or "").endswith("variable_scope"):
                    reuse = next((a.value for a in scope_call.args if a.keyword is not None
                                  and a.keyword.value == "reuse"), None)
                    if reuse is not None and ((model.qualname(reuse) or "").endswith("AUTO_REUSE")
                                              or isinstance(reuse, cst.Name) and reuse.value == "True"):
                        return True
        node = model.parent(node)
    return False


def _kept_outside(site: GradientSite, call) -> bool:
    """`obj.attr = tf.Variable(...)` where `obj` is not the forward's own local (`self` under
    another name, a module object the closure captures) or a `global`/`nonlocal` name: the
    variable outlives the call, the lazy-creation idiom (made on the first call, as tf.function
    allows; TensorFlow 2.21 ran `if m.mean is None: m.mean = tf.Variable(...)` in a forward
    eagerly and under tf.function)."""
    import libcst as cst

    model = site.model
    node = model.parent(call)
    if not isinstance(node, cst.Assign):
        return False
    own = model.scope_of.get(site.forward)
    for target in node.targets:
        t = target.target
        if (isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name)
                and (own is None or t.value.value not in own.bindings or t.value.value in ("self", "cls"))
                and _guarded(model, node, site.forward, t.attr.value)):
            return True
    return False


def _guarded(model, node, stop, attr: str) -> bool:
    """`node` runs under an `if` that tests the attribute it sets (`if m.mean is None:`,
    `if not hasattr(m, "mean"):`): only the first call creates the variable."""
    import libcst as cst

    while node is not None and node is not stop:
        node = model.parent(node)
        if isinstance(node, cst.If) and model.mentions_attribute(node.test, attr):
            return True
    return False
