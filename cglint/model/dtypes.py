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

from cglint.cstwalk import child_fields
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
                 "tensorflow.range": None, "tensorflow.random.normal": 3, "tensorflow.random.uniform": 3,
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

# What a value's dtype is when the code names none (read only as evidence of an input's dtype,
# never to call a gradient fixed): these take their value's dtype (Python floats make float32,
# ints int32; the position of the value) ...
_FROM_VALUE = {"tensorflow.constant": 0, "tensorflow.convert_to_tensor": 0, "tensorflow.Variable": 0,
               "tensorflow.fill": 1}
# ... and these make float32 (where a positional dtype would go).
_FLOAT32 = {"tensorflow.zeros": 1, "tensorflow.ones": 1, "tensorflow.eye": 3, "tensorflow.random.normal": 3,
            "tensorflow.random.uniform": 3, "tensorflow.random.truncated_normal": 3,
            "tensorflow.random.stateless_normal": 4, "tensorflow.random.stateless_uniform": 4,
            "tensorflow.random.stateless_truncated_normal": 4}
# TensorFlow ops whose two tensor operands must have one dtype (no promotion; Keras ops and
# Keras variables promote, so they are not here).
_BINARY = {"tensorflow.multiply", "tensorflow.math.multiply", "tensorflow.add", "tensorflow.math.add",
           "tensorflow.subtract", "tensorflow.math.subtract", "tensorflow.divide", "tensorflow.math.divide",
           "tensorflow.truediv", "tensorflow.math.truediv", "tensorflow.matmul", "tensorflow.linalg.matmul",
           "tensorflow.maximum", "tensorflow.math.maximum", "tensorflow.minimum", "tensorflow.math.minimum",
           "tensorflow.pow", "tensorflow.math.pow", "tensorflow.math.squared_difference"}
# Ops among those whose result has another dtype than their input (a complex input's `abs` or
# variance, comparisons, indices): the tf.math / tf.nn functions TensorFlow 2.21 gives another
# dtype for a float32 or complex64 argument, and the comparisons.
_NEW_DTYPE = frozenset({"abs", "real", "imag", "angle", "argmax", "argmin", "count_nonzero", "equal", "not_equal",
                        "greater", "greater_equal", "less", "less_equal", "is_nan", "is_inf", "is_finite",
                        "logical_and", "logical_or", "logical_not", "logical_xor", "top_k", "in_top_k", "bincount",
                        "reduce_all", "reduce_any", "zero_fraction", "approx_max_k", "approx_min_k",
                        "is_non_decreasing", "is_strictly_increasing", "isotonic_regression", "reduce_std",
                        "reduce_variance", "ctc_unique_labels"})
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.MatrixMultiply, cst.Power)


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


def fixed_dtype(model: ModuleModel, expr: cst.BaseExpression | None, scope: Scope, depth: int = 0,
                defaults: bool = False) -> tuple[str, cst.CSTNode] | None:
    """(dtype, the node that fixes it) when the code writes the expression's dtype in, else None.
    With `defaults`, also the dtype TensorFlow gives a value the code names no dtype for
    (`tf.constant([1.0, 2.0])`, `tf.Variable(3.0)`, `tf.random.normal(shape)`: float32; a
    `tf.Variable` the expression names), which says what an input holds, not that a gradient
    is fixed."""
    if expr is None or depth > 12:
        return None
    if isinstance(expr, (cst.BinaryOperation,)):
        return (fixed_dtype(model, expr.left, scope, depth + 1, defaults)
                or fixed_dtype(model, expr.right, scope, depth + 1, defaults))
    if isinstance(expr, cst.UnaryOperation):
        return fixed_dtype(model, expr.expression, scope, depth + 1, defaults)
    if isinstance(expr, cst.Subscript):
        return fixed_dtype(model, expr.value, scope, depth + 1, defaults)
    if isinstance(expr, cst.Name):
        found = []
        # `values`: a name imported from a project module is read there (`from .data import x`)
        for owner, value, where in model.values(expr, scope):
            if isinstance(value, Param) or value is None or value is expr or not isinstance(value, cst.BaseExpression):
                return None
            found.append(fixed_dtype(owner, value, owner.scope_of.get(value, where), depth + 1, defaults))
        if found and all(f is not None for f in found) and len({f[0] for f in found}) == 1:
            return found[0]
        return None
    if isinstance(expr, cst.Attribute) and defaults:
        return _variable_dtype(model, expr, scope, depth)
    if isinstance(expr, cst.Call):
        qn = model.qualname(expr.func)
        if qn is None:
            return None
        if qn in _CASTS:
            name = dtype_name(model, argument(expr, _CASTS[qn], "dtype"))
            return (name, expr) if name else None
        if qn in _CONSTRUCTORS:
            given = argument(expr, _CONSTRUCTORS[qn], "dtype")
            name = dtype_name(model, given)
            if name:
                return name, expr
            if given is not None:  # a dtype read from a tensor (`x.dtype`) follows it
                return None
            if qn.endswith("_like"):
                return fixed_dtype(model, argument(expr, 0, "input"), scope, depth + 1, defaults)
            if not defaults:
                return None
        if defaults:
            return _default_dtype(model, qn, expr, scope, depth)
        if qn in _SAME_DTYPE or qn.startswith(_SAME_DTYPE_PREFIXES):
            return _operands_dtype(model, expr, scope, depth, defaults)
        return None
    return None


def _operands_dtype(model: ModuleModel, call: cst.Call, scope: Scope, depth: int,
                    defaults: bool) -> tuple[str, cst.CSTNode] | None:
    """The dtype of an op whose result has its operands' dtype: the first positional one fixed."""
    for arg in call.args:
        if arg.keyword is None and not arg.star:
            hit = fixed_dtype(model, arg.value, scope, depth + 1, defaults)
            if hit:
                return hit
    return None


def _default_dtype(model: ModuleModel, qn: str, call: cst.Call, scope: Scope, depth: int) -> tuple[str, cst.CSTNode] | None:
    """The dtype of a constructor or op call the code names no dtype for (see `fixed_dtype`)."""
    if qn in _FLOAT32 and argument(call, _FLOAT32[qn], "dtype") is None:
        return "float32", call
    if qn in _FROM_VALUE:
        given = argument(call, 6 if qn == "tensorflow.Variable" else None, "dtype") or argument(call, None, "dtype_hint")
        if given is not None:
            named = dtype_name(model, given)
            return (named, call) if named else None
        value = argument(call, _FROM_VALUE[qn], "initial_value" if qn == "tensorflow.Variable" else "value")
        literal = _literal_dtype(value)
        if literal:
            return literal, call
        return fixed_dtype(model, value, scope, depth + 1, True)
    if qn in _SAME_DTYPE or qn.startswith(_SAME_DTYPE_PREFIXES + ("tensorflow.signal.",)):
        return _operands_dtype(model, call, scope, depth, True)
    return None


def _literal_dtype(expr: cst.BaseExpression | None) -> str | None:
    """float32 for Python floats (and lists of numbers holding one), int32 for ints: the dtype
    `tf.constant` gives a literal."""
    kinds: set[str] = set()

    def walk(e: cst.BaseExpression) -> bool:
        if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, (cst.Minus, cst.Plus)):
            return walk(e.expression)
        if isinstance(e, cst.Float):
            kinds.add("float32")
            return True
        if isinstance(e, cst.Integer):
            kinds.add("int32")
            return True
        if isinstance(e, (cst.List, cst.Tuple)):
            return all(not isinstance(el, cst.StarredElement) and walk(el.value) for el in e.elements)
        return False

    if expr is None or not walk(expr) or not kinds:
        return None
    return "float32" if "float32" in kinds else "int32"


def _variable_dtype(model: ModuleModel, expr: cst.BaseExpression, scope: Scope, depth: int) -> tuple[str, cst.CSTNode] | None:
    """The dtype of the one `tf.Variable` an expression holds (`self.gain`, `w`), from its
    constructor. Keras weights follow the layer's dtype policy (and promote), so they say nothing."""
    found = model.weights(expr, scope)
    if len(found) != 1 or found[0].keras or not found[0].exact:
        return None
    made = found[0].created_by
    if model.qualname(made.func) != "tensorflow.Variable":
        return None
    return _default_dtype(model, "tensorflow.Variable", made, model._scope_holding(made) or scope, depth + 1)


def input_dtype_evidence(model: ModuleModel, site: GradientSite, index: int) -> tuple[str, str] | None:
    """What the module says input `index` of `site` holds: (dtype, how we know), from its call
    sites (an argument with a fixed dtype) or a mixed-precision policy for a Keras layer's
    method. None when the module does not say."""
    passed = _passed_dtype(model, site, index)
    if passed is not None:
        return passed, "a call in this module passes it"
    if index < len(site.inputs) and (combined := forward_combines(model, site, site.inputs[index])) is not None:
        dtype, node = combined
        return dtype, (f"the forward computes `{model.module.code_for_node(node).strip()}`, and TensorFlow's "
                       f"ops need operands of one dtype")
    if site.is_method or site.scope.enclosing_class() is not None:
        policy = mixed_precision_policy(model)
        if policy:
            return policy, f"the module sets the `mixed_{policy}` policy, so a Keras layer computes in {policy}"
    return None


def _passed_dtype(model: ModuleModel, site: GradientSite, index: int) -> str | None:
    """The dtype a call of `site` in this module passes as input `index`, when the module shows it."""
    for call, scope in model.all_calls:
        if model.site_called_by(call, scope, imported=False) is not site:
            continue
        arg = argument(call, index)
        hit = fixed_dtype(model, arg, scope, defaults=True) if arg is not None else None
        if hit and hit[0] in _DTYPE_NAMES:
            return hit[0]
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


def forward_combines(model: ModuleModel, site: GradientSite, name: str) -> tuple[str, cst.CSTNode] | None:
    """(dtype, the operation) when the forward combines its input `name` with a tensor whose
    dtype the module shows (`x * scale` for `scale = tf.Variable(3.0)`, `x @ kernel`): TensorFlow's
    binary ops take operands of one dtype, so `name` holds that dtype or the forward fails. Only
    the forward's own statements count (not its grad fn's)."""
    forward = site.forward
    if not isinstance(forward, (cst.FunctionDef, cst.Lambda)):
        return None
    scope = site.scope

    def is_input(expr: cst.BaseExpression, depth: int = 0) -> bool:
        """`name` itself, or a value of its dtype made from it (`t = tf.tanh(x)`, `-x`, `x[0]`)."""
        if depth > 6:
            return False
        if isinstance(expr, cst.Name):
            bound = model.resolve(expr, scope)
            if not bound:
                return False
            if expr.value == name and all(isinstance(b, Param) for b in bound):
                return True
            return all(isinstance(b, cst.BaseExpression) and b is not expr and is_input(b, depth + 1) for b in bound)
        if isinstance(expr, cst.UnaryOperation):
            return is_input(expr.expression, depth + 1)
        if isinstance(expr, cst.Subscript):
            return is_input(expr.value, depth + 1)
        if isinstance(expr, cst.Call):
            qn = model.qualname(expr.func) or ""
            first = expr.args[0] if expr.args else None
            return ((qn in _SAME_DTYPE or qn.startswith(("tensorflow.math.", "tensorflow.nn.")))
                    and qn.rsplit(".", 1)[-1] not in _NEW_DTYPE and first is not None and first.keyword is None and not first.star
                    and is_input(first.value, depth + 1))
        return False

    def other(a: cst.BaseExpression, b: cst.BaseExpression) -> cst.BaseExpression | None:
        return b if is_input(a) else a if is_input(b) else None

    stack: list[cst.CSTNode] = [forward.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            continue  # a grad fn or helper: another scope
        operand = None
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _ARITHMETIC):
            operand = other(node.left, node.right)
        elif isinstance(node, cst.Call) and model.qualname(node.func) in _BINARY:
            a, b = argument(node, 0, "x") or argument(node, 0, "a"), argument(node, 1, "y") or argument(node, 1, "b")
            if a is not None and b is not None:
                operand = other(a, b)
        if operand is not None:
            hit = fixed_dtype(model, operand, scope, defaults=True)
            if hit is None and isinstance(operand, cst.Name) and operand.value in site.inputs:
                # another input, whose dtype a call in the module shows (`beta * x`)
                bound = model.resolve(operand, scope)
                if bound and all(isinstance(b, Param) for b in bound):
                    passed = _passed_dtype(model, site, site.inputs.index(operand.value))
                    hit = (passed, node) if passed else None
            if hit is not None and hit[0] in _DTYPE_NAMES:
                return hit[0], node
        for field in child_fields(type(node)):
            value = getattr(node, field)
            if isinstance(value, cst.CSTNode):
                stack.append(value)
            elif isinstance(value, (list, tuple)):
                stack.extend(v for v in value if isinstance(v, cst.CSTNode))
    return None
