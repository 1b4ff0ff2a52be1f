"""CG013 missing-decorator."""

from typing import Iterator

import libcst as cst

from cglint.diagnostics import Finding
from cglint.model import ModuleModel, UnwrappedCandidate
from cglint.rules.base import Invalid, Rule


class MissingDecorator(Rule):
    """
    ## What it does
    Flags a function that returns `(y, grad_fn)`, with `grad_fn` a function defined inside
    it, when nothing in the module wraps it with `tf.custom_gradient` and the module calls
    it directly, using the result as a value. The rule is deliberately conservative: a
    function that is decorated with anything, passed or referenced anywhere other than as a
    plain call (e.g. `tf.custom_gradient(fn)` here or in another module, TFP's
    `custom_gradient(vjp_fwd=...)`, Keras 3's `ops.custom_gradient`), never called in the
    module, or whose result is unpacked, indexed or returned whole (a manual VJP, or a
    helper of a decorated forward) is not flagged. Only modules that import TensorFlow are
    checked.

    It also flags a call that drops the grad fn of such a function, `q, _ = ste_round(x)`
    (the second name `_` or never read), outside any custom-gradient forward: the function
    is undecorated (here or in another project module), or it is the raw forward of a
    `tf.custom_gradient(fwd)` the module defines and the call bypasses the wrapped op. A
    caller that uses the grad fn (a manual VJP) is not flagged.

    ## Why is this bad?
    Without `@tf.custom_gradient` the function is plain Python: it returns a `(value,
    function)` tuple and the grad fn is never called. Used as a value, the tuple fails
    (TensorFlow 2.21: `tf.reduce_sum(f(x))` raises "Attempt to convert a value (<function
    ...grad>) with an unsupported type"); where the value is picked out later, TensorFlow
    differentiates the forward's own ops, i.e. the unstable or undefined gradient the custom
    one was written to replace. A caller that drops the grad fn trains with that gradient
    too (TensorFlow 2.21: `w_b, _ = binarize(self.kernel)` gives the kernel a zero gradient
    where the straight-through one is nonzero). Checking only files that mention `custom_gradient` keeps
    whole-repository runs fast: a wider text test (`def grad` in a TensorFlow module) would
    parse 17 more files of TensorFlow's own tree, costing more than the whole run today.
    """

    code = "CG013"
    name = "missing-decorator"
    summary = "A function returns `(y, grad_fn)` but is never wrapped by `tf.custom_gradient`"

    INVALID = [
        Invalid(
            '''
import tensorflow as tf


def binarize(w):
    def grad(dy):
        return dy * tf.cast(tf.abs(w) <= 1.0, dy.dtype)

    return tf.sign(w), grad


class BinaryDense(tf.keras.layers.Layer):
    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], 4))

    def call(self, x):
        w_b, _ = binarize(self.kernel)
        return x @ w_b
''',
            at="17:18"),
        Invalid(
            '''
import tensorflow as tf


def _round_ste(x):
    def grad(dy):
        return dy

    return tf.round(x), grad


round_ste = tf.custom_gradient(_round_ste)


def quantize(x, scale):
    q, _ = _round_ste(x / scale)
    return q * scale
''',
            at="16:12"),
        Invalid(
            '''
import tensorflow as tf

def log1pexp(x):
    e = tf.exp(x)

    def grad(dy):
        return dy * (1 - 1 / (1 + e))

    return tf.math.log(1 + e), grad

def loss(x):
    return tf.reduce_sum(log1pexp(x))
''',
            at="4:5"),
        Invalid(
            '''
import tensorflow as tf

class Binarize(tf.keras.layers.Layer):
    def _ste_sign(self, x):
        def grad(dy):
            return dy * tf.cast(tf.abs(x) <= 1.0, dy.dtype)

        return tf.sign(x), grad

    def call(self, inputs):
        return self._ste_sign(inputs) * 2.0
''',
            at="5:9"),
        Invalid(
            '''
import tensorflow as tf

def train_step(x):
    def clipped(v):
        def grad(dy):
            return tf.clip_by_norm(dy, 1.0)

        return tf.identity(v), grad

    y = clipped(x)
    return tf.reduce_mean(y)
''',
            at="5:9"),
    ]
    VALID = [
        '''
import tensorflow as tf


def binarize(w):
    def grad(dy):
        return dy * tf.cast(tf.abs(w) <= 1.0, dy.dtype)

    return tf.sign(w), grad


def binarize_with_vjp(w, upstream):
    w_b, vjp = binarize(w)
    return w_b, vjp(upstream)
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def log1pexp(x):
    e = tf.exp(x)

    def grad(dy):
        return dy * (1 - 1 / (1 + e))

    return tf.math.log(1 + e), grad

def loss(x):
    return tf.reduce_sum(log1pexp(x))
''',
        '''
import tensorflow as tf

def _log1pexp_fwd(x):
    e = tf.exp(x)

    def grad(dy):
        return dy * (1 - 1 / (1 + e))

    return tf.math.log(1 + e), grad

log1pexp = tf.custom_gradient(_log1pexp_fwd)
''',
        '''
import tensorflow as tf

def _clip_fwd(x):
    def grad(dy):
        return tf.clip_by_norm(dy, 1.0)

    return tf.identity(x), grad

@tf.custom_gradient
def clip(x):
    return _clip_fwd(x)
''',
        '''
import tensorflow as tf

def scale_fwd(x, factor):
    def grad(dy):
        return dy * factor, None

    return x * factor, grad

def manual_vjp(x):
    y, vjp = scale_fwd(x, 2.0)
    return y, vjp(tf.ones_like(y))
''',
        '''
import tensorflow as tf
from tensorflow_probability.python.math import custom_gradient as tfp_custom_gradient

def _softplus_fwd(x):
    return tf.nn.softplus(x), x

def _softplus_bwd(x, dy):
    return dy * tf.sigmoid(x)

@tfp_custom_gradient.custom_gradient(vjp_fwd=_softplus_fwd, vjp_bwd=_softplus_bwd)
def softplus(x):
    return tf.nn.softplus(x)
''',
        '''
from keras import ops

def _ste(x):
    def grad(*args, upstream=None):
        return upstream

    return ops.sign(x), grad

ste = ops.custom_gradient(_ste)
''',
    ]

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        if not model.imports_tensorflow:
            return
        for cand in model.unwrapped_candidates():
            if cand.node.decorators or not _takes_upstream(cand.grad_fn):
                continue
            calls = self._direct_uses(model, cand)
            if calls == [] and cand.scope.parent is model.root:
                calls = _uses_in_siblings(model, cand)  # a kernel module whose callers live next to it
            if not calls or any(id(c) in model.forwarded_calls for c in calls):
                continue
            yield Finding(
                cand.node.name,
                f"`{cand.node.name.value}` returns `(value, {cand.grad_fn.name.value})` like a custom-gradient "
                "forward but is not wrapped by `tf.custom_gradient`: it returns a tuple and its grad fn is never "
                "used; decorate it with `@tf.custom_gradient`",
            )

        for call, _, fn in model.discarded_grad_fns():
            name = fn.name.value
            yield Finding(
                call,
                f"the grad fn `{name}` returns is dropped here: `{name}` is not wrapped by `tf.custom_gradient` "
                "at this call, so its custom gradient is never applied and TensorFlow differentiates its forward's "
                f"own ops instead; call the `tf.custom_gradient` version of `{name}` (or decorate it)",
            )

    @staticmethod
    def _direct_uses(model: ModuleModel, cand: UnwrappedCandidate) -> list[cst.Call] | None:
        """The calls that use the function, or None if it is referenced any other way (passed,
        assigned, wrapped): then it may well be wrapped, here or elsewhere."""
        name = cand.node.name.value
        owner = cand.scope.parent
        calls: list[cst.Call] = []
        if owner is not None and isinstance(owner.node, cst.ClassDef):
            refs = [a for a, scope in model.attribute_reads_by_name.get(name, ()) if scope.within(owner)]
            if any(s is not owner and s.within(owner) for s in model.scopes_binding.get(name, ())) or any(
                scope.within(owner) for _, scope in model.reads_by_name.get(name, ())
            ):
                return None  # also used by bare name somewhere: do not guess
        else:
            refs = []
            for n, scope in model.reads_by_name.get(name, ()):
                found = scope.lookup(name)
                if found is not None and any(v is cand.node for v in found[1]):
                    refs.append(n)
        for ref in refs:
            call = model.call_of_func.get(id(ref))
            if call is None:
                return None
            calls.append(call)
        return calls


def _uses_in_siblings(model: ModuleModel, cand: UnwrappedCandidate) -> list | None:
    """The calls other modules of the package make to a module-level candidate (`from . import
    kernels; kernels.gelu_tanh(h)`), as `_direct_uses` would give them: None when one of them
    references it any other way (passed, wrapped, unpacked: it may well be wrapped there) or
    when nothing calls it."""
    import os
    import re

    if model.project is None or model.path is None:
        return None
    name = cand.node.name.value
    stem = os.path.splitext(os.path.basename(model.path))[0]
    siblings = model.project.sibling_models(model.path, (name,), model.memo("_scanned_memo"), 32)
    word = re.compile(rf"\b{re.escape(name)}\b")
    uses = []
    for other in siblings:
        if other is model or other.path == model.path:
            continue
        model._touch(other)
        # (the sibling reads this file through the project index: its own model of it)
        calls = [c for c, scope in other.all_calls
                 if any(callee.model.path == model.path and isinstance(callee.node, cst.FunctionDef)
                        and callee.node.name.value == name and callee.scope.parent is callee.model.root
                        for callee in other.callables(c.func, scope))]
        text = other.module.code
        mentions = sum(1 for line in text.splitlines() if word.search(line) and not line.lstrip().startswith(
            ("import ", "from ")) for _ in word.finditer(line))
        if mentions > len(calls) or any(id(c) in other.forwarded_calls for c in calls):
            return None
        if stem and calls:
            uses += calls
    return uses or None


def _takes_upstream(fn: cst.FunctionDef) -> bool:
    params = fn.params
    return bool(params.posonly_params or params.params or isinstance(params.star_arg, cst.Param))
