"""`tf.RegisterGradient` functions through the path `cglint --runtime=all` takes (the static plan,
the child's check in a graph with the module's `gradient_override_map`), with real TensorFlow, in
this process. Registered names are global to TensorFlow's registry: each module here uses its own."""

import textwrap
import uuid

import tensorflow as tf

from cglint.engine import lint_file
from cglint.runtime.child import check_one, import_by_path
from cglint.runtime.plan import plan_file

MODULE = '''
import tensorflow as tf


@tf.RegisterGradient("PassRelu_{tag}")
def pass_through(op, grad):
    return grad  # the upstream, without Relu's derivative


@tf.RegisterGradient("MaskedRelu_{tag}")
def masked(op, grad):
    return grad * tf.cast(op.outputs[0] > 0, grad.dtype)


@tf.RegisterGradient("Reverse_{tag}")
def flipped_twice(op, grad):
    return [grad * 2.0, grad]  # two gradients for Identity's one input


@tf.RegisterGradient("SignSTE_{tag}")
def sign_ste(op, grad):
    return tf.clip_by_value(grad, -1.0, 1.0)  # straight-through, as binarised networks train


def model(x):
    g = tf.compat.v1.get_default_graph()
    with g.gradient_override_map({{"Relu": "PassRelu_{tag}", "Sign": "SignSTE_{tag}"}}):
        a = tf.nn.relu(x) + tf.sign(x)
    with g.gradient_override_map({{"Relu": "MaskedRelu_{tag}", "Identity": "Reverse_{tag}"}}):
        return tf.identity(tf.nn.relu(a))
'''


def _verdicts(tmp_path):
    path = tmp_path / f"registered_{uuid.uuid4().hex[:8]}.py"
    path.write_text(MODULE.format(tag=path.stem))
    result = lint_file(str(path))
    planned = [p for p in plan_file(result, everything=True) if p.request.get("registered")]
    module = import_by_path(str(path))
    return {p.request["function"]: check_one(module, result.source, p.request, seed=0) for p in planned}


def test_registered_gradients_are_checked_against_the_op_they_override(tmp_path):
    got = _verdicts(tmp_path)
    assert set(got) == {"pass_through", "masked", "flipped_twice", "sign_ste"}
    # The upstream passed through for Relu: the symptom is named.
    wrong = got["pass_through"]
    assert wrong["verdict"] == "mismatch" and wrong["modes"] == {"graph": "mismatch"}
    assert wrong["detail"].startswith("d/features off by ")
    assert "the grad fn returns the upstream unchanged, without the forward's own derivative" in wrong["detail"]
    assert "gradient of Relu registered as 'PassRelu_" in wrong["detail"]
    # Relu's derivative from op.outputs: TensorFlow's own gradient, exactly.
    right = got["masked"]
    assert (right["verdict"], right["reference"]) == ("match", "autodiff") and right["max_rel_error"] == 0.0
    # Two gradients for one input: TensorFlow's own message from tf.gradients.
    count = got["flipped_twice"]
    assert count["verdict"] == "error" and "Num gradients 2 generated for op" in count["detail"]
    # Sign has no gradient of its own; a clipped pass-through is a straight-through estimator.
    ste = got["sign_ste"]
    assert ste["verdict"] == "intentional" and "straight-through estimator" in ste["detail"]


def test_a_registered_gradient_whose_op_the_module_does_not_name_is_skipped_with_the_reason(tmp_path):
    path = tmp_path / f"unnamed_{uuid.uuid4().hex[:8]}.py"
    path.write_text(textwrap.dedent(f'''
        import tensorflow as tf

        NAME = "Unnamed_{path.stem}"

        @tf.RegisterGradient(NAME + "_computed")
        def computed_name(op, grad):
            return grad

        @tf.RegisterGradient("Unnamed_{path.stem}")
        def unused(op, grad):
            return grad

        def model(x, ops):
            with tf.compat.v1.get_default_graph().gradient_override_map(ops):
                return tf.identity(x)
    '''))
    result = lint_file(str(path))
    (planned,) = plan_file(result, everything=True)  # a name that is not a literal is not followed
    got = check_one(import_by_path(str(path)), result.source, planned.request, seed=0)
    assert (planned.request["function"], got["verdict"]) == ("unused", "skipped")
    assert got["detail"] == f"no gradient_override_map in the module sends an op to 'Unnamed_{path.stem}'"
    assert tf.executing_eagerly()  # the checks build graphs of their own: eager mode stays on


DEFUN = '''
import tensorflow as tf
from tensorflow.python.framework import function


def passes_through(op, grad):
    return grad  # should be grad * sigmoid(x)


def sigmoid_grad(op, grad):
    return grad * tf.sigmoid(op.inputs[0])


@function.Defun(tf.float32, python_grad_func=passes_through)
def softplus(x):
    return tf.math.log(1.0 + tf.exp(x))


@function.Defun(tf.float32, python_grad_func=sigmoid_grad)
def softplus_fixed(x):
    return tf.math.log(1.0 + tf.exp(x))
'''


def test_a_defun_gradient_function_is_checked_against_autodiff_of_its_python_function(tmp_path):
    path = tmp_path / f"defun_{uuid.uuid4().hex[:8]}.py"
    path.write_text(DEFUN)
    result = lint_file(str(path))
    planned = {p.request["function"]: p for p in plan_file(result, everything=True)}
    assert set(planned) == {"softplus", "softplus_fixed"}
    module = import_by_path(str(path))
    got = {name: check_one(module, result.source, p.request, seed=0) for name, p in planned.items()}
    wrong = got["softplus"]
    assert wrong["verdict"] == "mismatch" and wrong["detail"].startswith("d/x off by ")
    assert "the grad fn returns the upstream unchanged" in wrong["detail"]
    assert "(gradient function of the Defun softplus, run by tf.gradients in a graph)" in wrong["detail"]
    assert (got["softplus_fixed"]["verdict"], got["softplus_fixed"]["reference"]) == ("match", "autodiff")


def test_an_override_key_that_is_no_op_type_is_the_bug_with_the_closest_op_named(tmp_path):
    """`{"Matmul": ...}`: gradient_override_map matches op types exactly, so the registered
    gradient never runs. That is the finding, not a reason to skip the function."""
    path = tmp_path / f"misspelt_{uuid.uuid4().hex[:8]}.py"
    path.write_text(textwrap.dedent(f'''
        import tensorflow as tf


        @tf.RegisterGradient("ScaledMatMul_{path.stem}")
        def scaled(op, grad):
            return grad * 0.5, grad


        def build(a, b):
            with tf.compat.v1.get_default_graph().gradient_override_map({{"Matmul": "ScaledMatMul_{path.stem}"}}):
                return tf.matmul(a, b)
        '''))
    result = lint_file(str(path))
    (planned,) = [p for p in plan_file(result, everything=True) if p.request.get("registered")]
    got = check_one(import_by_path(str(path)), result.source, planned.request, seed=0)
    assert (got["verdict"], got["detail"]) == ("error", (
        f"gradient_override_map sends 'Matmul' to 'ScaledMatMul_{path.stem}', but 'Matmul' is not an op type "
        "TensorFlow knows (did you mean 'MatMul'?): the map ignores it, and the registered gradient never runs"))
