"""CG021 recompute-grad-random."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from cglint.diagnostics import Finding
from cglint.model import ModuleModel
from cglint.model.scopes import Scope
from cglint.rules.base import Invalid, Rule

_RECOMPUTE = frozenset({"tensorflow.recompute_grad", "tensorflow.python.ops.custom_gradient.recompute_grad"})

# Stateful random ops: each run draws new numbers, whatever seed they are given (TF 2.21: a
# recomputed `tf.nn.dropout(x, 0.5, seed=1)` keeps another mask). The stateless ones
# (`tf.random.stateless_*`, `tf.nn.experimental.stateless_dropout`) and `keras.random.*` with an
# integer seed draw the same numbers again and are not listed.
_STATEFUL = frozenset({"tensorflow.nn.dropout", "tensorflow.random.uniform", "tensorflow.random.normal",
                       "tensorflow.random.truncated_normal", "tensorflow.random.gamma", "tensorflow.random.poisson",
                       "tensorflow.random.categorical"})
# A `tf.random.Generator`'s draws advance its state.
_GENERATORS = frozenset({"tensorflow.random.Generator", "tensorflow.random.Generator.from_seed",
                         "tensorflow.random.Generator.from_non_deterministic_state",
                         "tensorflow.random.get_global_generator"})
_GENERATOR_DRAWS = frozenset({"uniform", "normal", "truncated_normal"})
_DROPOUT_LAYERS = frozenset({"keras.layers.Dropout", "tensorflow.keras.layers.Dropout"})


class RecomputeGradRandom(Rule):
    """
    ## What it does
    Flags a function wrapped in `tf.recompute_grad` whose body draws random numbers with a
    stateful op: `tf.nn.dropout`, `tf.random.uniform` / `normal` / `truncated_normal` / `gamma` /
    `poisson` / `categorical` (a seed does not help), a draw of a `tf.random.Generator`, or a
    `keras.layers.Dropout` called with `training=True` (bound to a name, or to `self.dropout`
    in the layer's `__init__`).

    ## Why is this bad?
    `tf.recompute_grad` runs the function again in the backward pass to save memory. A stateful
    random op draws new numbers the second time, so the gradient is that of another forward: in
    TensorFlow 2.21 a recomputed `tf.nn.dropout` back-propagates through a different mask than
    the one that made the output, silently. Draw with a stateless op and a fixed seed
    (`tf.nn.experimental.stateless_dropout(x, rate, seed=...)`, `tf.random.stateless_uniform`),
    which recomputes the same numbers, or keep the random op outside the recomputed function.
    """

    code = "CG021"
    name = "recompute-grad-random"
    summary = "tf.recompute_grad around a forward that draws new random numbers when recomputed"

    INVALID = [
        Invalid(
            '''
import tensorflow as tf

@tf.recompute_grad
def block(x):
    h = tf.nn.relu(x)
    return tf.nn.dropout(h, rate=0.5)
''',
            at="7:12"),
        Invalid(
            '''
import tensorflow as tf

noise = tf.random.Generator.from_seed(42)

def noisy(x):
    return tf.nn.relu(x + noise.normal(tf.shape(x)))

noisy_block = tf.recompute_grad(noisy)
''',
            at="7:27"),
        Invalid(
            '''
import keras
import tensorflow as tf

dropout = keras.layers.Dropout(0.5)

def forward(x):
    return dropout(tf.nn.relu(x), training=True)

forward = tf.recompute_grad(forward)
''',
            at="8:12"),
        Invalid(
            '''
import keras
import tensorflow as tf


class Block(keras.layers.Layer):
    def __init__(self, units):
        super().__init__()
        self.dense = keras.layers.Dense(units)
        self.dropout = keras.layers.Dropout(0.5)

    def _forward(self, x):
        return self.dropout(self.dense(x), training=True)

    def call(self, x):
        return tf.recompute_grad(self._forward)(x)
''',
            at="13:16"),
    ]
    VALID = [
        '''
import tensorflow as tf

@tf.recompute_grad
def block(x):
    h = tf.nn.relu(x)
    return tf.nn.experimental.stateless_dropout(h, rate=0.5, seed=[1, 2])
''',
        '''
import tensorflow as tf

def block(x):
    return tf.nn.relu(x) * 2.0

def train_step(x):
    h = tf.nn.dropout(x, rate=0.5)
    return tf.recompute_grad(block)(h)
''',
        '''
import keras
import tensorflow as tf

dropout = keras.layers.Dropout(0.5)

@tf.recompute_grad
def forward(x):
    return dropout(tf.nn.relu(x))
''',
        '''
import keras
import tensorflow as tf


class Block(keras.layers.Layer):
    def __init__(self, units):
        super().__init__()
        self.dense = keras.layers.Dense(units)
        self.dropout = keras.layers.Dropout(0.5)

    def _forward(self, x):
        return tf.nn.relu(self.dense(x))

    def call(self, x, training=False):
        h = tf.recompute_grad(self._forward)(x)
        return self.dropout(h, training=training)
''',
    ]

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        if not model.imports_tensorflow:
            return
        wrapped: list[tuple[cst.CSTNode, cst.BaseExpression | cst.FunctionDef, Scope]] = []
        for call, scope in model.all_calls:
            if model.qualname(call.func) in _RECOMPUTE and call.args and call.args[0].keyword is None \
                    and call.args[0].star == "":
                wrapped.append((call, call.args[0].value, scope))
        for node in model.scope_of:
            if isinstance(node, cst.FunctionDef) and any(model.qualname(d.decorator) in _RECOMPUTE
                                                         for d in node.decorators):
                wrapped.append((node, node, model.scope_of[node]))
        seen: set[int] = set()
        for where, target, scope in wrapped:
            if isinstance(target, cst.FunctionDef):
                owner, body = model, model.scope_of.get(target)
            else:
                found = model.denote(target, scope)
                if len(found) != 1 or found[0].kind != "function" or found[0].node is None:
                    continue  # several functions, or not one the code shows
                owner, body = found[0].model, found[0].model.scope_of.get(found[0].node)
            if body is None:
                continue
            for draw, what in _draws(owner, body):
                node = draw if owner is model else where
                if id(node) in seen:
                    continue
                seen.add(id(node))
                yield Finding(
                    node,
                    f"{what} inside a function wrapped in `tf.recompute_grad`: the backward pass runs it again and "
                    "draws new random numbers, so the gradient is that of another forward (another dropout mask), "
                    "silently; use a stateless op with a fixed seed (`tf.nn.experimental.stateless_dropout`, "
                    "`tf.random.stateless_uniform`) or draw outside the recomputed function",
                )


def _draws(model: ModuleModel, body: Scope) -> Iterator[tuple[cst.Call, str]]:
    """The calls made directly in `body` that draw from a stateful random source."""
    for call in body.calls:
        qual = model.qualname(call.func)
        if qual in _STATEFUL:
            yield call, f"`{qual.replace('tensorflow.', 'tf.', 1)}`"
            continue
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in _GENERATOR_DRAWS \
                and _made_by(model, call.func.value, body, _GENERATORS):
            yield call, f"a draw of a `tf.random.Generator` (`.{call.func.attr.value}`)"
            continue
        if _training_true(call) and _made_by(model, call.func, body, _DROPOUT_LAYERS):
            yield call, "a `keras.layers.Dropout` called with `training=True`"


def _made_by(model: ModuleModel, expr: cst.BaseExpression, scope: Scope, constructors: frozenset[str]) -> bool:
    """`expr` is, on every path the code shows, the result of one of `constructors`."""
    if isinstance(expr, cst.Call):
        return model.qualname(expr.func) in constructors
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        # `self.dropout = keras.layers.Dropout(0.5)` in `__init__`: every value the class binds
        bound = model.attribute_values(scope, expr.attr.value)
        return bool(bound) and all(isinstance(v, cst.Call) and model.qualname(v.func) in constructors
                                   for v in bound)
    found = model.denote(expr, scope)
    return bool(found) and all(d.kind == "value" and isinstance(d.node, cst.Call)
                               and d.model.qualname(d.node.func) in constructors for d in found)


def _training_true(call: cst.Call) -> bool:
    return any(a.keyword is not None and a.keyword.value == "training" and isinstance(a.value, cst.Name)
               and a.value.value == "True" for a in call.args)
