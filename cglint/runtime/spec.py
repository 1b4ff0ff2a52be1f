"""A small, safe language for describing the inputs of a checked function.

A spec is a comma-separated list of inputs, one per positional parameter, optionally named:

    x=normal(2, 3)                      Gaussian, mean 0 stddev 1 (mean=, stddev= accepted)
    uniform(2, 3, low=-1, high=1)       uniform on [low, high)
    zeros(4) / ones(2, 2)               constant fills
    constant([[1., 2.], [3., 4.]])      a literal (Python numbers and nested lists only)
    2.5                                 a scalar literal (a float32 tensor)
    float(0.1) / int(3)                 a Python number, as a call passing a literal does:
                                        TensorFlow converts it but never differentiates it
    module:NAME  /  module:NAME.attr    a value the module defines (e.g. an example batch)
    float64                             on its own: the dtype of every input not naming one

    {'a': normal(2, 3), 'b': normal(3)} a dict input (nested specs as values)

Every constructor takes `dtype=float16|bfloat16|float32|float64|complex64|complex128|int32|int64|bool`
(complex: both parts random; bool: a random
boolean mask for `normal`/`uniform`). Named inputs are
matched to the function's parameters by name, unnamed ones by position. Parsing uses Python's
`ast` module and only accepts these forms; nothing is ever evaluated. Random inputs come from
a seeded generator, so a spec always yields the same tensors.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from cglint.gradcheck.domain import (
    PER_FEATURE_NAMES,
    POSITIVE_HIGH,
    POSITIVE_LOW,
    name_parts,
    positive_domain,
    scalar_name,
)

DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128", "int32", "int64", "bool")
CONSTRUCTORS = {
    "normal": {"mean": 0.0, "stddev": 1.0},
    "uniform": {"low": -1.0, "high": 1.0},
    "zeros": {},
    "ones": {},
    "constant": {},
    "float": {},
    "int": {},
}


class SpecError(ValueError):
    """The spec text is not in the input language."""


@dataclass
class InputSpec:
    kind: str  # a constructor name, "literal" or "module"
    shape: tuple = ()
    params: dict = field(default_factory=dict)
    value: object = None  # the literal, or the module attribute path
    dtype: str | None = None
    name: str | None = None

    def __str__(self) -> str:
        head = f"{self.name}=" if self.name else ""
        if self.kind == "module":
            return f"{head}module:{self.value}"
        if self.kind == "dict":
            return head + "{" + ", ".join(f"{k!r}: {v}" for k, v in self.value.items()) + "}"
        if self.kind in ("float", "int"):
            return f"{head}{self.kind}({self.value!r})"
        args = [repr(self.value)] if self.kind in ("constant", "literal") else \
            [str(d) for d in self.shape]
        args += [f"{k}={v}" for k, v in self.params.items()]
        if self.dtype:
            args.append(f"dtype={self.dtype}")
        if self.kind == "literal":
            return head + repr(self.value) + (f" {self.dtype}" if self.dtype else "")
        return f"{head}{self.kind}({', '.join(args)})"


def _split_top_level(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:
                raise SpecError("unbalanced brackets")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise SpecError("unbalanced brackets")
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _number(node) -> float | int:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _number(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    raise SpecError("expected a number")


def _literal(node):
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e) for e in node.elts]
    return _number(node)


def _dtype(node) -> str:
    name = node.id if isinstance(node, ast.Name) else \
        node.value if isinstance(node, ast.Constant) else None
    if name not in DTYPES:
        raise SpecError(f"unknown dtype {name!r}; expected one of {', '.join(DTYPES)}")
    return name


def _parse_one(text: str, default_dtype: str | None) -> InputSpec:
    name = None
    m = re.match(r"^([A-Za-z_]\w*)\s*=(?!=)\s*(.*)$", text, re.DOTALL)
    if m:
        name, text = m.group(1), m.group(2).strip()
    if text.startswith("module:"):
        path = text[len("module:"):].strip()
        if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", path):
            raise SpecError(f"bad module reference {text!r}")
        return InputSpec("module", value=path, name=name)
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError as e:
        raise SpecError(f"cannot parse {text!r}: {e.msg}") from None
    if isinstance(node, ast.Dict):
        if not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys):
            raise SpecError(f"a dict input needs string keys: {text!r}")
        return InputSpec("dict", value={k.value: _parse_one(ast.unparse(v), default_dtype)
                                        for k, v in zip(node.keys, node.values)}, name=name)
    if not isinstance(node, ast.Call):
        return InputSpec("literal", value=_literal(node), dtype=default_dtype, name=name)
    if not isinstance(node.func, ast.Name) or node.func.id not in CONSTRUCTORS:
        raise SpecError(f"unknown constructor in {text!r}; expected one of "
                        f"{', '.join(CONSTRUCTORS)}")
    kind = node.func.id
    params = dict(CONSTRUCTORS[kind])
    dtype = default_dtype
    for kw in node.keywords:
        if kw.arg == "dtype":
            dtype = _dtype(kw.value)
        elif kw.arg in params:
            params[kw.arg] = float(_number(kw.value))
        else:
            raise SpecError(f"{kind}() takes no argument {kw.arg!r}")
    if kind == "constant":
        if len(node.args) != 1:
            raise SpecError("constant() takes exactly one literal")
        return InputSpec(kind, value=_literal(node.args[0]), dtype=dtype, name=name)
    if kind in ("float", "int"):
        if len(node.args) != 1 or node.keywords:
            raise SpecError(f"{kind}() takes exactly one number")
        value = _number(node.args[0])
        if kind == "int" and not isinstance(value, int):
            raise SpecError(f"int() takes an integer, got {value!r}")
        return InputSpec(kind, value=float(value) if kind == "float" else value, name=name)
    dims = []
    for a in node.args:
        if isinstance(a, (ast.List, ast.Tuple)):  # normal([2, 3]) as well as normal(2, 3)
            dims += [_number(e) for e in a.elts]
        else:
            dims.append(_number(a))
    if any(not isinstance(d, int) or d < 0 for d in dims):
        raise SpecError(f"shape dimensions must be non-negative integers in {text!r}")
    return InputSpec(kind, shape=tuple(dims), params=params, dtype=dtype, name=name)


def first_inputs(specs: list[str], n: int) -> list[str]:
    """Each candidate spec cut to its first `n` inputs, duplicates dropped (the parameters after
    them keep their defaults)."""
    return list(dict.fromkeys(", ".join(_split_top_level(t)[:n]) for t in specs))


def complex_variants(text: str) -> list[str]:
    """The spec with one of its float inputs made complex64 at a time, then all of them: in a
    module that computes with complex numbers, which parameters are complex (a field) and which
    real (a phase) is what the forward accepts."""
    try:
        specs = parse_spec(text)
    except SpecError:
        return []
    real = [i for i, s in enumerate(specs) if s.kind in ("normal", "uniform", "zeros", "ones")
            and (s.dtype or "float32").startswith("float")]
    out = []
    for chosen in [[i] for i in real] + ([real] if len(real) > 1 else []):
        parts = [InputSpec(s.kind, s.shape, s.params, s.value, "complex64" if i in chosen else s.dtype, s.name)
                 for i, s in enumerate(specs)]
        out.append(", ".join(str(p) for p in parts))
    return out


def spec_count(text: str) -> int:
    """How many inputs a spec gives."""
    return len(_split_top_level(text))


def parse_spec(text: str) -> list[InputSpec]:
    """Parses a spec into one InputSpec per input. Raises SpecError with a readable reason."""
    parts = _split_top_level(text or "")
    bare = {p for p in parts if p in DTYPES}
    if len(bare) > 1:
        raise SpecError(f"conflicting dtypes {', '.join(sorted(bare))}")
    default = bare.pop() if bare else None
    return [_parse_one(p, default) for p in parts if p not in DTYPES]


def shape_spec(shapes, dtype: str | None = None) -> str:
    """The spec of Gaussian inputs with the given shapes (used by the input search)."""
    suffix = f", dtype={dtype}" if dtype else ""
    return ", ".join(f"normal({', '.join(str(d) for d in s)}{suffix})" if s else
                     f"normal({suffix.lstrip(', ')})" for s in shapes)


def build_inputs(specs: list[InputSpec], params: list[str] | None = None, module=None,
                 seed: int = 0) -> list:
    """Turns parsed specs into positional inputs (tensors or module values)."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    named = [s for s in specs if s.name]
    if named and params is None:
        raise SpecError("named inputs need the function's parameter names")
    def one(s: InputSpec):
        dtype = tf.as_dtype(s.dtype or "float32")
        if s.kind == "dict":
            return {k: one(v) for k, v in s.value.items()}
        if s.kind == "module":
            obj = module
            for attr in s.value.split("."):
                if not hasattr(obj, attr):
                    raise SpecError(f"the module defines no {s.value!r}")
                obj = getattr(obj, attr)
            return obj
        if dtype == tf.bool and s.kind in ("normal", "uniform"):
            return tf.constant(rng.random(s.shape) < 0.5)  # a mask with both values
        if s.kind == "normal" and dtype.is_complex:  # both parts random: a real input hides conj bugs
            z = rng.standard_normal(s.shape) + 1j * rng.standard_normal(s.shape)
            return tf.constant(s.params["mean"] + s.params["stddev"] * z, dtype=dtype)
        if s.kind == "normal":
            return tf.constant(s.params["mean"] + s.params["stddev"] * rng.standard_normal(s.shape), dtype=dtype)
        if s.kind == "uniform":
            return tf.constant(rng.uniform(s.params["low"], s.params["high"], s.shape), dtype=dtype)
        if s.kind in ("float", "int"):
            return s.value
        if s.kind == "zeros":
            return tf.zeros(s.shape, dtype)
        if s.kind == "ones":
            return tf.ones(s.shape, dtype)
        return tf.constant(s.value, dtype=dtype)

    values = [one(s) for s in specs]
    if not named:
        return values
    slots: dict[int, object] = {}
    free = []
    for s, v in zip(specs, values):
        if s.name:
            if s.name not in params:
                raise SpecError(f"the function has no parameter {s.name!r}")
            slots[params.index(s.name)] = v
        else:
            free.append(v)
    out = []
    for i in range(len(slots) + len(free)):
        if i in slots:
            out.append(slots[i])
        elif free:
            out.append(free.pop(0))
        else:
            raise SpecError(f"no input given for parameter {params[i]!r}")
    return out


# ---------------------------------------------------------------- input search

_SHAPED_CALLS = {"zeros", "ones", "normal", "uniform", "truncated_normal", "fill", "eye"}
_VALUE_CALLS = {"Variable", "constant", "convert_to_tensor"}


def _literal_shape(node) -> tuple | None:
    """Shape of a nested list literal, or None if it is ragged or not a literal."""
    if isinstance(node, (ast.List, ast.Tuple)):
        inner = [_literal_shape(e) for e in node.elts]
        if not inner:
            return (0,)
        if any(s is None for s in inner) or len(set(inner)) != 1:
            return None
        return (len(inner),) + inner[0]
    try:
        _number(node)
        return ()
    except SpecError:
        return None


def _call_name(node) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _shape_of_expr(node) -> tuple | None:
    if not isinstance(node, ast.Call):
        return None
    name = _call_name(node)
    if name in _VALUE_CALLS and node.args:
        inner = node.args[0]
        return _literal_shape(inner) if not isinstance(inner, ast.Call) else _shape_of_expr(inner)
    if name in _SHAPED_CALLS:
        arg = node.args[0] if node.args else next(
            (k.value for k in node.keywords if k.arg == "shape"), None)
        if isinstance(arg, (ast.List, ast.Tuple)):
            try:
                dims = tuple(_number(e) for e in arg.elts)
            except SpecError:
                return None
            return dims if all(isinstance(d, int) and d >= 0 for d in dims) else None
    return None


def module_shapes(source: str) -> list[tuple]:
    """Shapes of module-level `tf.Variable`/`tf.constant`/`tf.zeros([...])`-style literals."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    shapes = []
    for stmt in tree.body:
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        shape = _shape_of_expr(value) if value is not None else None
        if shape is not None and shape not in shapes:
            shapes.append(shape)
    return shapes


def _parsed_def(source: str, qualname: str):
    """(the module's tree, the def of `qualname`), or None when either is missing."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    node = _find_def(tree, qualname)
    return None if node is None else (tree, node)


def _find_def(tree, qualname: str):
    """The def of `qualname`, or the lambda a module-level name is bound to through the call
    form (`pair = tf.custom_gradient(lambda a, b: ...)`, wrappers around it included)."""
    if "." not in qualname:
        for stmt in tree.body:
            if (isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == qualname for t in stmt.targets)):
                lambdas = [n for n in ast.walk(stmt.value) if isinstance(n, ast.Lambda)]
                if lambdas:
                    return lambdas[0]
    body, node = tree.body, None
    for part in qualname.split("."):
        node = next((n for n in _defs_in(body) if n.name == part), None)
        if node is None:
            return None
        body = node.body
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _defs_in(body: list):
    """The defs and classes a block binds, those under `if`/`with`/`try`/loops included (a factory
    defines its op under `if axis is None:`), not those inside other defs."""
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield stmt
        elif isinstance(stmt, (ast.If, ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While, ast.Try)):
            for block in (stmt.body, getattr(stmt, "orelse", []), getattr(stmt, "finalbody", []),
                          *[h.body for h in getattr(stmt, "handlers", [])]):
                yield from _defs_in(block)


def _call_arity(tree, name: str) -> int | None:
    """The number of positional arguments the module's calls of `name` pass (the most common
    one), for a forward taking `*args`."""
    counts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and not any(isinstance(a, ast.Starred) for a in node.args):
            f = node.func
            called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) \
                else None
            if called == name:
                counts.append(len(node.args))
    return max(set(counts), key=counts.count) if counts else None


def parameters(source: str, qualname: str) -> list[str] | None:
    """Display names of the positional inputs of `qualname` (`self`/`cls` excluded); a `*args`
    forward gets `args[0]`, `args[1]`... for as many as its call sites pass."""
    found = _parsed_def(source, qualname)
    if found is None:
        return None
    tree, node = found
    names = [a.arg for a in node.args.posonlyargs + node.args.args]
    if "." in qualname and names and names[0] in ("self", "cls"):
        names = names[1:]
    if node.args.vararg is not None:
        arity = _call_arity(tree, qualname.split(".")[-1])
        # Without calls to count, two: a grad fn returning one gradient for `*branches` is right
        # for one argument only.
        extra = max(1, arity - len(names)) if arity else 2
        names += [f"{node.args.vararg.arg}[{i}]" for i in range(extra)]
    return names


def _positional_count(source: str, qualname: str) -> int | None:
    names = parameters(source, qualname)
    return None if names is None else len(names)


# Calls whose first argument is a boolean condition or mask.
_BOOL_FIRST = {"where", "boolean_mask", "logical_and", "logical_or", "logical_not", "logical_xor"}
# Ops defined (or real) only on part of the line, for an argument passed to them as it is:
# sampled there, where autodiff and the grad fn are both finite.
_POSITIVE_FIRST = {"log", "sqrt", "rsqrt", "lgamma", "digamma", "log_gamma", "pow", "xlogy"}
_UNIT_FIRST = {"acos", "asin", "atanh", "arccos", "arcsin", "arctanh"}
# Ops whose argument at this position is integer indices into another input (rows 0 and 1 exist in
# every candidate shape with a leading dimension of 2 or more; repeats are where gradients must sum).
_INDEX_AT = {"gather": 1, "embedding_lookup": 1, "one_hot": 0, "unsorted_segment_sum": 1,
             "unsorted_segment_mean": 1, "unsorted_segment_max": 1, "gather_nd": 1}


def roles(source: str, qualname: str) -> dict[str, object]:
    """How the forward uses its parameters, where that fixes what an input must be: "bool" for
    a condition or mask (`tf.where(mask, ...)`, `~mask`), "index" for ids into another input
    (`tf.gather(table, ids)`), "positive" or "unit" for the domain of the op it is passed to
    as it is (`tf.math.log(x)`, `tf.acos(x)`), a `{"axis", "size"}` for one unpacked along an
    axis, a tuple of keys for a dict indexed by string keys (`features["a"]`)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    node = _find_def(tree, qualname)
    if node is None:
        return {}
    names = {a.arg for a in node.args.posonlyargs + node.args.args}
    out: dict[str, object] = {}
    keys: dict[str, list[str]] = {}
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and _call_name(n) in _INDEX_AT and len(n.args) > _INDEX_AT[_call_name(n)]:
            a = n.args[_INDEX_AT[_call_name(n)]]
            if isinstance(a, ast.Name) and a.id in names:
                out[a.id] = "index"
        if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id in names \
                and n.args[0].id not in out:
            if _call_name(n) in _POSITIVE_FIRST:
                out[n.args[0].id] = "positive"
            elif _call_name(n) in _UNIT_FIRST:
                out[n.args[0].id] = "unit"
        if isinstance(n, ast.Call) and _call_name(n) in _BOOL_FIRST and n.args:
            for a in (n.args[:2] if _call_name(n).startswith("logical_") else n.args[:1]):
                if isinstance(a, ast.Name) and a.id in names:
                    out[a.id] = "bool"
        elif isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Invert) and isinstance(n.operand, ast.Name) \
                and n.operand.id in names:
            out[n.operand.id] = "bool"
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], (ast.Tuple, ast.List)) \
                and isinstance(n.value, ast.Call) and _call_name(n.value) in ("unstack", "split", "unbind") \
                and n.value.args and isinstance(n.value.args[0], ast.Name) and n.value.args[0].id in names \
                and not any(isinstance(t, ast.Starred) for t in n.targets[0].elts):
            # `a, b = tf.unstack(raw, axis=-1)`: that axis has as many entries as the targets.
            axis = next((kw.value for kw in n.value.keywords if kw.arg == "axis"),
                        n.value.args[2] if _call_name(n.value) == "split" and len(n.value.args) > 2 else None)
            try:
                axis = 0 if axis is None else int(_number(axis))
            except SpecError:
                continue
            out[n.value.args[0].id] = {"axis": axis, "size": len(n.targets[0].elts)}
        elif isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in names \
                and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
            keys.setdefault(n.value.id, [])
            if n.slice.value not in keys[n.value.id]:
                keys[n.value.id].append(n.slice.value)
    for name, ks in keys.items():
        out[name] = tuple(ks)
    return out


_MATMUL = {"matmul", "mm"}


def matmul_shapes(source: str, qualname: str, k: int = 3, m: int = 4) -> dict[str, tuple] | None:
    """Shapes that fit the forward's matrix products of its own parameters (`tf.matmul(x, kernel)`,
    `x @ w`, `transpose_a/b=`): the left operand (2, k), the right (k, m), and every other
    parameter (m,), as a bias or per-unit parameter added to the product is. None without one."""
    found = _parsed_def(source, qualname)
    if found is None:
        return None
    tree, node = found
    names = [a.arg for a in node.args.posonlyargs + node.args.args if a.arg not in ("self", "cls")]
    out: dict[str, tuple] = {}
    for n in ast.walk(node):
        pair, flags = None, {}
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
            pair = (n.left, n.right)
        elif isinstance(n, ast.Call) and _call_name(n) in _MATMUL and len(n.args) >= 2:
            pair = (n.args[0], n.args[1])
            flags = {kw.arg: isinstance(kw.value, ast.Constant) and kw.value.value is True for kw in n.keywords}
        if pair is None:
            continue
        left, right = ((2, k), (k, m))
        if flags.get("transpose_a"):
            left = left[::-1]
        if flags.get("transpose_b"):
            right = right[::-1]
        for operand, shape in zip(pair, (left, right)):
            if isinstance(operand, ast.Name) and operand.id in names and operand.id not in out:
                out[operand.id] = shape
        if out:
            break  # the first product fixes k and m; later ones use what it made
    if not out:
        return None
    return {name: out.get(name, (m,)) for name in names}


def _one(name: str, shape: tuple, hint: str | None, role: object = None) -> str:
    if hint is not None:
        return hint
    if role == "bool":
        return f"normal({', '.join(str(d) for d in shape)}{', ' if shape else ''}dtype=bool)"
    if role in ("positive", "unit"):  # the domain of the op it is passed to
        low, high = (POSITIVE_LOW, POSITIVE_HIGH) if role == "positive" else (-0.9, 0.9)
        return f"uniform({', '.join(str(d) for d in shape)}{', ' if shape else ''}low={low}, high={high})"
    if role == "index":
        return f"uniform({', '.join(str(d) for d in shape)}{', ' if shape else ''}low=0, high=2, dtype=int32)"
    if isinstance(role, tuple):
        return "{" + ", ".join(f"{k!r}: {_one(k, shape, None)}" for k in role) + "}"
    if isinstance(role, dict):  # one axis's size is fixed (unpacked along it)
        dims = list(shape) or [2]
        axis = role["axis"] if -len(dims) <= role["axis"] < len(dims) else -1
        dims[axis] = role["size"]
        shape = tuple(dims)
    dims = ", ".join(str(d) for d in shape)
    if positive_domain(name):
        dims = "" if scalar_name(name) else dims
        return f"uniform({dims + ', ' if dims else ''}low={POSITIVE_LOW}, high={POSITIVE_HIGH})"
    return f"normal({dims})"


def candidate_specs(source: str, qualname: str, shapes=None, limit: int = 8,
                    hints: dict | None = None, ranks: dict | None = None) -> list[str]:
    """Candidate input specs for `qualname`, most plausible first: shapes that fit a matrix
    product with the module's weights (`x @ W` needs x of shape (batch, W.shape[0])), a batch
    against per-feature parameters (`(n, k)` with `(k,)`, where a collapsed or over-reduced
    gradient shows), the module's own shapes and dimensions, then generic small shapes.
    `shapes` are the shapes the static side found; without them the module's literals are read
    here. `hints` fix some parameters (by position) to a spec, as a call site passes them.
    Parameters with a positive domain (`clip_norm`, `eps`, `temperature`...) get positive
    values, scalars for those that almost always are."""
    shapes = [tuple(s) for s in (module_shapes(source) if shapes is None else shapes)]
    names = parameters(source, qualname)
    names = ["x"] if names is None else names
    hints = {int(k): v for k, v in (hints or {}).items()}
    ranks = {int(k): int(v) for k, v in (ranks or {}).items()}
    nparams = len(names)

    def ranked(i: int, shape: tuple) -> tuple:
        # A call site's rank for this input: the candidate's trailing dimensions (a per-feature
        # weight beside a batch), or leading 2s where the candidate has fewer.
        if i not in ranks:
            return shape
        r = ranks[i]
        return tuple(shape[len(shape) - r:]) if r <= len(shape) else (2,) * (r - len(shape)) + tuple(shape)
    if nparams == 0:
        return [""]
    one: list[tuple] = []

    def add(s):
        if s not in one:
            one.append(s)

    for s in shapes:
        if len(s) >= 2:
            add((2, s[0]))
    for s in shapes:
        if len(s) == 1:  # a per-feature weight: a batch of features, where reductions show
            add((2, s[0]))
    for s in shapes:
        add(s)
    for d in dict.fromkeys(d for s in shapes for d in s):
        add((2, d))
        add((d,))
    for s in ((2, 3), (3,), ()):
        add(s)

    used = roles(source, qualname)

    def spec(per_param):
        return ", ".join(_one(n, ranked(i, sh), hints.get(i), used.get(n)) for i, (n, sh) in enumerate(zip(names, per_param)))

    specs = [spec([s] * nparams) for s in one]
    free = [i for i in range(nparams) if i not in hints]
    if len(free) > 1 and any(name_parts(names[i]) & PER_FEATURE_NAMES for i in free[1:]):
        # A batch for the first free input and per-feature parameters for the others.
        ks = list(dict.fromkeys([s[-1] for s in shapes if len(s) == 1] + [3]))
        mixed = [spec([(4, k) if i == free[0] else (k,) for i in range(nparams)]) for k in ks]
        specs = [specs[0]] + mixed[:2] + specs[1:] if shapes else mixed[:2] + specs
    if nparams > 1 and (product := matmul_shapes(source, qualname)) is not None \
            and len(product) == nparams and len(set(product.values())) > 1:
        specs.insert(1, ", ".join(_one(n, product[n], hints.get(i), used.get(n)) for i, n in enumerate(names)))
    if nparams > 1 and len(shapes) >= nparams:
        specs.insert(0, ", ".join(_one(n, shapes[i], hints.get(i), used.get(n)) for i, n in enumerate(names)))
    return list(dict.fromkeys(specs))[:limit]
