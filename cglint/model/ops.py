"""TensorFlow's names as the model reads them: ops under every spelling, `tf.function`, and
the calls known to read no variables."""

from __future__ import annotations


TF_FUNCTION = frozenset(
    {
        "tensorflow.function",
        "tensorflow.python.eager.def_function.function",
        "tensorflow.python.eager.polymorphic_function.polymorphic_function.function",
    }
)
# Modules whose members are TensorFlow ops under their plain name (tf.tan, tf.math.tan, ...).
_OP_NAMESPACES = (
    "tensorflow.math.",
    "tensorflow.nn.",
    "tensorflow.python.ops.math_ops.",
    "tensorflow.python.ops.gen_math_ops.",
    "tensorflow.python.ops.nn_ops.",
    "tensorflow.python.ops.nn_impl.",
    "tensorflow.python.ops.gen_nn_ops.",
    "tensorflow.python.ops.special_math_ops.",
    # Activations and Keras 3 ops under every spelling (`tf.keras.activations.sigmoid`,
    # `keras.activations.tanh`, `keras.ops.sin`, `from keras import activations`).
    "tensorflow.keras.activations.",
    "tensorflow.keras.ops.",
    "keras.activations.",
    "keras.ops.",
    "keras.src.activations.",
    "keras.src.ops.",
    "tensorflow.experimental.numpy.",  # NumPy's names for the same maths (`tnp.arcsinh`)
    "tensorflow.quantization.",
    "keras.quantizers.",
    "tensorflow.",
)
# Spellings of the same op under another name.
_OP_ALIASES = {"exponential": "exp", "math.log1p": "log1p", "raw_ops.BroadcastGradientArgs": "broadcast_gradient_args"}


def tf_op_name(qualname: str | None) -> str | None:
    """`tensorflow.math.tan` -> `tan`; None when the name is not a TensorFlow op."""
    if not qualname:
        return None
    for ns in _OP_NAMESPACES:
        if qualname.startswith(ns):
            rest = qualname[len(ns) :]
            rest = _OP_ALIASES.get(rest, rest)
            return rest if "." not in rest else None
    return None


# Calls that read no variables, for `may_read_unseen_variables`.
PURE_BUILTINS = frozenset({"len", "range", "int", "float", "bool", "str", "tuple", "list", "dict", "zip", "enumerate",
                            "isinstance", "min", "max", "abs", "sum", "print", "super", "getattr", "hasattr"})
PURE_CALLS = frozenset({"numpy.sqrt", "numpy.pi", "math.sqrt", "math.log", "math.pi"})
# TensorFlow names that are not functions: dtypes and constants (`tf.float32`, `tf.newaxis`).
_TF_NON_FUNCTIONS = frozenset({"float16", "float32", "float64", "bfloat16", "half", "double", "int8", "int16",
                               "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool", "string",
                               "complex64", "complex128", "qint8", "quint8", "qint32", "variant", "resource",
                               "newaxis", "pi", "e", "inf", "nan"})


def is_function_name(qualname: str) -> bool:
    """`tensorflow.nn.relu`, `keras.activations.gelu`: a TensorFlow or Keras function."""
    for prefix in ("keras.activations.", "tensorflow.keras.activations.", "keras.ops."):
        if qualname.startswith(prefix):
            rest = qualname[len(prefix):]
            return bool(rest) and "." not in rest and rest[0].islower()
    op = tf_op_name(qualname)
    return op is not None and op[:1].islower() and op not in _TF_NON_FUNCTIONS


# Ops that return a list of tensors: an output built by them is not a single tensor.
MULTI_OUTPUT_OPS = frozenset({"split", "unstack", "meshgrid", "dynamic_partition", "top_k", "unique", "moments"})
