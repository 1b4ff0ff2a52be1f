"""Names that identify TensorFlow's (and Keras 3's) custom_gradient, shared by the quick scan
(Python's `ast`) and the model (libcst). Kept free of libcst, so that deciding whether a file
needs a parse at all imports none."""

from __future__ import annotations

# Qualified names, after import resolution, that are TensorFlow's custom_gradient. Keras 3's
# keras.ops.custom_gradient, jax.custom_gradient, TFP's and Mesh-TF's have other contracts.
TF_CUSTOM_GRADIENT = frozenset(
    {
        "tensorflow.custom_gradient",
        "tensorflow.python.ops.custom_gradient.custom_gradient",
    }
)
# Keras 3's custom_gradient: on the TensorFlow backend it is `tf.custom_gradient(f=fun)`
# (keras/src/backend/tensorflow/core.py), its grad fns written `grad(*args, upstream=None)`.
# Its sites are checked by the rules whose TensorFlow behaviour applies (`rules/_keras_ops.py`).
KERAS_CUSTOM_GRADIENT = frozenset(
    {
        "keras.ops.custom_gradient",
        "keras.src.ops.custom_gradient",
        "keras.src.ops.core.custom_gradient",
        "tensorflow.keras.ops.custom_gradient",
    }
)


def normalize(qualname: str | None) -> str | None:
    """`tensorflow.compat.v1.x` and `tensorflow.compat.v2.x` are `tensorflow.x`."""
    if qualname is None:
        return None
    for prefix in ("tensorflow.compat.v1.", "tensorflow.compat.v2."):
        if qualname.startswith(prefix):
            return "tensorflow." + qualname[len(prefix) :]
    return qualname


def alias_to_tensorflow(dotted: str, aliases: tuple[str, ...]) -> str:
    """`lingvo.compat.custom_gradient` -> `tensorflow.custom_gradient` for a module configured
    as a re-export of TensorFlow (`[tool.cglint] tensorflow-aliases = ["lingvo.compat"]`)."""
    for alias in aliases:
        if dotted == alias or dotted.startswith(alias + "."):
            return "tensorflow" + dotted[len(alias):]
    return dotted
