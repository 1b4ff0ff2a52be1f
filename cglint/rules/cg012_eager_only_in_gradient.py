"""CG012 eager-only-in-gradient."""

from typing import Iterator

import libcst as cst

from cglint.diagnostics import Finding
from cglint.model import GradientSite, Param, Scope
from cglint.model.boundaries import STATIC_ATTRS
from cglint.rules.base import Invalid, Rule

_STATIC = STATIC_ATTRS
# Methods of PyTorch tensors that TensorFlow tensors lack: `.numpy()` on their result is
# PyTorch's, as in TF <-> PyTorch bridges (`out.detach().cpu().numpy()`).
_TORCH_ONLY = frozenset({"detach", "cpu"})
# Wrappers that run their function eagerly, even inside tf.function.
_EAGER_WRAPPERS = frozenset(
    {"tensorflow.py_function", "tensorflow.numpy_function", "tensorflow.py_func",
     "tensorflow.python.ops.script_ops.py_func", "tensorflow.python.ops.script_ops.eager_py_func",
     "tensorflow.python.ops.script_ops.numpy_function"}
)


# Annotations that say a parameter holds plain Python values (`shape: Tuple[int]`), not tensors.
_PYTHON_TYPES = frozenset({"int", "float", "bool", "str", "bytes", "None", "tuple", "list", "dict",
                           "Tuple", "List", "Dict", "Sequence", "Optional", "Union", "typing"})


def _python_annotated(model, param: Param) -> bool:
    annotation = param.node.annotation
    if annotation is None:
        return False
    names = model.reads_in(annotation.annotation)
    return bool(names) and all(n.value in _PYTHON_TYPES for n in names)


class EagerOnlyInGradient(Rule):
    """
    ## What it does
    Flags NumPy calls on tensors (through the module's `numpy` imports, whatever their
    alias) and `.numpy()` calls inside a custom-gradient forward or its grad fn, and calls
    there that give a tensor to a project helper (in this module or another) that calls
    `.numpy()` or a NumPy function on that parameter. NumPy on
    Python constants (`np.sqrt(2 / np.pi)`) and on static metadata (`np.prod(x.shape)`)
    works in graph mode and is left alone, and so are a custom-gradient function that the
    module hands to `tf.py_function` / `tf.numpy_function`, which run it eagerly, helpers
    that the forward or grad fn hands to them, and `.numpy()` on a PyTorch tensor
    (`t.detach().numpy()`).

    ## Why is this bad?
    Both only work on eager tensors. Under `tf.function`, and so in `model.fit`, the
    forward and the grad fn are traced with symbolic tensors: `.numpy()` raises
    `AttributeError: 'SymbolicTensor' object has no attribute 'numpy'`, and NumPy functions
    raise `NotImplementedError: Cannot convert a symbolic tf.Tensor to a numpy array`
    (TensorFlow 2.21). Code that passes eager unit tests fails the first time it is
    trained. Use the TensorFlow op (`tf.math.cos`, `tf.experimental.numpy`), or
    `tf.numpy_function` when NumPy is really needed.
    """

    code = "CG012"
    name = "eager-only-in-gradient"
    summary = "NumPy calls or `.numpy()` on tensors inside the forward or grad fn (fails under tf.function)"

    INVALID = [
        Invalid(
            '''
import numpy as np
import tensorflow as tf


def robust_scale(t):
    return float(np.median(np.abs(t)))


@tf.custom_gradient
def normalize(x):
    s = robust_scale(x)

    def grad(dy):
        return dy / s

    return x / s, grad
''',
            at="12:9"),
        Invalid(
            '''
import numpy as np
import tensorflow as tf

@tf.custom_gradient
def sine(x):
    return tf.sin(x), lambda dy: dy * np.cos(x.numpy())
''',
            at=("7:39", "7:46")),
        Invalid(
            '''
import numpy as onp
import tensorflow as tf

@tf.custom_gradient
def soft_clip(x):
    y = onp.tanh(x)

    def grad(dy):
        return dy * (1 - y * y)

    return y, grad
''',
            at="7:9"),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def log_scaled(x):
    scale = float(tf.reduce_max(x).numpy())

    def grad(dy):
        return dy / (x * scale)

    return tf.math.log(x) * scale, grad
''',
            at="6:19"),
        Invalid(
            '''
from numpy import exp
import tensorflow as tf

@tf.custom_gradient
def softplus(x):
    def grad(dy):
        e = exp(-x)
        return dy / (1 + e)

    return tf.nn.softplus(x), grad
''',
            at="8:13"),
    ]
    VALID = [
        '''
import numpy as np
import tensorflow as tf


def fan_in_scale(t):
    return float(np.sqrt(np.prod(t.shape[1:])))


@tf.custom_gradient
def normalize(x):
    s = fan_in_scale(x)

    def grad(dy):
        return dy / s

    return x / s, grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def sine(x):
    return tf.sin(x), lambda dy: dy * tf.cos(x)
''',
        '''
import numpy as np
import tensorflow as tf

@tf.custom_gradient
def gelu(x):
    c = np.sqrt(2.0 / np.pi)
    y = 0.5 * x * (1 + tf.tanh(c * (x + 0.044715 * x ** 3)))

    def grad(dy):
        return dy * tf.sigmoid(1.702 * x)

    return y, grad
''',
        '''
import numpy as np
import tensorflow as tf

@tf.custom_gradient
def mean_all(x):
    n = np.prod(x.shape)

    def grad(dy):
        return dy * tf.ones_like(x) / n

    return tf.reduce_sum(x) / n, grad
''',
        '''
import jax.numpy as jnp
import tensorflow as tf

@tf.custom_gradient
def op(x):
    return tf.identity(x), lambda dy: dy

def numpy_reference(x):
    return jnp.cos(x.numpy())
''',
        '''
import numpy as np
import tensorflow as tf

def make_simulator(backend):
    @tf.custom_gradient
    def simulate(params):
        counts = backend.run(params.numpy())

        def no_grad(dy):
            raise RuntimeError("sampling is not differentiable")

        return np.asarray(counts, dtype=np.float32), no_grad

    def op(params):
        return tf.py_function(func=simulate, inp=[params], Tout=tf.float32)

    return op
''',
        '''
import numpy as np
import tensorflow as tf

@tf.custom_gradient
def blur(image):
    def run(img):
        return np.clip(img.numpy(), 0.0, 1.0)

    def grad(dy):
        def back(d):
            return np.flip(d.numpy(), axis=0)

        return tf.py_function(back, [dy], tf.float32)

    return tf.py_function(run, [image], tf.float32), grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def bridged(x, torch_net, to_torch):
    out = torch_net(to_torch(x))

    def grad(dy):
        return tf.ones_like(x) * dy, None, None

    return tf.constant(out.detach().cpu().numpy()), grad
''',
        '''
import numpy as np
import tensorflow as tf
from typing import Tuple

@tf.custom_gradient
def permute(x, order: Tuple[int, ...]):
    perm = np.asarray(order)
    inverse = np.argsort(perm)

    def grad(dy):
        return tf.transpose(dy, inverse), None

    return tf.transpose(x, perm), grad
''',
        '''
import numpy as np
import tensorflow as tf
from typing import Tuple

@tf.custom_gradient
def tiled(x, reps: Tuple[int, int]):
    # `reps` holds Python ints: NumPy on it is fine while tracing
    total = int(np.prod(np.array(reps)))

    def grad(dy):
        return tf.reduce_sum(tf.reshape(dy, [total, -1]), axis=0), None

    return tf.tile(x, [total]), grad
''',
    ]

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        model = site.model
        if self._runs_eagerly(site):
            return
        outside = site.outside_grad_fn_scopes()  # a grad fn made by a factory, a method, a table's entry
        inside = set(site.scopes()) | set(outside)
        eager = self._eager_helpers(site)
        for call, scope in [*site.calls(), *((c, s) for s in outside for c in s.calls)]:
            if self._within(scope, eager):
                continue
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "numpy" and not call.args:
                if self._torch_tensor(func.value):
                    continue
                if model.qualname(func) is None:  # `x.numpy()`, not a module attribute
                    yield Finding(call, self._message(site, "`.numpy()`", "AttributeError: 'SymbolicTensor' "
                                                      "object has no attribute 'numpy'"))
                continue
            qualname = model.qualname(func)
            if qualname is None or not qualname.startswith(("numpy.", "tensorflow.", "keras.")):
                # a project helper under any import form (`import pkg.helpers as H` names it
                # `pkg.helpers.f`); a library's function resolves to no callable
                yield from self._through_helper(site, call, scope, inside)
                continue
            if not qualname.startswith("numpy."):
                continue
            if any(self._tensorish(model, n, scope, inside, 0) for a in call.args
                   for n in model.reads_in(a.value, _STATIC)):
                yield Finding(call, self._message(site, f"`{qualname}` on a tensor",
                                                  "NotImplementedError: Cannot convert a symbolic tf.Tensor"))

    def _through_helper(self, site: GradientSite, call: cst.Call, scope: Scope, inside: set) -> Iterator[Finding]:
        """A project helper (here or in another module) given a tensor it turns into NumPy."""
        model = site.model
        for fn in model.callables(call.func, scope):
            eager = model.eager_only_params(fn)
            if not eager or not isinstance(fn.node, cst.FunctionDef):
                continue
            params = [p.name.value for p in [*fn.node.params.posonly_params, *fn.node.params.params]][fn.bound:]
            passed = [(params[i] if i < len(params) else None, a) for i, a in enumerate(call.args) if a.keyword is None]
            passed += [(a.keyword.value, a) for a in call.args if a.keyword is not None]
            for param, arg in passed:
                if param in eager and not arg.star and any(
                        self._tensorish(model, n, scope, inside, 0) for n in model.reads_in(arg.value, _STATIC)):
                    yield Finding(call, self._message(
                        site, f"`{fn.node.name.value}` (it calls {eager[param]} on its `{param}`, given a tensor here)",
                        "AttributeError / NotImplementedError on the symbolic tensor"))
                    return

    @staticmethod
    def _runs_eagerly(site: GradientSite) -> bool:
        """A function handed to `tf.py_function` / `tf.numpy_function` always runs eagerly."""
        model = site.model
        for call, scope in model.calls_to(_EAGER_WRAPPERS):
            if any(site.is_named_by(a.value, scope) for a in call.args):
                return True
        return False

    @staticmethod
    def _eager_helpers(site: GradientSite) -> set:
        """Functions defined in the forward or grad fn and handed to `tf.py_function` /
        `tf.numpy_function` there: their bodies run eagerly."""
        model = site.model
        nodes: set = set()
        for call, scope in site.calls():
            if model.qualname(call.func) not in _EAGER_WRAPPERS or not call.args:
                continue
            arg = next((a for a in call.args if a.keyword and a.keyword.value == "func"), call.args[0])
            if arg.keyword is not None and arg.keyword.value != "func":
                continue
            for value in model.resolve(arg.value, scope):
                if isinstance(value, (cst.FunctionDef, cst.Lambda)):
                    nodes.add(value)
        return nodes

    @staticmethod
    def _within(scope: Scope | None, nodes: set) -> bool:
        while scope is not None:
            if scope.node in nodes:
                return True
            scope = scope.parent
        return False

    @staticmethod
    def _torch_tensor(expr: cst.BaseExpression) -> bool:
        """`t.detach()` / `t.cpu()`: methods TensorFlow tensors do not have."""
        return (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
                and expr.func.attr.value in _TORCH_ONLY)

    def _tensorish(self, model, name: cst.Name, scope: Scope, inside: set, depth: int) -> bool:
        """Whether a name may hold a tensor computed in the forward: a parameter of the
        forward or grad fn, or a local value derived from one (or from a TensorFlow op)."""
        found = scope.lookup(name.value)
        if found is None or depth > 4:
            return False
        owner, values = found
        if owner not in inside:
            return False  # module constants, closures over configuration
        # A name that holds a NumPy result is an array: the conversion is what gets flagged.
        # `.numpy()` always is; `x = np.array(x)` only as long as `x` counts as a tensor.
        if any(self._numpy_result(model, v, not any(isinstance(w, Param) for w in values)) for v in values):
            return False
        for value in values:
            if isinstance(value, Param):
                return not _python_annotated(model, value)
            if isinstance(value, cst.Call) and (model.qualname(value.func) or "").startswith("tensorflow."):
                return True
            if isinstance(value, cst.BaseExpression) and any(
                self._tensorish(model, n, owner, inside, depth + 1) for n in model.reads_in(value, _STATIC)
            ):
                return True
        return False

    @staticmethod
    def _numpy_result(model, value, numpy_calls: bool) -> bool:
        """`t.numpy()` (or, with `numpy_calls`, `np.f(...)`): a NumPy value."""
        if not isinstance(value, cst.Call):
            return False
        func = value.func
        if isinstance(func, cst.Attribute) and func.attr.value == "numpy" and not value.args:
            return True
        return numpy_calls and (model.qualname(func) or "").startswith("numpy.")

    @staticmethod
    def _message(site: GradientSite, what: str, error: str) -> str:
        return (
            f"{what} inside the custom-gradient function `{site.name}` only works eagerly: under tf.function "
            f"(and model.fit) TensorFlow traces it with symbolic tensors and raises {error}; use TensorFlow ops"
        )
