"""Names that identify TensorFlow's custom_gradient, shared by the quick scan (Python's `ast`)
and the model (libcst). Kept free of libcst so that deciding a file needs no parse imports none."""

from __future__ import annotations

# Qualified names, after import resolution, that are TensorFlow's custom_gradient. Keras 3's
# keras.ops.custom_gradient, jax.custom_gradient, TFP's and Mesh-TF's have other contracts.
TF_CUSTOM_GRADIENT = frozenset(
    {
        "tensorflow.custom_gradient",
        "tensorflow.python.ops.custom_gradient.custom_gradient",
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
