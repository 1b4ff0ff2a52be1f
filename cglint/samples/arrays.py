"""The project's own NumPy versions of TensorFlow / Keras ops, for evaluating a forward's and a
grad fn's maths on small sample arrays (`cglint.samples.evaluate`). Never TensorFlow, never the
user's code. Each op takes TensorFlow's (or Keras's) parameter names, so keyword calls bind as
they do there; a call these do not accept raises TypeError, which the evaluator reads as Unknown.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np


# Nothing larger is built: the shapes come from the linted module (`tf.zeros([100000, 100000])`,
# `range(10**9)`, a broadcast of two long vectors), and the evaluator must not allocate them.
MAX_ELEMENTS = 4096


def bounded(n: int) -> int:
    if n > MAX_ELEMENTS:
        raise ValueError(f"{n} elements, more than the evaluator builds")
    return n


def fits(*shapes) -> None:
    """ValueError unless arrays of these shapes broadcast to at most MAX_ELEMENTS."""
    bounded(math.prod(np.broadcast_shapes(*(tuple(int(d) for d in s) for s in shapes))))


def _f(a):
    """A float64 array (bools and Python numbers too): every evaluation is in float64."""
    return np.asarray(a, dtype=np.float64)


def _unary(fn: Callable) -> Callable:
    def op(x, name=None):
        return fn(_f(x))
    return op


def _binary(fn: Callable) -> Callable:
    def op(x, y, name=None):
        fits(np.shape(x), np.shape(y))
        return fn(_f(x), _f(y))
    return op


def _axis(axis):
    return tuple(int(a) for a in axis) if isinstance(axis, (list, tuple, np.ndarray)) else (
        None if axis is None else int(axis))


def _reduce(fn: Callable) -> Callable:
    def op(input_tensor=None, axis=None, keepdims=False, name=None, x=None):
        return fn(_f(input_tensor if x is None else x), axis=_axis(axis), keepdims=bool(keepdims))
    return op


def _condition(c):
    # A condition TensorFlow would only take as bool: an input of unknown dtype read as one is
    # sampled by sign (its samples are never near 0).
    c = np.asarray(c)
    return c if c.dtype == bool else c > 0


def _where(condition, x=None, y=None, name=None, x1=None, x2=None):
    x, y = (x1, x2) if x is None and x1 is not None else (x, y)
    if x is None or y is None:
        raise TypeError("where with one argument")
    fits(np.shape(condition), np.shape(x), np.shape(y))
    return np.where(_condition(condition), _f(x), _f(y))


def _matmul(a=None, b=None, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False, name=None,
            x1=None, x2=None):
    a, b = _f(a if x1 is None else x1), _f(b if x2 is None else x2)
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError("matmul of a vector")
    a = np.swapaxes(a, -1, -2) if transpose_a or adjoint_a else a
    b = np.swapaxes(b, -1, -2) if transpose_b or adjoint_b else b
    fits(a.shape[:-2] + (a.shape[-2], 1), b.shape[:-2] + (1, b.shape[-1]))  # the product's shape
    return a @ b


def _transpose(a=None, perm=None, conjugate=False, name=None, x=None, axes=None):
    a = _f(a if x is None else x)
    perm = perm if perm is not None else axes
    return np.transpose(a, None if perm is None else _axis(perm))


def _reshape(tensor=None, shape=None, name=None, x=None, newshape=None):
    shape = shape if shape is not None else newshape
    return np.reshape(_f(tensor if x is None else x), tuple(int(s) for s in np.ravel(shape)))


def _expand_dims(input=None, axis=None, name=None, x=None):
    return np.expand_dims(_f(input if x is None else x), int(axis))


def _squeeze(input=None, axis=None, name=None, x=None):
    return np.squeeze(_f(input if x is None else x), _axis(axis))


def _like(value: float) -> Callable:
    def op(input=None, dtype=None, name=None, x=None, optimize=True):
        return np.full(np.shape(input if x is None else x), value)
    return op


def _filled(value: float) -> Callable:
    def op(shape, dtype=None, name=None, layout=None):
        dims = tuple(int(s) for s in np.ravel(shape))
        bounded(math.prod(dims))
        return np.full(dims, value)
    return op


def _clip(t=None, clip_value_min=None, clip_value_max=None, name=None, x=None, x_min=None, x_max=None):
    lo = clip_value_min if clip_value_min is not None else x_min
    hi = clip_value_max if clip_value_max is not None else x_max
    fits(np.shape(t if x is None else x), np.shape(lo), np.shape(hi))
    return np.clip(_f(t if x is None else x), _f(lo), _f(hi))


FLOAT_DTYPES = frozenset({"float16", "float32", "float64", "bfloat16", "half", "double"})


def _cast(x, dtype=None, name=None):
    if dtype in FLOAT_DTYPES:
        return _f(x)
    if dtype == "bool":
        return np.asarray(x) != 0
    raise TypeError(f"cast to {dtype}")


def _sigmoid(x):
    return np.exp(-np.logaddexp(0.0, -x))


def _divide_no_nan(x, y, name=None):
    fits(np.shape(x), np.shape(y))
    x, y = np.broadcast_arrays(_f(x), _f(y))
    return np.divide(x, y, out=np.zeros_like(x), where=y != 0)


def _broadcast_gradient_args(s0=None, s1=None, name=None):
    """The axes each of two shapes was broadcast along (`tf.raw_ops.BroadcastGradientArgs`)."""
    s0, s1 = [int(d) for d in np.ravel(s0)], [int(d) for d in np.ravel(s1)]
    n = max(len(s0), len(s1))
    a, b = [1] * (n - len(s0)) + s0, [1] * (n - len(s1)) + s1
    if any(x != y and 1 not in (x, y) for x, y in zip(a, b)):
        raise ValueError("incompatible shapes")
    reduce = ([i for i in range(n) if i < n - len(s0) or (a[i] == 1 and b[i] != 1)],
              [i for i in range(n) if i < n - len(s1) or (b[i] == 1 and a[i] != 1)])
    return tuple(np.array(r, dtype=np.int64) for r in reduce)


_erf = np.vectorize(math.erf, otypes=[np.float64])

# By TensorFlow's plain name (`tf_op_name`); Keras ops (`keras.ops.sum`) under theirs.
OPS: dict[str, Callable] = {
    **{name: _unary(fn) for name, fn in {
        "exp": np.exp, "log": np.log, "log1p": np.log1p, "expm1": np.expm1, "sqrt": np.sqrt,
        "rsqrt": lambda a: 1.0 / np.sqrt(a), "square": np.square, "reciprocal": lambda a: 1.0 / a,
        "sin": np.sin, "cos": np.cos, "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
        "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sigmoid": _sigmoid,
        "softplus": lambda a: np.logaddexp(0.0, a), "softsign": lambda a: a / (1.0 + np.abs(a)),
        "negative": np.negative, "abs": np.abs, "sign": np.sign, "relu": lambda a: np.maximum(a, 0.0),
        "floor": np.floor, "ceil": np.ceil, "round": np.round, "erf": _erf, "erfc": lambda a: 1.0 - _erf(a),
        "identity": lambda a: a, "logical_not": lambda a: a == 0, "bessel_i0": np.i0,
        "bessel_i0e": lambda a: np.exp(-np.abs(a)) * np.i0(a),
    }.items()},
    **{name: _binary(fn) for name, fn in {
        "multiply": np.multiply, "add": np.add, "subtract": np.subtract, "divide": np.divide,
        "truediv": np.divide, "pow": np.power, "power": np.power, "maximum": np.maximum, "minimum": np.minimum,
        "squared_difference": lambda a, b: (a - b) ** 2, "equal": np.equal, "not_equal": np.not_equal,
        "greater": np.greater, "greater_equal": np.greater_equal, "less": np.less, "less_equal": np.less_equal,
        "logical_and": lambda a, b: (a != 0) & (b != 0), "logical_or": lambda a, b: (a != 0) | (b != 0),
    }.items()},
    "divide_no_nan": _divide_no_nan, "broadcast_gradient_args": _broadcast_gradient_args,
    "where": _where, "matmul": _matmul, "transpose": _transpose, "reshape": _reshape,
    "expand_dims": _expand_dims, "squeeze": _squeeze, "clip_by_value": _clip, "clip": _clip,
    "ones_like": _like(1.0), "zeros_like": _like(0.0), "ones": _filled(1.0), "zeros": _filled(0.0),
    "reduce_sum": _reduce(np.sum), "reduce_mean": _reduce(np.mean), "reduce_max": _reduce(np.max),
    "reduce_min": _reduce(np.min), "reduce_prod": _reduce(np.prod), "sum": _reduce(np.sum),
    "mean": _reduce(np.mean), "max": _reduce(np.max), "min": _reduce(np.min), "prod": _reduce(np.prod),
    "cast": _cast, "convert_to_tensor": lambda value, dtype=None, name=None, dtype_hint=None: value,
    "shape": lambda input, out_type=None, name=None: np.array(np.shape(input)),
}

def _nudged(lo, hi, num_bits, narrow_range, rnd):
    """TensorFlow's fake-quant range: the zero point `rnd`-ed onto the integer grid."""
    q_min, q_max = np.float32(1.0 if narrow_range else 0.0), np.float32((1 << int(num_bits)) - 1)
    lo, hi = np.float32(lo), np.float32(hi)  # in float32, as TensorFlow's kernel: a zero point at .5 rounds alike
    scale = (hi - lo) / (q_max - q_min)
    zero = np.clip(rnd(q_min - lo / scale), q_min, q_max)
    return _f((q_min - zero) * scale), _f((q_max - zero) * scale), _f(scale)


def _fake_quant(rnd, quantise: bool) -> Callable:
    def op(inputs, min=-6.0, max=6.0, num_bits=8, narrow_range=False, name=None):
        if not 2 <= int(num_bits) <= 16:
            raise ValueError("num_bits")
        lo, hi, scale = _nudged(min, max, num_bits, narrow_range, rnd)
        clamped = np.clip(_f(inputs), lo, hi)
        return np.floor((clamped - lo) / scale + 0.5) * scale + lo if quantise else clamped
    return op


def _half_away(a):  # std::round, as TensorFlow's kernels round
    return np.sign(a) * np.floor(np.abs(a) + 0.5)


_QUANT = ("fake_quant_with_min_max_args", "fake_quant_with_min_max_vars")

# Ops whose derivative is zero almost everywhere (rounding, quantising), by what users mean
# their derivative to be, the straight-through estimator: rounding read as the identity, a
# clip's mask kept; a sign as `clip(x, -1, 1)` (the hard tanh, the gradient Hubara et al. and
# Larq give it).
STRAIGHT_THROUGH: dict[str, Callable] = {
    **{name: _unary(lambda a: a) for name in ("round", "floor", "ceil", "rint")},
    "sign": _unary(lambda a: np.clip(a, -1.0, 1.0)),
    **dict.fromkeys(_QUANT, _fake_quant(lambda a: a, False)),
}
OPS.update({**dict.fromkeys(_QUANT, _fake_quant(_half_away, True)), "rint": _unary(np.rint)})

def _log_softmax(logits=None, axis=None, name=None, x=None):
    a = _f(logits if x is None else x)
    axis = -1 if axis is None else int(axis)
    shifted = a - np.max(a, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _logsumexp(input_tensor=None, axis=None, keepdims=False, name=None, x=None):
    a = _f(input_tensor if x is None else x)
    top = np.max(a, axis=_axis(axis), keepdims=True)
    out = np.log(np.sum(np.exp(a - top), axis=_axis(axis), keepdims=True)) + top
    return out if keepdims else np.squeeze(out, axis=_axis(axis))


def _clip_by_norm(t, clip_norm, axes=None, name=None):
    a = _f(t)
    norm = np.sqrt(np.sum(a * a, axis=_axis(axes), keepdims=True))
    return a * _f(clip_norm) / np.maximum(norm, _f(clip_norm))  # TensorFlow's: unchanged under the norm


def _concat(values, axis, name=None):
    parts = [_f(v) for v in values]
    fits((sum(int(np.size(p)) for p in parts),))
    return np.concatenate(parts, axis=int(axis))


# Normalisations, stable as TensorFlow's kernels are (`keras.ops.softmax(x, axis=-1)` too).
OPS.update({"clip_by_norm": _clip_by_norm, "concat": _concat, "softmax": lambda *a, **k: np.exp(_log_softmax(*a, **k)), "log_softmax": _log_softmax,
            "reduce_logsumexp": _logsumexp, "logsumexp": _logsumexp})


# Python builtins the maths may use.
def _range(*args):
    # The evaluator reads every number literal as a float: `range(1, n)` takes whole ones.
    r = range(*(int(a) if isinstance(a, float) and a == int(a) else a for a in args))
    bounded(len(r))
    return r


BUILTINS: dict[str, Callable] = {"abs": np.abs, "float": float, "int": int, "len": len, "range": _range,
                                 "tuple": tuple, "list": list, "dict": dict, "id": id,
                                 # lists, as the evaluator's loops take: `dict(zip(variables, grads))`
                                 "zip": lambda *a: list(zip(*a)), "enumerate": lambda a: list(enumerate(a))}


# ---- more elementwise ops: activations and special functions as TensorFlow and Keras 3 define
# them (each checked against TensorFlow at random points and domain edges by
# tests/runtime/test_op_coverage.py; an op missing here leaves its expression unknown).

def _softplus(a):
    return np.logaddexp(0.0, a)


def _hard_sigmoid(a):
    return np.clip(a / 6.0 + 0.5, 0.0, 1.0)


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772, 1.0507009873554805
def _lgamma_one(v: float) -> float:
    try:
        return math.lgamma(v)
    except ValueError:  # a pole (0, -1, -2, ...): TensorFlow gives inf
        return math.inf


_lgamma = np.vectorize(_lgamma_one, otypes=[np.float64])


def _elu(x, alpha=1.0, name=None):
    a = _f(x)
    return np.where(a > 0, a, _f(alpha) * np.expm1(np.minimum(a, 0.0)))


def _celu(x, alpha=1.0, name=None):
    a, al = _f(x), _f(alpha)
    return np.maximum(a, 0.0) + np.minimum(0.0, al * np.expm1(np.minimum(a, 0.0) / al))


def _leaky_relu(x, alpha=None, negative_slope=None, name=None):
    slope = _f(0.2 if alpha is None and negative_slope is None else alpha if alpha is not None else negative_slope)
    a = _f(x)
    return np.where(a > 0, a, a * slope)


def _silu(x, beta=1.0, name=None):
    a = _f(x)
    return a * _sigmoid(_f(beta) * a)


def _squareplus(x, b=4.0, name=None):
    a = _f(x)
    return (a + np.sqrt(a * a + _f(b))) / 2.0


def _safe(fn: Callable, zero_where: Callable) -> Callable:
    """`xlogy`, `xdivy`, `multiply_no_nan`: 0 where TensorFlow defines it so, else `fn`."""
    def op(x, y, name=None):
        fits(np.shape(x), np.shape(y))
        a, b = np.broadcast_arrays(_f(x), _f(y))
        with np.errstate(all="ignore"):
            return np.where(zero_where(a, b), 0.0, fn(a, b))
    return op


def _reciprocal_no_nan(x, name=None):
    a = _f(x)
    return np.divide(1.0, a, out=np.zeros_like(a), where=a != 0)


OPS.update({
    **{name: _unary(fn) for name, fn in {
        "acosh": np.arccosh, "asinh": np.arcsinh, "atanh": np.arctanh, "cbrt": np.cbrt, "exp2": np.exp2,
        "log2": np.log2, "log10": np.log10, "log_sigmoid": lambda a: -_softplus(-a),
        "selu": lambda a: _SELU_SCALE * np.where(a > 0, a, _SELU_ALPHA * np.expm1(np.minimum(a, 0.0))),
        "relu6": lambda a: np.clip(a, 0.0, 6.0), "mish": lambda a: a * np.tanh(_softplus(a)),
        "hard_sigmoid": _hard_sigmoid, "hard_silu": lambda a: a * _hard_sigmoid(a),
        "hard_swish": lambda a: a * _hard_sigmoid(a), "tanh_shrink": lambda a: a - np.tanh(a),
        "lgamma": _lgamma, "deg2rad": np.deg2rad, "rad2deg": np.rad2deg, "trunc": np.trunc, "fix": np.fix,
        "is_finite": np.isfinite, "is_nan": np.isnan, "is_inf": np.isinf, "isfinite": np.isfinite,
        "isnan": np.isnan, "isinf": np.isinf, "positive": lambda a: a, "sinc": np.sinc, "linear": lambda a: a,
        "sqrt": np.sqrt,
    }.items()},
    **{name: _binary(fn) for name, fn in {
        "atan2": np.arctan2, "logaddexp": np.logaddexp, "logaddexp2": np.logaddexp2, "hypot": np.hypot,
        "floormod": np.mod, "mod": np.mod, "floordiv": np.floor_divide, "floor_divide": np.floor_divide,
        "truncatemod": np.fmod, "fmod": np.fmod, "fmax": np.fmax, "fmin": np.fmin,
        "logical_xor": lambda a, b: (a != 0) ^ (b != 0),
    }.items()},
    "elu": _elu, "celu": _celu, "leaky_relu": _leaky_relu, "silu": _silu, "swish": _silu,
    "squareplus": _squareplus, "reciprocal_no_nan": _reciprocal_no_nan,
    "xlogy": _safe(lambda a, b: a * np.log(b), lambda a, b: a == 0),
    "xlog1py": _safe(lambda a, b: a * np.log1p(b), lambda a, b: a == 0),
    "xdivy": _safe(lambda a, b: a / b, lambda a, b: a == 0),
    "multiply_no_nan": _safe(lambda a, b: a * b, lambda a, b: b == 0),
})
# NumPy's spellings of the same maths (`np.arctan`, `tnp.absolute`): one op under each name.
OPS.update({alias: OPS[name] for alias, name in {
    "absolute": "abs", "fabs": "abs", "arccos": "acos", "arcsin": "asin", "arctan": "atan", "arccosh": "acosh",
    "arcsinh": "asinh", "arctanh": "atanh", "arctan2": "atan2", "true_divide": "divide",
    "degrees": "rad2deg", "radians": "deg2rad", "remainder": "mod",
}.items()})
