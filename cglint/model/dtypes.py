"""Dtypes fixed by the code: which expressions have a dtype written into them (`tf.cast(g,
tf.float32)`, `tf.constant(..., dtype=tf.float64)`, arithmetic with such a value), and what the
module says about an input's dtype (its call sites, the forward's own casts, a mixed-precision
policy). A dtype derived from a tensor (`x.dtype`, `dy.dtype`, `tf.zeros_like(x)`) is not fixed:
it follows the input wherever the function is used.

TensorFlow's binary ops need equal dtypes (Python numbers adapt), so one fixed operand fixes
the result; NumPy arrays are converted to the tensor's dtype there, so they fix nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from cglint.model.scopes import Param, Scope, argument

if TYPE_CHECKING:
    from cglint.model.module import ModuleModel
    from cglint.model.sites import GradientSite

FLOATS = ("float16", "bfloat16", "float32", "float64")
_DTYPE_NAMES = FLOATS + ("half", "double", "float", "complex64", "complex128")
_CANONICAL = {"half": "float16", "double": "float64", "float": "float32"}

# dtype given as the second positional argument or `dtype=`.
_CASTS = {"tensorflow.cast": 1, "tensorflow.dtypes.cast": 1, "tensorflow.saturate_cast": 1,
          "keras.ops.cast": 1, "tensorflow.image.convert_image_dtype": 1}
# dtype given only by keyword (`tf.constant(1.0, dtype=tf.float64)`); position where it may
# also be passed positionally.
_CONSTRUCTORS = {"tensorflow.constant": 1, "tensorflow.convert_to_tensor": 1, "tensorflow.zeros": 1,
                 "tensorflow.ones": 1, "tensorflow.fill": None, "tensorflow.eye": None,
                 "tensorflow.range": None, "tensorflow.random.normal": 3, "tensorflow.random.uniform": 4,
                 "tensorflow.zeros_like": 1, "tensorflow.ones_like": 1, "keras.ops.convert_to_tensor": 1,
                 "keras.ops.zeros": 1, "keras.ops.ones": 1, "keras.ops.zeros_like": 1, "keras.ops.ones_like": 1}
# Ops whose result has their (first tensor) input's dtype.
_SAME_DTYPE_PREFIXES = ("tensorflow.math.", "tensorflow.nn.", "keras.ops.")
_SAME_DTYPE = {"tensorflow.exp", "tensorflow.log", "tensorflow.sin", "tensorflow.cos", "tensorflow.tanh",
               "tensorflow.sigmoid", "tensorflow.square", "tensorflow.sqrt", "tensorflow.abs",
               "tensorflow.reduce_sum", "tensorflow.reduce_mean", "tensorflow.matmul", "tensorflow.multiply",
               "tensorflow.add", "tensorflow.subtract", "tensorflow.divide", "tensorflow.reshape",
               "tensorflow.transpose", "tensorflow.where", "tensorflow.maximum", "tensorflow.minimum",
               "tensorflow.clip_by_value", "tensorflow.identity", "tensorflow.broadcast_to",
               "tensorflow.expand_dims", "tensorflow.squeeze", "tensorflow.tile", "tensorflow.concat",
               "tensorflow.stack", "tensorflow.negative", "tensorflow.pow", "tensorflow.einsum"}
_MIXED_POLICIES = {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}


def dtype_name(model: ModuleModel, expr: cst.BaseExpression | None) -> str | None:
    """`tf.float64`, `np.float64`, `"float64"`, `tf.dtypes.float64` -> "float64"; None for a
    dtype read from a tensor (`x.dtype`) or anything else."""
    if isinstance(expr, cst.SimpleString):
        name = expr.evaluated_value if isinstance(expr.evaluated_value, str) else None
    else:
        qn = model.qualname(expr)
        if qn is None or not (qn.startswith(("tensorflow.", "numpy.", "keras."))):
            return None
        name = qn.rsplit(".", 1)[-1]
    if name not in _DTYPE_NAMES:
        return None
    return _CANONICAL.get(name, name)


def fixed_dtype(model: ModuleModel, expr: cst.BaseExpression | None, scope: Scope, depth: int = 0) -> tuple[str, cst.CSTNode] | None:
    """(dtype, the node that fixes it) when the code writes the expression's dtype in, else None."""
    if expr is None or depth > 12:
        return None
    if isinstance(expr, (cst.BinaryOperation,)):
        return fixed_dtype(model, expr.left, scope, depth + 1) or fixed_dtype(model, expr.right, scope, depth + 1)
    if isinstance(expr, cst.UnaryOperation):
        return fixed_dtype(model, expr.expression, scope, depth + 1)
    if isinstance(expr, cst.Subscript):
        return fixed_dtype(model, expr.value, scope, depth + 1)
    if isinstance(expr, cst.Name):
        found = []
        for value in model.resolve(expr, scope):
            if isinstance(value, Param) or value is None or value is expr or not isinstance(value, cst.BaseExpression):
                return None
            found.append(fixed_dtype(model, value, model.scope_of.get(value, scope), depth + 1))
        if found and all(f is not None for f in found) and len({f[0] for f in found}) == 1:
            return found[0]
        return None
    if isinstance(expr, cst.Call):
        qn = model.qualname(expr.func)
        if qn is None:
            return None
        if qn in _CASTS:
            name = dtype_name(model, argument(expr, _CASTS[qn], "dtype"))
            return (name, expr) if name else None
        if qn in _CONSTRUCTORS:
            name = dtype_name(model, argument(expr, _CONSTRUCTORS[qn], "dtype"))
            if name:
                return name, expr
            if qn.endswith("_like"):
                return fixed_dtype(model, argument(expr, 0, "input"), scope, depth + 1)
            return None
        if qn in _SAME_DTYPE or qn.startswith(_SAME_DTYPE_PREFIXES):
            for arg in expr.args:
                if arg.keyword is None and not arg.star:
                    hit = fixed_dtype(model, arg.value, scope, depth + 1)
                    if hit:
                        return hit
        return None
    return None


def input_dtype_evidence(model: ModuleModel, site: GradientSite, index: int) -> tuple[str, str] | None:
    """What the module says input `index` of `site` holds: (dtype, how we know), from its call
    sites (an argument with a fixed dtype) or a mixed-precision policy for a Keras layer's
    method. None when the module does not say."""
    for call, scope in model.all_calls:
        if model.site_called_by(call, scope, imported=False) is not site:
            continue
        arg = argument(call, index)
        hit = fixed_dtype(model, arg, scope) if arg is not None else None
        if hit and hit[0] in FLOATS:
            return hit[0], "a call in this module passes it"
    if site.is_method or site.scope.enclosing_class() is not None:
        policy = mixed_precision_policy(model)
        if policy:
            return policy, f"the module sets the `mixed_{policy}` policy, so a Keras layer computes in {policy}"
    return None


def mixed_precision_policy(model: ModuleModel) -> str | None:
    """float16/bfloat16 when the module sets a mixed-precision policy
    (`keras.mixed_precision.set_global_policy("mixed_float16")`, `set_dtype_policy`)."""
    for call, _ in model.all_calls:
        qn = model.qualname(call.func) or ""
        if qn.rsplit(".", 1)[-1] not in ("set_global_policy", "set_dtype_policy") or "mixed_precision" not in qn and "keras" not in qn:
            continue
        arg = argument(call, 0, "policy")
        if isinstance(arg, cst.SimpleString) and arg.evaluated_value in _MIXED_POLICIES:
            return _MIXED_POLICIES[arg.evaluated_value]
    return None


def forward_casts(model: ModuleModel, site: GradientSite, name: str) -> tuple[str, cst.Call] | None:
    """(dtype, the call) when the forward casts its input `name` to a fixed float dtype
    (`tf.cast(x, tf.float32)`): the author expects `x` to come in another dtype (mixed
    precision computes a float16 input in float32 for stability)."""
    for call, scope in site.calls():
        if model.qualname(call.func) not in _CASTS:
            continue
        arg = argument(call, 0, "x")
        if isinstance(arg, cst.Name) and arg.value == name:
            bound = model.resolve(arg, scope)
            if bound and all(isinstance(b, Param) for b in bound):
                dt = dtype_name(model, argument(call, 1, "dtype"))
                if dt in FLOATS:
                    return dt, call
    return None
