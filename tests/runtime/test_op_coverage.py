"""Every elementwise op, or an honest unknown.

The installed TensorFlow, Keras and NumPy are enumerated (`tf.math`, `tf.nn`, `keras.ops`,
`keras.activations`, `tf.experimental.numpy`, NumPy's ufuncs): a function is elementwise when,
called on a vector, each entry of its result is what it gives for that entry alone (one or two
arguments). Each one the evaluator implements (`cglint.samples.arrays.OPS`, under the name the
model reads it by) is checked against TensorFlow (NumPy for NumPy's) at random points and at its
domain's edges; each one it does not implement is listed in NOT_IMPLEMENTED with the reason, and
an expression using it is unknown to the evaluator (never a guess). A new TensorFlow that adds an
op fails this test until the op is classified.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

from cglint.model.ops import tf_op_name
from cglint.samples.arrays import OPS

NAMESPACES = ("tensorflow.math", "tensorflow.nn", "keras.ops", "keras.activations", "tensorflow.experimental.numpy")

_SPECIAL = "a special function NumPy lacks (no exact float64 reference without SciPy)"
_INT = "defined on integers / bit patterns, never on a differentiable float path"
_COMPLEX = "complex-valued parts (the evaluator computes in real float64)"
_DEFAULTS = ("its defaults differ between namespaces the model reads under one name (`tf.nn.gelu` "
             "exact, `keras.ops.gelu` tanh-approximate)")
_STRUCT = "array construction or conversion, not maths"
_LOSS = "a loss with its own reductions and conventions"
_NEXT = "float bit-level stepping"

# The model's op name -> why the evaluator leaves it unknown.
NOT_IMPLEMENTED = {
    **dict.fromkeys(["bessel_i1", "bessel_i1e", "digamma", "erfinv", "erfcinv", "ndtri", "igamma", "igammac",
                     "polygamma", "zeta", "i0", "betainc", "bessel_j0", "bessel_j1", "bessel_k0", "bessel_k0e",
                     "bessel_k1", "bessel_k1e", "bessel_y0", "bessel_y1", "dawsn", "expint", "fresnel_cos",
                     "fresnel_sin", "spence", "lbeta"], _SPECIAL),
    **dict.fromkeys(["bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift",
                     "bitwise_invert", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm",
                     "truncatediv", "floor_div", "population_count", "bitwise_count"], _INT),
    **dict.fromkeys(["matvec", "vecdot", "vecmat", "matmul"], "a linear-algebra gufunc, not elementwise"),
    "isnat": "datetimes only",
    "signbit": "NumPy says True for -0.0, tf.experimental.numpy False: one name, two answers",
    **dict.fromkeys(["angle", "conj", "conjugate", "imag", "real", "polar", "isreal", "iscomplex", "complex"], _COMPLEX),
    **dict.fromkeys(["gelu", "approx_gelu", "approximate_gelu"], _DEFAULTS),
    **dict.fromkeys(["array", "asanyarray", "asarray", "ascontiguousarray", "atleast_1d", "atleast_2d", "atleast_3d",
                     "copy", "convert_to_numpy", "empty_like", "full_like", "flatten", "ravel", "squeeze", "stack",
                     "unstack", "hstack", "vstack", "concatenate", "view", "compress", "transpose", "sort", "unique",
                     "nan_to_num", "isclose", "isneginf", "isposinf", "heaviside", "stop_gradient",
                     "copysign", "ldexp", "frexp", "modf", "float_power", "divmod", "diag", "diagonal",
                     "flip", "fliplr", "flipud", "roll", "rot90", "moveaxis", "swapaxes", "reshape", "tile",
                     "repeat", "expand_dims", "broadcast_to", "real_if_close", "around", "clip", "round",
                     "cumsum", "cumprod", "argsort"], _STRUCT),
    **dict.fromkeys(["binary_crossentropy", "log_poisson_loss", "sigmoid_cross_entropy_with_logits",
                     "softmax_cross_entropy_with_logits", "sparse_softmax_cross_entropy_with_logits",
                     "weighted_cross_entropy_with_logits", "l2_loss"], _LOSS),
    **dict.fromkeys(["nextafter", "spacing"], _NEXT),
    "hard_shrink": "a threshold op whose tie at the threshold Keras defines by strict comparison; not yet modelled",
    "soft_shrink": "a threshold op whose tie at the threshold Keras defines by strict comparison; not yet modelled",
    "hard_tanh": "Keras 3's hard_tanh; not yet modelled",
    "sparse_plus": "Keras 3's piecewise sparse_plus; not yet modelled",
    "sparse_sigmoid": "Keras 3's piecewise sparse_sigmoid; not yet modelled",
    "threshold": "Keras 3's threshold(x, threshold, default_value); not yet modelled",
    "glu": "splits its input in halves: not elementwise",
    "relu": "implemented, but `keras.activations.relu` takes negative_slope / max_value / threshold",
}

# Domain edges and random points: inside each op's domain the values are compared, outside it
# both must be non-finite the same way.
EDGES = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-6, -1e-6, 6.0, -6.0, 3.0, -3.0, 30.0, -30.0, 88.0, -88.0])


def _elementwise(fn, arity: int, tf) -> bool:
    x = np.array([-1.7, 0.3, 2.2], np.float32)
    args = [tf.constant(x), tf.constant(x[::-1].copy())][:arity]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            full = np.asarray(fn(*args))
            if full.shape != (3,):
                return False
            parts = [np.asarray(fn(*[a[i:i + 1] for a in args])).reshape(-1) for i in range(3)]
    except Exception:  # noqa: BLE001 - not callable on floats this way: not an elementwise op here
        return False
    return all(p.shape == (1,) for p in parts) and np.allclose(np.concatenate(parts), full, equal_nan=True)


def _enumerate():
    import keras
    import tensorflow as tf

    modules = {"tensorflow.math": tf.math, "tensorflow.nn": tf.nn, "keras.ops": keras.ops,
               "keras.activations": keras.activations, "tensorflow.experimental.numpy": tf.experimental.numpy}
    found = []
    for ns, mod in modules.items():
        for name in sorted(dir(mod)):
            fn = getattr(mod, name, None)
            if name.startswith("_") or not callable(fn) or inspect.isclass(fn) or inspect.ismodule(fn):
                continue
            if name.startswith(("experimental_", "set_", "enable", "disable", "deserialize", "serialize")):
                continue  # switches global behaviour (`tnp.experimental_enable_numpy_behavior`): never called
            for arity in (1, 2):
                if _elementwise(fn, arity, tf):
                    found.append((f"{ns}.{name}", fn, arity))
                    break
    ufuncs = [(f"numpy.{n}", getattr(np, n), getattr(np, n).nin) for n in sorted(dir(np))
              if isinstance(getattr(np, n, None), np.ufunc) and getattr(np, n).nin in (1, 2)
              and getattr(np, n).nout == 1]
    return found, ufuncs


@pytest.fixture(scope="module")
def ops():
    return _enumerate()


def _name(qualname: str) -> str:
    if qualname.startswith("numpy."):
        return qualname.split(".", 1)[1]  # the evaluator reads `np.exp` as the op `exp`
    return tf_op_name(qualname) or qualname.rsplit(".", 1)[1]


def _points(arity: int, rng) -> list[np.ndarray]:
    first = np.concatenate([EDGES, rng.normal(0.0, 3.0, 32)])
    if arity == 1:
        return [first]
    second = np.concatenate([EDGES[::-1], rng.normal(0.0, 3.0, 32)])
    return [first, second]


def _agree(ours, theirs, dtype) -> bool:
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    if ours.shape != theirs.shape:
        return False
    finite = np.isfinite(theirs) & np.isfinite(ours)
    tol = 2e-3 if dtype == np.float32 else 1e-6
    same_nonfinite = np.array_equal(np.isnan(ours[~finite]), np.isnan(theirs[~finite])) and \
        np.array_equal(ours[~finite & ~np.isnan(ours)], theirs[~finite & ~np.isnan(theirs)])
    return same_nonfinite and np.allclose(ours[finite], theirs[finite], rtol=tol, atol=tol)


def test_every_elementwise_op_is_implemented_or_listed(ops):
    found, ufuncs = ops
    unclassified = sorted({q for q, _, _ in [*found, *ufuncs] if _name(q) not in OPS and _name(q) not in NOT_IMPLEMENTED})
    assert len(found) > 150, "the enumeration found too few ops: it is broken, not TensorFlow"
    assert not unclassified, f"{len(unclassified)} elementwise ops neither implemented nor listed: {unclassified}"


def test_implemented_ops_agree_with_tensorflow(ops):
    import tensorflow as tf

    found, ufuncs = ops
    rng = np.random.default_rng(0)
    wrong = []
    checked = 0
    for qualname, fn, arity in [*found, *ufuncs]:
        name = _name(qualname)
        if name not in OPS or name in NOT_IMPLEMENTED:
            continue
        points = _points(arity, rng)
        dtype = np.float64 if qualname.startswith("numpy.") else np.float32
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                args = [p.astype(dtype) for p in points]
                theirs = fn(*args) if dtype == np.float64 else fn(*[tf.constant(a) for a in args])
                ours = OPS[name](*[a.astype(np.float64) for a in args])
        except Exception as e:  # noqa: BLE001 - a mismatch in signature is a failure to report
            wrong.append(f"{qualname}: {type(e).__name__}: {e}")
            continue
        checked += 1
        if not _agree(ours, theirs, dtype):
            wrong.append(qualname)
    assert checked > 100
    assert not wrong, wrong


def test_an_op_the_evaluator_lacks_leaves_the_expression_unknown():
    """`tf.math.digamma` is not implemented: a derivative written with it is not judged (no
    finding from the value rules), where the same formula with an implemented op is."""
    from cglint.engine import lint_source
    from cglint.rules import ALL_RULES

    code = '''
import tensorflow as tf


@tf.custom_gradient
def lgamma_op(x):
    def grad(dy):
        return dy * tf.math.{op}(x) * 2.0

    return tf.math.lgamma(x), grad
'''
    codes = lambda op: {d.code for d in lint_source(code.format(op=op), "m.py", ALL_RULES, prefilter=False).diagnostics}
    assert "CG019" not in codes("digamma")
