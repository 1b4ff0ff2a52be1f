"""CG020 override-key-not-op-type."""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from cglint.diagnostics import Finding, Fix
from cglint.gradcheck.optypes import closest_op_type, is_op_type
from cglint.model import ModuleModel
from cglint.model.scopes import Scope
from cglint.rules.base import Invalid, Rule

# TensorFlow accepts an op name only in this form (op_def_util.cc's ValidateOpDef: "Did you use
# CamelCase?"), custom ops' included; a `>` namespace or a leading `_` is left alone.
_OP_NAME = re.compile(r"[A-Z][A-Za-z0-9_]*")


class OverrideKeyNotOpType(Rule):
    """
    ## What it does
    Flags a key of `graph.gradient_override_map({...})` that is no op type: a name no op can
    have (`"sign"`, `"relu"`: op types are CamelCase, custom ops' too) or a built-in op type
    spelled with other capitals (`"Matmul"` for `"MatMul"`, `"Conv2d"` for `"Conv2D"`). The key
    is read as the code binds it: a string, a module constant, a dict bound to a name and the
    entries stored into it (`OVERRIDES["sign"] = "Identity"`).

    ## Why is this bad?
    The override map matches op types exactly. A key that is none overrides nothing, and
    TensorFlow 2.21 says nothing: `tf.gradients` uses the op's own gradient and the
    `tf.RegisterGradient` function never runs (`{"Matmul": "MyGrad"}` leaves `MatMul`'s gradient
    as it was, `{"sign": "Identity"}` leaves `Sign`'s zero gradient). Use the op type as
    `op.type` spells it; the message names the closest one.
    """

    code = "CG020"
    name = "override-key-not-op-type"
    summary = "gradient_override_map key that is no op type: nothing is overridden, silently"

    INVALID = [
        Invalid(
            '''
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

def binarize(x):
    with tf.get_default_graph().gradient_override_map({"sign": "Identity"}):
        return tf.sign(x)
''',
            at="7:56",
            fixed='''
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

def binarize(x):
    with tf.get_default_graph().gradient_override_map({"Sign": "Identity"}):
        return tf.sign(x)
'''),
        Invalid(
            '''
import tensorflow as tf

@tf.RegisterGradient("ScaledGrad")
def _scaled_grad(op, grad):
    return [0.5 * grad, 0.5 * grad]

OVERRIDES = {"Matmul": "ScaledGrad"}

graph = tf.Graph()
with graph.as_default():
    a = tf.constant([[2.0]])
    with graph.gradient_override_map(OVERRIDES):
        y = tf.matmul(a, a)
    grad = tf.gradients(y, a)
''',
            at="8:14",
            fixed='''
import tensorflow as tf

@tf.RegisterGradient("ScaledGrad")
def _scaled_grad(op, grad):
    return [0.5 * grad, 0.5 * grad]

OVERRIDES = {"MatMul": "ScaledGrad"}

graph = tf.Graph()
with graph.as_default():
    a = tf.constant([[2.0]])
    with graph.gradient_override_map(OVERRIDES):
        y = tf.matmul(a, a)
    grad = tf.gradients(y, a)
'''),
        Invalid(
            '''
import tensorflow.compat.v1 as tf

ROUND = "round"

def quantize(x):
    with tf.get_default_graph().gradient_override_map({ROUND: "Identity"}):
        return tf.round(x)
''',
            at="4:9",
            fixed='''
import tensorflow.compat.v1 as tf

ROUND = "Round"

def quantize(x):
    with tf.get_default_graph().gradient_override_map({ROUND: "Identity"}):
        return tf.round(x)
'''),
        Invalid(
            '''
import tensorflow as tf

OVERRIDES = {}
OVERRIDES["relu"] = "ClippedReluGrad"

@tf.RegisterGradient("ClippedReluGrad")
def _clipped_relu_grad(op, grad):
    return tf.clip_by_value(grad, -1.0, 1.0) * tf.cast(op.outputs[0] > 0, grad.dtype)

graph = tf.Graph()
with graph.as_default():
    x = tf.constant([2.0])
    with graph.gradient_override_map(OVERRIDES):
        y = tf.nn.relu(x) * 10.0
    grad = tf.gradients(y, x)
''',
            at="5:11",
            fixed='''
import tensorflow as tf

OVERRIDES = {}
OVERRIDES["Relu"] = "ClippedReluGrad"

@tf.RegisterGradient("ClippedReluGrad")
def _clipped_relu_grad(op, grad):
    return tf.clip_by_value(grad, -1.0, 1.0) * tf.cast(op.outputs[0] > 0, grad.dtype)

graph = tf.Graph()
with graph.as_default():
    x = tf.constant([2.0])
    with graph.gradient_override_map(OVERRIDES):
        y = tf.nn.relu(x) * 10.0
    grad = tf.gradients(y, x)
'''),
    ]
    VALID = [
        '''
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

def binarize(x):
    with tf.get_default_graph().gradient_override_map({"Sign": "Identity"}):
        return tf.sign(x)
''',
        '''
import tensorflow as tf

_ops = tf.load_op_library("./zero_out.so")

def zero_out(x):
    with tf.compat.v1.get_default_graph().gradient_override_map({"ZeroOut": "ZeroOutGrad"}):
        return _ops.zero_out(x)
''',
        '''
import tensorflow.compat.v1 as tf

def apply_overrides(graph, overrides):
    return graph.gradient_override_map(overrides)
''',
    ]

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        if not model.imports_tensorflow:
            return
        seen: set[int] = set()
        for call, scope in model.all_calls:
            if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "gradient_override_map"
                    and call.args and call.args[0].keyword is None and call.args[0].star == ""):
                continue
            for node, key in _keys(model, call.args[0].value, scope):
                if id(node) in seen:
                    continue  # one dict, several maps: one finding at the key
                seen.add(id(node))
                finding = _finding(node, key)
                if finding is not None:
                    yield finding


def _keys(model: ModuleModel, arg: cst.BaseExpression, scope: Scope) -> Iterator[tuple[cst.SimpleString, str]]:
    """The string keys the map certainly has: of the one dict display `arg` denotes, each key
    that denotes one string constant (the string node, where a fix would go, and its value)."""
    tables = model.denote(arg, scope)
    if len(tables) != 1 or tables[0].kind != "table" or not isinstance(tables[0].node, cst.Dict):
        return
    table, owner = tables[0].node, tables[0].model
    keys = [(e.key, tables[0].scope or scope) for e in table.elements if isinstance(e, cst.DictElement)]
    # `OVERRIDES["Sign"] = "Identity"`: entries stored into that very dict, in any scope.
    for body in owner.scope_of.values():
        for target, _ in body.stores:
            if len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index):
                same = owner.denote(target.value, body)
                if len(same) == 1 and same[0].node is table:
                    keys.append((target.slice[0].slice.value, body))
    for key, where in keys:
        found = owner.denote(key, where)
        if len(found) == 1 and found[0].kind == "constant" and isinstance(found[0].node, cst.SimpleString):
            value = found[0].node.evaluated_value
            if isinstance(value, str):
                yield found[0].node, value


def _finding(node: cst.SimpleString, key: str) -> Finding | None:
    if is_op_type(key) or key.startswith("_") or ">" in key:
        return None
    closest = closest_op_type(key)
    same_but_case = closest is not None and closest.lower() == key.lower()
    if _OP_NAME.fullmatch(key) and not same_but_case:
        return None  # a CamelCase name may be a custom op's (tf.load_op_library)
    hint = f"; did you mean `{closest!r}`?" if closest else ""
    fix = None
    if same_but_case:
        quote = node.prefix + node.quote
        # Unsafe: the registered gradient starts to run, which changes what training computes.
        fix = Fix([(node, node.with_changes(value=f"{quote}{closest}{node.quote}"))], safe=False,
                  description=f"use the op type {closest!r}")
    return Finding(
        node,
        f"`{key!r}` is no op type TensorFlow has: `gradient_override_map` matches op types exactly, so it overrides "
        f"nothing and the op keeps its own gradient, silently{hint}",
        fix=fix,
    )
