"""CG015 non-tensor-argument."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from cglint.diagnostics import UNSAFE, Finding, Fix
from cglint.model import GradientSite, ModuleModel, Param, is_no_gradient
from cglint.model.dtypes import FLOATS, fixed_dtype, input_dtype_evidence, mixed_precision_policy
from cglint.rules._fixes import fresh_name
from cglint.rules.base import Invalid, Rule


class NonTensorArgument(Rule):
    """
    ## What it does
    Flags a plain Python value passed positionally to a custom-gradient function: an int
    (`16`, `int(...)`), a string, `None`, `True`/`False`, or a callable (a lambda, a
    def, `tf.nn.relu`). Names are followed to what they hold: a module constant, a parameter
    annotated with a Python type, and a Keras layer's configuration (`self.bits` set from an
    `__init__` parameter defaulting to a number) count. A Python float becomes a float32
    tensor, which is right beside float32 inputs (TensorFlow 2.21: `f(x, 0.5)` works eagerly and
    under `tf.function`), so a float is flagged only where the code shows another dtype: a
    float64 / float16 / bfloat16 argument at a call, or a mixed-precision policy for a Keras
    layer's call. A name that may hold a tensor is
    never flagged, nor a number the forward converts itself (`alpha = tf.cast(alpha,
    x.dtype)`: that works in graph mode too). Keras 3's `keras.ops.custom_gradient` is `tf.custom_gradient` on the
    TensorFlow backend and converts its arguments the same way: its sites are checked too.

    ## Why is this bad?
    TensorFlow treats every positional argument as an input and converts it to a tensor. Under
    `tf.function` (and so in `model.fit` and when Keras builds the layer) the forward then
    receives the tensor, not the Python value: `f(x, 16)` hands it an `int32` tensor, so
    `x * bits` raises "Input 'y' of 'Mul' Op has type int32 that does not match type float32",
    `2.0 ** bits` raises "Expected int32, but got 2.0"; a float becomes a `float32` tensor, so
    `tf.abs(x) <= clip_value` raises the same mismatch under mixed precision (`mixed_float16`:
    `model.fit` fails) or with float64 inputs; a string used in `if mode == ...`
    raises OperatorNotAllowedInGraphError, and `None` raises "None values not supported"
    (TensorFlow 2.21). The same call works eagerly for numbers and strings, so unit tests
    pass and training fails. Eagerly, `None` and callables already fail ("Attempt to convert
    a value (None) with an unsupported type"). The fix closes over the value, as larq's
    quantizers do: the decorated function takes only tensors and an outer function keeps the
    signature.
    """

    code = "CG015"
    name = "non-tensor-argument"
    summary = "A Python number, string, None or callable passed positionally to a custom-gradient function"

    INVALID = [
        Invalid(
            '''
import keras
import tensorflow as tf


@tf.custom_gradient
def fake_quant(x, bits):
    levels = 2.0 ** bits - 1.0
    y = tf.round(tf.clip_by_value(x, 0.0, 1.0) * levels) / levels

    def grad(dy):
        return dy * tf.cast((x >= 0.0) & (x <= 1.0), dy.dtype), None

    return y, grad


class FakeQuant(keras.layers.Layer):
    def __init__(self, bits=8, **kwargs):
        super().__init__(**kwargs)
        self.bits = bits

    def call(self, inputs):
        return fake_quant(inputs, self.bits)
''',
            at="23:35",
            fixed='''
import keras
import tensorflow as tf


def fake_quant(x, bits):
    @tf.custom_gradient
    def _fake_quant(x):
        levels = 2.0 ** bits - 1.0
        y = tf.round(tf.clip_by_value(x, 0.0, 1.0) * levels) / levels

        def grad(dy):
            return dy * tf.cast((x >= 0.0) & (x <= 1.0), dy.dtype)

        return y, grad
    return _fake_quant(x)


class FakeQuant(keras.layers.Layer):
    def __init__(self, bits=8, **kwargs):
        super().__init__(**kwargs)
        self.bits = bits

    def call(self, inputs):
        return fake_quant(inputs, self.bits)
'''),
        Invalid(
            '''
import tensorflow as tf

CLIP = 1.0


@tf.custom_gradient
def ste_sign(x, clip_value):
    def grad(dy):
        return dy * tf.cast(tf.abs(x) <= clip_value, dy.dtype), None

    return tf.sign(x), grad


def binarize(kernel):
    return ste_sign(tf.cast(kernel, tf.float64), CLIP)
''',
            at="16:50",
            fixed='''
import tensorflow as tf

CLIP = 1.0


def ste_sign(x, clip_value):
    @tf.custom_gradient
    def _ste_sign(x):
        def grad(dy):
            return dy * tf.cast(tf.abs(x) <= clip_value, dy.dtype)

        return tf.sign(x), grad
    return _ste_sign(x)


def binarize(kernel):
    return ste_sign(tf.cast(kernel, tf.float64), CLIP)
'''),
        Invalid(
            '''
import tensorflow as tf


class Gated(tf.keras.layers.Layer):
    @tf.custom_gradient
    def _gate(self, x, activation):
        y = activation(x)

        def grad(dy):
            return dy * tf.cast(x > 0, dy.dtype), None

        return y, grad

    def call(self, inputs):
        return self._gate(inputs, tf.nn.relu)
''',
            at="16:35",
            fixed='''
import tensorflow as tf


class Gated(tf.keras.layers.Layer):
    def _gate(self, x, activation):
        @tf.custom_gradient
        def _gate_fn(x):
            y = activation(x)

            def grad(dy):
                return dy * tf.cast(x > 0, dy.dtype)

            return y, grad
        return _gate_fn(x)

    def call(self, inputs):
        return self._gate(inputs, tf.nn.relu)
'''),
        Invalid(
            '''
import tensorflow as tf


@tf.custom_gradient
def masked(x, mask):
    y = x if mask is None else x * mask

    def grad(dy):
        return dy if mask is None else dy * mask

    return y, grad


def forward(x, training):
    return masked(x, None) if not training else masked(x, tf.ones_like(x))
''',
            at="16:22"),
        # an int field of a dataclass config (TF 2.21, tf.function: the int arrives as an int32 tensor)
        Invalid(
            '''
import dataclasses

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class QuantConfig:
    bits: int = 4


@tf.custom_gradient
def fake_quant(x, bits):
    scale = tf.reduce_max(tf.abs(x)) / float(2 ** (bits - 1) - 1)

    def grad(dy):
        return dy, None

    return tf.round(x / scale) * scale, grad


class Quantizer(tf.Module):
    def __init__(self, config=QuantConfig()):
        self.config = config

    def __call__(self, x):
        return fake_quant(x, self.config.bits)
''',
            at="27:30",
            fixed='''
import dataclasses

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class QuantConfig:
    bits: int = 4


def fake_quant(x, bits):
    @tf.custom_gradient
    def _fake_quant(x):
        scale = tf.reduce_max(tf.abs(x)) / float(2 ** (bits - 1) - 1)

        def grad(dy):
            return dy

        return tf.round(x / scale) * scale, grad
    return _fake_quant(x)


class Quantizer(tf.Module):
    def __init__(self, config=QuantConfig()):
        self.config = config

    def __call__(self, x):
        return fake_quant(x, self.config.bits)
'''),
    ]
    VALID = [
        '''
import keras
import tensorflow as tf


def fake_quant(x, bits):
    @tf.custom_gradient
    def _fake_quant(x):
        levels = 2.0 ** bits - 1.0
        y = tf.round(tf.clip_by_value(x, 0.0, 1.0) * levels) / levels

        def grad(dy):
            return dy * tf.cast((x >= 0.0) & (x <= 1.0), dy.dtype)

        return y, grad

    return _fake_quant(x)


class FakeQuant(keras.layers.Layer):
    def __init__(self, bits=8, **kwargs):
        super().__init__(**kwargs)
        self.bits = bits

    def call(self, inputs):
        return fake_quant(inputs, self.bits)
''',
        '''
import tensorflow as tf


@tf.custom_gradient
def scale(x, factor):
    def grad(dy):
        return dy * factor, dy * x

    return x * factor, grad


class Scaled(tf.keras.layers.Layer):
    def build(self, input_shape):
        self.factor = self.add_weight(shape=(), initializer="ones", name="factor")

    def call(self, inputs):
        return scale(inputs, tf.convert_to_tensor(self.factor)) + scale(inputs, 2.0 * inputs)
''',
        '''
import tensorflow as tf


@tf.custom_gradient
def clip_grad(x, norm):
    def grad(dy):
        return tf.clip_by_norm(dy, norm), None

    return tf.identity(x), grad


def step(x, norm):
    return clip_grad(x, norm)
''',
    ]

    VALID += [
        # a Python float beside an input of unknown (or float32) dtype: converted to float32, right
        '''
import tensorflow as tf

CLIP = 1.0


@tf.custom_gradient
def ste_sign(x, clip_value):
    def grad(dy):
        return dy * tf.cast(tf.abs(x) <= clip_value, dy.dtype), None

    return tf.sign(x), grad


def binarize(kernel):
    return ste_sign(kernel, CLIP) + ste_sign(kernel, CLIP / 2) + ste_sign(tf.constant([0.5, 2.0]), 0.5)
''',
        '''
import tensorflow as tf


def sparsemax_like(inputs, alpha=1.5):
    @tf.custom_gradient
    def forward(inputs, alpha):
        alpha = tf.cast(tf.fill(tf.shape(inputs)[:-1], alpha), inputs.dtype)[..., None]
        p = tf.nn.relu(inputs * (alpha - 1.0)) ** (1.0 / (alpha - 1.0))

        def grad(dy):
            return dy * p, None

        return p, grad

    return forward(inputs, alpha)
''',
    ]

    fix_safety = """
    The fix moves the body into a nested `@tf.custom_gradient` function that takes only the
    tensor inputs and closes over the Python ones, and drops their (`None`) gradients from
    the grad fn's returns; callers keep calling the outer function with the same arguments.
    It is offered only when every grad fn return gives `None` for those parameters and the
    forward never rebinds them. It is unsafe: a caller elsewhere that passes a tensor there
    gets no gradient for it (it got `None` before as well, but TensorFlow no longer sees it as
    an input).
    """

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        hits = [hit for call, scope in site.model.calls_reaching(site)
                for hit in _python_arguments(site, site.model, call, scope)]
        if hits:
            fix = _closure_fix(site, {p for _, _, p, _ in hits})
            yield from _findings(site, hits, fix)

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        """Also the calls this module makes to a custom-gradient function of another project
        module (`from .ops import fake_quant; fake_quant(x, 8)`): the finding is at the call."""
        yield from super().check(model)
        for call, scope, site in model.calls_of_other_modules_sites():
            if not call.args:
                continue
            hits = _python_arguments(site, model, call, scope)
            if hits:
                yield from _findings(site, hits, None)


def _python_arguments(site: GradientSite, model: ModuleModel, call: cst.Call, scope) -> list:
    """(argument, kind, position, evidence) for each Python value `call` (of `model`) passes
    positionally to `site`."""
    hits: list[tuple[cst.Arg, str, int, str | None]] = []
    position = 0
    for arg in call.args:
        if arg.keyword is not None or arg.star:
            break  # after `*args` positions are unknown
        kind = model.python_value(arg.value, scope)
        param = site.inputs[position] if position < len(site.inputs) else None
        if kind in ("number", "float", "bool") and param is not None and _converted(site, param):
            pass  # the forward makes it a tensor of the dtype it needs itself
        elif kind == "float":
            # A float becomes float32, which is right next to float32 inputs (TF 2.21, eager and
            # tf.function): flag it only where the code shows another dtype.
            evidence = _other_dtype(site, model, call, scope, position)
            if evidence is not None:
                hits.append((arg, kind, position, evidence))
        elif kind is not None:
            hits.append((arg, kind, position, None))
        position += 1
    return hits


def _findings(site: GradientSite, hits: list, fix: Fix | None) -> Iterator[Finding]:
    for arg, kind, position, evidence in hits:
        param = site.inputs[position] if position < len(site.inputs) else None
        where = f"parameter `{param}`" if param else "`*args`"
        yield Finding(
            arg.value,
            f"{_WHAT[kind] if kind in _WHAT else 'a Python value'} passed positionally to the custom-gradient "
            f"function `{site.name}` ({where}): TensorFlow converts every positional argument to a tensor, so "
            f"{_EFFECT.get(kind, _EFFECT['number']).format(evidence=evidence)}; close over it instead (the "
            f"forward takes only tensors)",
            fix=fix,
        )


_WHAT = {"number": "a Python number", "float": "a Python float", "bool": "a Python bool", "string": "a string", "None": "`None`",
         "callable": "a callable"}
_EFFECT = {
    "number": "under tf.function (model.fit, Keras building the layer) the forward gets a tensor where the eager "
              "call got the number: an int becomes int32 (`x * n` raises 'Input y of Mul has type int32 that does "
              "not match type float32'), a float becomes float32 (the same error under mixed precision or with "
              "float64 inputs)",
    "float": "under tf.function (model.fit, Keras building the layer) the forward gets a float32 tensor where the "
             "eager call got the float, and {evidence}: mixing them raises 'Input y of ... has type float32 that does "
             "not match'",
    "bool": "under tf.function the forward gets a bool tensor and `if flag:` raises OperatorNotAllowedInGraphError",
    "string": "under tf.function the forward gets a string tensor and `mode == ...` or `if` on it raises "
              "OperatorNotAllowedInGraphError",
    "None": "it raises 'Attempt to convert a value (None) with an unsupported type' eagerly and 'None values not "
            "supported' under tf.function",
    "callable": "it raises 'Attempt to convert a value (<function ...>) with an unsupported type' eagerly and "
                "'Failed to convert elements of <function ...> to Tensor' under tf.function",
}


def _other_dtype(site: GradientSite, caller: ModuleModel, call: cst.Call, scope, position: int) -> str | None:
    """What shows that the inputs next to a Python float are not float32 (a float64, float16 or
    bfloat16 argument at this call or another, a mixed-precision policy for a Keras layer's
    call): the evidence, in words, or None when the code does not say."""
    model = site.model
    for i, arg in enumerate(call.args):
        if i == position or arg.keyword is not None or arg.star:
            continue
        hit = fixed_dtype(caller, arg.value, scope)
        if hit is not None and hit[0] in FLOATS and hit[0] != "float32":
            return f"the call passes a {hit[0]} tensor beside it"
    for i in range(len(site.inputs)):
        if i == position:
            continue
        found = input_dtype_evidence(model, site, i)
        if found is not None and found[0] != "float32":
            return f"input `{site.inputs[i]}` is {found[0]} ({found[1]})"
    policy = mixed_precision_policy(caller)
    if policy is not None and scope.enclosing_class() is not None:
        return f"the module sets the `mixed_{policy}` policy, so a Keras layer's inputs are {policy}"
    return None


def _converted(site: GradientSite, param: str) -> bool:
    """`alpha = tf.cast(alpha, x.dtype)` / `tf.fill(shape, alpha)` in the forward: the number is
    converted to the tensor the forward needs, so the graph-mode conversion breaks nothing."""
    model = site.model
    return any(
        isinstance(v, cst.Call) and (model.qualname(v.func) or "").startswith("tensorflow.")
        and any(n.value == param for n in model.reads_in(v))
        for v in site.scope.bindings.get(param, [])
    )


def _closure_fix(site: GradientSite, positions: set[int]) -> Fix | None:
    """`@cg def f(x, k): body` -> `def f(x, k): @cg def _f(x): body'; return _f(x)`, with the
    closed-over parameters' `None` gradients dropped from every grad fn return."""
    fn = site.forward
    model = site.model
    if not isinstance(fn, cst.FunctionDef) or not isinstance(site.wrapper, cst.Decorator) or site.has_varargs:
        return None
    if any(p >= len(site.inputs) for p in positions) or len(positions) >= len(site.inputs):
        return None
    closed = {site.inputs[p] for p in positions}
    # A forward that rebinds a closed-over name would make it local to the nested def.
    if any(not all(isinstance(v, Param) for v in site.scope.bindings.get(name, [])) for name in closed):
        return None
    # The grad fns' returns are rewritten inside the moved body: they must live there.
    if not site.grad_fns or any(not grad.scope.within(site.scope) for grad in site.grad_fns):
        return None
    edits: dict[int, cst.CSTNode] = {}
    for grad in site.grad_fns:
        for ret in grad.returns:
            new = _drop_gradients(model, ret, grad, positions, len(site.inputs), bool(site.trainable_variables))
            if new is None:
                return None
            edits[id(ret.value)] = new
    keep = [p for i, p in enumerate(site.input_params) if i not in positions]
    # `fake_quant` -> `_fake_quant`; `_gate` -> `_gate_fn` (not `__gate`, which a class mangles).
    name = fn.name.value
    inner_name = fresh_name(model, f"{name}_fn" if name.startswith("_") else f"_{name}")
    body = fn.body.visit(_ReplaceById(edits))
    inner = cst.FunctionDef(
        name=cst.Name(inner_name),
        params=cst.Parameters(params=[p.with_changes(comma=cst.MaybeSentinel.DEFAULT) for p in keep]),
        body=body,
        decorators=[site.wrapper],
    )
    call = cst.Call(cst.Name(inner_name), args=[cst.Arg(cst.Name(p.name.value)) for p in keep])
    outer_body = cst.IndentedBlock(body=[inner, cst.SimpleStatementLine([cst.Return(call)])])
    # Blank lines and comments above the def belong to the FunctionDef itself, not to a decorator.
    new_fn = fn.with_changes(decorators=[d for d in fn.decorators if d is not site.wrapper], body=outer_body)
    names = ", ".join(f"`{site.inputs[p]}`" for p in sorted(positions))
    return Fix([(fn, new_fn)], applicability=UNSAFE,
               description=f"Close over {names}: the custom-gradient function takes only tensors")


def _drop_gradients(model, ret, grad, positions: set[int], count: int, has_variables: bool):
    """The return value without the gradients at `positions` (each must be `None`), or None."""
    if ret.value is None or ret.elements is None:
        return None
    elements = ret.elements
    target = ret.value
    if has_variables or (grad.variables_param is not None and len(elements) == 2 and count != 2):
        first = elements[0]
        inner = model.literal_elements(first, grad.scope) if isinstance(first, (cst.Tuple, cst.List)) else None
        if inner is None or len(inner) != count:
            return None
        kept = _without(inner, positions, model, grad)
        if kept is None:
            return None
        return ret.value.with_changes(elements=[ret.value.elements[0].with_changes(value=kept), *ret.value.elements[1:]]) \
            if isinstance(ret.value, cst.Tuple) else None
    if len(elements) != count or not isinstance(target, cst.Tuple):
        return None
    return _without(elements, positions, model, grad, target)


def _without(elements, positions, model, grad, like: cst.Tuple | None = None):
    if any(not is_no_gradient(model, elements[p], grad.scope) or not _is_none(elements[p]) for p in positions):
        return None
    kept = [el for i, el in enumerate(elements) if i not in positions]
    if len(kept) == 1:
        return kept[0]
    if like is not None:
        return like.with_changes(elements=[cst.Element(el) for el in kept])
    return cst.Tuple([cst.Element(el) for el in kept])


def _is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


class _ReplaceById(cst.CSTTransformer):
    def __init__(self, by_id: dict[int, cst.CSTNode]) -> None:
        self.by_id = by_id

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        return self.by_id.get(id(original), updated)  # type: ignore[return-value]
