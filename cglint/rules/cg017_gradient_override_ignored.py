"""CG017 gradient-override-ignored."""

from typing import Iterator

import libcst as cst

from cglint.diagnostics import Finding
from cglint.model import ModuleModel
from cglint.rules.base import Invalid, Rule

# Calls that put the program in TensorFlow 1's graph mode, where the override map works, or take
# gradients symbolically (`tf.gradients` honours the map inside a graph, tf.function's included),
# or record the tape's operation themselves (TensorFlow's own custom_gradient does both).
_GRAPH_MODE = {"tensorflow.compat.v1.disable_eager_execution", "tensorflow.compat.v1.disable_v2_behavior",
               "tensorflow.compat.v1.Session", "tensorflow.compat.v1.placeholder",
               "tensorflow.compat.v1.wrap_function", "tensorflow.gradients", "tensorflow.compat.v1.gradients",
               "tensorflow.python.ops.gradients_impl.gradients", "tensorflow.python.eager.record.record_operation",
               "tensorflow.python.eager.tape.record_operation"}


class GradientOverrideIgnored(Rule):
    """
    ## What it does
    Flags `graph.gradient_override_map({...})` in code that runs with TensorFlow 2's default
    eager execution: the module neither disables eager execution (`disable_eager_execution`,
    `disable_v2_behavior`) nor builds a `tf.Graph` for the block (`with graph.as_default():`)
    nor uses TensorFlow 1's graph API (`tf.compat.v1.Session`, `placeholder`,
    `import tensorflow.compat.v1 as tf`) nor takes gradients symbolically (`tf.gradients`,
    which honours the map inside a graph, `tf.function`'s included).

    ## Why is this bad?
    The override map only changes the gradient of ops built into a graph, for `tf.gradients`.
    Eagerly, and for `tf.GradientTape` inside `tf.function` (so under `model.fit`), TensorFlow
    2.21 ignores it without a word:
    the `tf.RegisterGradient` function it names never runs and the op's own gradient is used.
    A gradient clipped with `{"Identity": "ClipGrad"}` comes back unclipped (5.0 instead of 0.1
    in the rule's example). Write the custom gradient with `tf.custom_gradient`, which works in
    every mode.
    """

    code = "CG017"
    name = "gradient-override-ignored"
    summary = "gradient_override_map in TensorFlow 2 code, where it is silently ignored"

    INVALID = [
        Invalid(
            '''
import tensorflow as tf

@tf.RegisterGradient("ClipGrad")
def _clip_grad(op, grad):
    return tf.clip_by_value(grad, -0.1, 0.1)

def clipped_identity(x):
    with tf.compat.v1.get_default_graph().gradient_override_map({"Identity": "ClipGrad"}):
        return tf.identity(x)
''',
            at="9:10"),
        Invalid(
            '''
import tensorflow as tf

@tf.function
def train_step(x):
    graph = tf.compat.v1.get_default_graph()
    with tf.GradientTape() as tape:
        tape.watch(x)
        with graph.gradient_override_map({"Sign": "Identity"}):
            y = tf.sign(x)
    return tape.gradient(y, x)
''',
            at="9:14"),
        Invalid(
            '''
import keras
import tensorflow as tf

class BinaryActivation(keras.layers.Layer):
    def call(self, x):
        g = tf.compat.v1.get_default_graph()
        with g.gradient_override_map({"Sign": "Identity"}):
            return tf.sign(x)
''',
            at="8:14"),
    ]
    VALID = [
        '''
import tensorflow as tf

@tf.custom_gradient
def clipped_identity(x):
    return tf.identity(x), lambda dy: tf.clip_by_value(dy, -0.1, 0.1)
''',
        '''
import tensorflow as tf

@tf.RegisterGradient("ClipGrad")
def _clip_grad(op, grad):
    return tf.clip_by_value(grad, -0.1, 0.1)

graph = tf.Graph()
with graph.as_default():
    x = tf.constant([3.0])
    with graph.gradient_override_map({"Identity": "ClipGrad"}):
        y = tf.identity(x)
''',
        '''
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

def clipped_identity(x):
    with tf.get_default_graph().gradient_override_map({"Identity": "ClipGrad"}):
        return tf.identity(x)
''',
    ]

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        calls = [(c, s) for c, s in model.all_calls
                 if isinstance(c.func, cst.Attribute) and c.func.attr.value == "gradient_override_map"]
        if not calls or not model.imports_tensorflow or _graph_mode_module(model):
            return
        for call, _ in calls:
            if _inside_as_default(model, call):
                continue
            yield Finding(
                call,
                "`gradient_override_map` is ignored by `tf.GradientTape` (eagerly and under `tf.function`, so in "
                "`model.fit`); only `tf.gradients` in a graph honours it: the gradient it names never runs and the "
                "op's own gradient is used, silently; write the gradient with `tf.custom_gradient`",
            )


def _graph_mode_module(model: ModuleModel) -> bool:
    if any(q == "tensorflow.compat.v1" for q in model.imports.values()):
        return True  # `import tensorflow.compat.v1 as tf`: TensorFlow 1 code
    return any(model.qualname(c.func) in _GRAPH_MODE for c, _ in model.all_calls)


def _inside_as_default(model: ModuleModel, node: cst.CSTNode) -> bool:
    """Within a `with <graph>.as_default():` block (graph mode for what it builds)."""
    parent = model.parent(node)
    while parent is not None:
        if isinstance(parent, cst.With) and any(
                isinstance(item.item, cst.Call) and isinstance(item.item.func, cst.Attribute)
                and item.item.func.attr.value == "as_default" for item in parent.items):
            return True
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef)):
            return False  # a function called from anywhere: its caller decides
        parent = model.parent(parent)
    return False
