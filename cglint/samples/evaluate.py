"""Evaluation: a forward's and its grad fn's maths, computed at sample points, so a derivative
can be judged by its values instead of by its spelling.

Only the project's own NumPy versions of TensorFlow / Keras ops (`cglint.samples.arrays`), Python
arithmetic, literals, tuples, dicts, one-loop list comprehensions, variables (by identity, with
sample values the caller gives) and the module's functions, lambdas and bounded loops
(`cglint.samples.interpret`) are evaluated; the user's code is read, never run. An expression
holding anything else (a call the table does not know, a name bound under conditions the caller
did not pick) cannot be evaluated: `Unknown`, and nothing is claimed about it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

import libcst as cst

from cglint.samples.interpret import Function, Instance, Interpreter, Unknown, Var, unwrap
from cglint.model.ops import tf_op_name
from cglint.model.scopes import Param, Scope, Unpacked, is_self, is_staticmethod

if TYPE_CHECKING:
    from cglint.model.module import ModuleModel


def _bounded(op: Callable) -> Callable:
    """`op` on operands whose result stays small: the module's constants choose the sizes
    (`[0] * 10**9`, `10 ** 10**8`, two long vectors broadcast), and nothing larger is built."""
    def run(a, b):
        from cglint.samples import arrays

        if isinstance(a, (list, tuple, str)) or isinstance(b, (list, tuple, str)):
            n = b if isinstance(b, int) else a if isinstance(a, int) else 1
            arrays.bounded(len(a if isinstance(a, (list, tuple, str)) else b) * max(int(n), 1))
        elif isinstance(a, int) and isinstance(b, int):
            # Python ints grow without bound (`10 ** 10**8`, a loop squaring `len(shape)`)
            bits = a.bit_length() * abs(b) if op is _power else a.bit_length() + b.bit_length()
            if bits > 4096:
                raise ValueError("an integer too large to build")
        elif op is _matmul:
            return arrays.OPS["matmul"](a, b)  # checks the product's size
        elif hasattr(a, "shape") or hasattr(b, "shape"):
            arrays.fits(getattr(a, "shape", ()), getattr(b, "shape", ()))
        return op(a, b)
    return run


def _whole(a, most: float = math.inf) -> int:
    if isinstance(a, (int, float)) and a == int(a) and abs(a) <= most:
        return int(a)
    raise ValueError("a shift of a non-integer, or too far")


def _power(a, b):
    return a ** b


def _matmul(a, b):
    return a @ b


_BINARY = {t: _bounded(op) for t, op in {
    cst.Add: lambda a, b: a + b, cst.Subtract: lambda a, b: a - b, cst.Multiply: lambda a, b: a * b,
    cst.Divide: lambda a, b: a / b, cst.Power: _power, cst.MatrixMultiply: _matmul,
}.items()}
_BINARY.update({cst.BitAnd: _bounded(lambda a, b: a & b), cst.BitOr: _bounded(lambda a, b: a | b),
                cst.BitXor: _bounded(lambda a, b: a ^ b),
                # `1 << num_bits`: number literals are read as floats, shifts take whole ones
                cst.LeftShift: _bounded(lambda a, b: _whole(a) << _whole(b, 64))})
_COMPARE = {
    cst.LessThan: lambda a, b: a < b, cst.GreaterThan: lambda a, b: a > b,
    cst.LessThanEqual: lambda a, b: a <= b, cst.GreaterThanEqual: lambda a, b: a >= b,
    cst.Equal: lambda a, b: a == b, cst.NotEqual: lambda a, b: a != b,
    cst.Is: lambda a, b: a is b, cst.IsNot: lambda a, b: a is not b,  # `x is None`
}
# Keras's dtype helpers: on float dtypes a float dtype (the evaluator computes in float64).
_DTYPE_CALLS = frozenset({"keras.src.backend.result_type", "keras.backend.result_type",
                          "keras.src.backend.standardize_dtype", "keras.backend.standardize_dtype"})
_CONSTANTS = {"numpy.pi": math.pi, "math.pi": math.pi, "numpy.e": math.e, "math.e": math.e,
              "tensorflow.newaxis": None, "numpy.newaxis": None}


_NUMBER_LITERALS: dict[str, float] = {}

class Evaluator(Interpreter):
    """Values of expressions of one module at one point, given values for some parameters
    (`env`: the Param bindings by node identity) and variables (`variables`: by the call that
    creates them). `swap` reads another name where a given Name node is read (by identity);
    `frozen` holds each `stop_gradient`'s value at the base point, recorded when `record`, so
    a perturbed evaluation sees no derivative through it, as TensorFlow's autodiff does.
    `straight_through` reads rounding and quantising ops as their straight-through estimators
    (`arrays.STRAIGHT_THROUGH`); `rounded` says whether one was met."""

    def __init__(self, model: ModuleModel, env: dict[int, Any], picks: dict | None = None, *,
                 variables: dict[int, Var] | None = None, swap: dict[int, str] | None = None,
                 frozen: dict[int, Any] | None = None, record: bool = False,
                 straight_through: bool = False, budget: list[int] | None = None) -> None:
        from cglint.samples import arrays  # NumPy only once maths is evaluated

        self.ops, self.np = arrays, arrays.np
        self.model, self.env = model, env
        self.picks: dict[tuple[int, str], int] = picks or {}
        self.choices: dict[tuple[int, str], int] = {}  # names bound more than once, met so far
        self.variables, self.swap = variables or {}, swap or {}
        self.frozen, self.record = frozen if frozen is not None else {}, record
        self.locals: dict[str, Any] = {}  # comprehension targets, the running function's names
        self.memo: dict[tuple[int, int], Any] = {}
        self.helpers: list[cst.CSTNode] = []  # the functions running
        self.frames: list[Scope] = []  # their scopes: their names are in `locals` or unbound
        self.steps, self.budget = 0, budget if budget is not None else [0]
        self.straight_through, self.rounded = straight_through, False

    def value(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> Any:
        if depth > 60:
            raise Unknown("too deep")
        d = depth + 1
        t = type(expr)  # libcst's classes are ABCs: `isinstance` costs an ABCMeta check each
        if t is cst.Integer or t is cst.Float:
            number = _NUMBER_LITERALS.get(expr.value)
            if number is None:  # `evaluated_value` compiles the literal: once per spelling
                if len(_NUMBER_LITERALS) > 4096:
                    _NUMBER_LITERALS.clear()
                number = _NUMBER_LITERALS[expr.value] = float(expr.evaluated_value)
            return number
        if t is cst.Name:
            if expr.value in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[expr.value]
            return self._name(expr, scope, depth)
        if t is cst.Attribute:
            return self._attribute(expr, scope, depth)
        if t is cst.UnaryOperation:
            inner = unwrap(self.value(expr.expression, scope, d))
            if isinstance(expr.operator, cst.Minus):
                return -inner
            if isinstance(expr.operator, cst.Plus):
                return inner
            if isinstance(expr.operator, cst.Not):
                return not self.truth(inner)
            raise Unknown(type(expr.operator).__name__)
        if t is cst.BinaryOperation:
            return self.binary(type(expr.operator), self.value(expr.left, scope, d), self.value(expr.right, scope, d))
        if t is cst.BooleanOperation:  # Python's `and` / `or`, on one value each
            left = self.value(expr.left, scope, d)
            if self.truth(left) == isinstance(expr.operator, cst.Or):
                return left
            return self.value(expr.right, scope, d)
        if t is cst.IfExp:
            return self.value(expr.body if self.truth(self.value(expr.test, scope, d)) else expr.orelse, scope, d)
        if t is cst.Lambda and expr in self.model.scope_of:
            return Function(expr, self.model.scope_of[expr], self.locals, model=self.model)
        if (t is cst.Comparison and len(expr.comparisons) == 1
                and type(expr.comparisons[0].operator) in _COMPARE):
            return _COMPARE[type(expr.comparisons[0].operator)](
                unwrap(self.value(expr.left, scope, d)), unwrap(self.value(expr.comparisons[0].comparator, scope, d)))
        if t is cst.Tuple or t is cst.List:
            if any(isinstance(e, cst.StarredElement) for e in expr.elements):
                raise Unknown("starred element")
            items = [self.value(e.value, scope, d) for e in expr.elements]
            return tuple(items) if t is cst.Tuple else items
        if t is cst.Dict:
            if not all(isinstance(e, cst.DictElement) for e in expr.elements):
                raise Unknown("dict unpacking")
            return {self._key(self.value(e.key, scope, d)): self.value(e.value, scope, d) for e in expr.elements}
        if t is cst.ListComp or t is cst.DictComp:
            return self._comprehension(expr, scope, d)
        if t is cst.Subscript:
            return self._subscript(expr, scope, d)
        if t is cst.SimpleString:
            return expr.evaluated_value
        if t is cst.Call:
            return self._call(expr, scope, d)
        raise Unknown(type(expr).__name__)

    @staticmethod
    def binary(operator: type, left: Any, right: Any) -> Any:
        if operator not in _BINARY:
            raise Unknown(operator.__name__)
        return _BINARY[operator](unwrap(left), unwrap(right))

    @staticmethod
    def _key(key: Any) -> Any:
        if isinstance(key, (Var, str, int, float, bool, tuple)):
            return key
        raise Unknown("dict key")

    def _comprehension(self, expr: cst.ListComp | cst.DictComp, scope: Scope, depth: int) -> list | dict:
        loop = expr.for_in
        if loop.inner_for_in is not None or loop.asynchronous:
            raise Unknown("comprehension")
        items = self.value(loop.iter, scope, depth)
        if not isinstance(items, (list, tuple, range)):
            raise Unknown("comprehension over a non-list")
        # `for v in ...`, `for i, v in enumerate(...)`: the targets' names, restored in place
        # afterwards (closures hold this dict)
        names = [n.value for n in self.model.reads_in(loop.target)]
        missing = object()
        saved = {name: self.locals.get(name, missing) for name in names}
        out = []
        try:
            for item in items:
                self.step()
                self.assign(loop.target, item)
                if all(self.truth(self.value(c.test, scope, depth)) for c in loop.ifs):
                    out.append((self._key(self.value(expr.key, scope, depth)), self.value(expr.value, scope, depth))
                               if isinstance(expr, cst.DictComp) else self.value(expr.elt, scope, depth))
        finally:
            for name, value in saved.items():
                if value is missing:
                    self.locals.pop(name, None)
                else:
                    self.locals[name] = value
        return dict(out) if isinstance(expr, cst.DictComp) else out

    def _subscript(self, expr: cst.Subscript, scope: Scope, depth: int) -> Any:
        container = unwrap(self.value(expr.value, scope, depth))
        index = []
        for el in expr.slice:
            s = el.slice
            if isinstance(s, cst.Index):
                index.append(self.value(s.value, scope, depth))
            elif isinstance(s, cst.Slice) and s.step is None:
                bounds = [None if b is None else self.value(b, scope, depth) for b in (s.lower, s.upper)]
                index.append(slice(*(None if b is None else int(b) for b in bounds)))
            else:
                raise Unknown("slice")
        if isinstance(container, dict):
            if len(index) != 1 or index[0] not in container:
                raise Unknown("dict entry")
            return container[index[0]]
        index = [int(i) if isinstance(i, float) and i == int(i) else i for i in index]
        if isinstance(container, (list, tuple)):
            if len(index) != 1 or not isinstance(index[0], (int, slice)):
                raise Unknown("list index")
            return container[index[0]]
        if isinstance(container, self.np.ndarray) and all(isinstance(i, (int, slice)) or i is None for i in index):
            return container[tuple(index)]
        if isinstance(container, self.np.ndarray) and any(isinstance(i, str) for i in index):
            raise TypeError("a tensor indexed by a string")  # as TensorFlow raises
        raise Unknown("subscript")

    def _attribute(self, expr: cst.Attribute, scope: Scope, depth: int) -> Any:
        qualname = self.model.qualname(expr)
        if qualname in _CONSTANTS:
            return _CONSTANTS[qualname]
        if qualname is not None and qualname.split(".")[0] in ("tensorflow", "numpy", "keras"):
            leaf = qualname.rsplit(".", 1)[1]
            if leaf in self.ops.FLOAT_DTYPES or leaf == "bool":
                return leaf
            raise Unknown(qualname)
        var = self._variable(expr, scope)
        if var is not None:
            return var
        attr = expr.attr.value
        if attr in ("value", "shape", "T", "dtype"):
            inner = self.value(expr.value, scope, depth + 1)
            if attr == "value" and isinstance(inner, Var):
                return inner
            inner = unwrap(inner)
            if isinstance(inner, self.np.ndarray) or isinstance(inner, float):
                return {"value": inner, "shape": tuple(self.np.shape(inner)), "T": self.np.transpose(inner),
                        "dtype": "float64"}[attr]
        raise Unknown(f"attribute {attr}")

    def _variable(self, expr: cst.BaseExpression, scope: Scope) -> Var | None:
        if not self.variables:
            return None
        held = self.model.weights(expr, scope)
        if len(held) == 1 and held[0].exact and id(held[0].created_by) in self.variables:
            return self.variables[id(held[0].created_by)]
        return None

    def _call(self, call: cst.Call, scope: Scope, depth: int) -> Any:
        if (isinstance(call.func, cst.Attribute) and call.func.attr.value == "ref" and not call.args):
            inner = self.value(call.func.value, scope, depth)
            if isinstance(inner, Var):
                return inner
            raise Unknown("ref of a non-variable")
        if any(a.star for a in call.args):
            raise Unknown("star arguments")
        qualname = self.model.qualname(call.func)
        op = tf_op_name(qualname)
        if op is None and qualname is not None and qualname.startswith(("math.", "numpy.")):
            op = qualname.split(".", 1)[1]  # `math.log(2.0)`, `np.exp(x)`: the same maths
        if op == "stop_gradient" and call.args:
            if any(scope.within(f) for f in self.frames):
                raise Unknown("stop_gradient in a function run")  # one call node, several values
            if not self.record and id(call) in self.frozen:
                return self.frozen[id(call)]
            value = self.value(call.args[0].value, scope, depth)
            if self.record:
                self.frozen[id(call)] = value
            return value
        if qualname in _DTYPE_CALLS and call.args and not any(a.keyword for a in call.args):
            if all(unwrap(self.value(a.value, scope, depth)) in self.ops.FLOAT_DTYPES for a in call.args):
                return "float64"
            raise Unknown(f"{qualname} of a non-float dtype")
        if op == "where" and len(call.args) == 3 and not any(a.keyword for a in call.args):
            return self._where(call, scope, depth)
        fn = self.ops.OPS.get(op) if op is not None else None
        if op in self.ops.STRAIGHT_THROUGH:
            self.rounded = True
            fn = self.ops.STRAIGHT_THROUGH[op] if self.straight_through else fn
        if fn is None and isinstance(call.func, cst.Name) and scope.lookup(call.func.value) is None:
            fn = self.ops.BUILTINS.get(call.func.value)
        if fn is None and op != "while_loop":
            fn = self._function(call, scope, depth)
        args = [unwrap(self.value(a.value, scope, depth)) for a in call.args if a.keyword is None]
        kwargs = {a.keyword.value: unwrap(self.value(a.value, scope, depth)) for a in call.args if a.keyword is not None}
        if op == "while_loop":
            return self.while_loop(args, kwargs, depth)
        if isinstance(fn, Function):
            return self.call_function(fn, args, kwargs, depth)
        try:
            return fn(*args, **kwargs)
        except TypeError as e:  # a signature the table does not accept, or values it does not take
            raise Unknown(f"call {op}: {e}") from None

    def _function(self, call: cst.Call, scope: Scope, depth: int) -> Function:
        """The callee when it is a def or lambda of this module (`_unbroadcast(g, like)`), a def
        imported from another project module (`from .derivatives import sigmoid_grad`), or one
        made by the function running: it is run on the call's values."""
        if isinstance(call.func, cst.Name) and isinstance(self.locals.get(call.func.value), Function):
            return self.locals[call.func.value]
        cls = scope.enclosing_class()
        if isinstance(call.func, cst.Attribute) and is_self(call.func.value) and cls is not None:
            # `self._helper(x)`: the class's one def of that name, its `self` an Instance
            defs = cls.bindings.get(call.func.attr.value, [])
            if len(defs) == 1 and isinstance(defs[0], cst.FunctionDef) and defs[0] in self.model.scope_of:
                static = is_staticmethod(defs[0])
                return Function(defs[0], self.model.scope_of[defs[0]], {}, () if static else (Instance(),))
        helper = self.model.helper(call.func, scope)
        if helper is None:
            try:  # a lambda bound to a name, a def passed in as a parameter
                fn = self.value(call.func, scope, depth)
            except Unknown:
                fn = None
            if isinstance(fn, Function):
                return fn
            raise Unknown(f"call {self.model.qualname(call.func)}")
        return Function(helper.node, helper.scope, {}, model=helper.model)

    def foreign(self, fn: Function, args: list, kwargs: dict, depth: int) -> Any:
        """A function of another project module, run by an evaluator of that module (its names,
        imports and ops are read there), within this one's bounds: nested calls, steps, budget."""
        other = Evaluator(fn.model, {}, straight_through=self.straight_through, budget=self.budget)
        other.helpers, other.steps = list(self.helpers), self.steps
        try:
            return other.call_function(fn, args, kwargs, depth)
        finally:
            self.steps, self.rounded = other.steps, self.rounded or other.rounded

    def _where(self, call: cst.Call, scope: Scope, depth: int) -> Any:
        """`tf.where(c, x, y)`: where `c` holds one value everywhere, the branch it does not pick
        need not be evaluable (its values reach neither the output nor its derivative)."""
        c, x, y = (call.args[i].value for i in range(3))
        cond = unwrap(self.value(c, scope, depth))
        picked = self.np.asarray(self.ops.OPS["where"](cond, 1.0, 0.0))
        branches = []
        for branch, used in ((x, picked.any()), (y, not picked.all())):
            try:
                branches.append(unwrap(self.value(branch, scope, depth)))
            except Unknown:
                if used:
                    raise
                branches.append(None)
        x_value, y_value = (b if b is not None else o for b, o in zip(branches, branches[::-1]))
        return self.ops.OPS["where"](cond, x_value, y_value)

    def _name(self, name: cst.Name, scope: Scope, depth: int) -> Any:
        if id(name) in self.swap:
            return self._name(cst.Name(self.swap[id(name)]), scope, depth)
        if name.value in self.locals:
            return self.locals[name.value]
        found = scope.lookup(name.value)
        if found is None:
            raise Unknown(name.value)
        owner = found[0]
        if any(owner is f for f in self.frames):
            raise Unknown(f"{name.value} not bound yet")
        seq = self.model._read_seq.get(id(name))
        values = owner.visible(name.value, seq if owner is scope else None)
        if not 1 <= len(values) <= 4:
            raise Unknown(f"{name.value} bound {len(values)} times")
        if len(values) > 1:
            # Bound under conditions (`cutoff = -20` or `-9` by dtype): one binding per world
            # (`picks`); callers evaluate every world and use a value only where all agree.
            key = (id(owner), name.value)
            self.choices[key] = len(values)
            return self._bound(name, values[self.picks.get(key, 0)], owner, depth)
        return self._bound(name, values[0], owner, depth)

    def _bound(self, name: cst.Name, value, owner: Scope, depth: int) -> Any:
        if isinstance(value, Param):
            if id(value) in self.env:
                return self.env[id(value)]
            raise Unknown(f"parameter {name.value}")
        if isinstance(value, cst.Call) and id(value) in self.variables:
            return self.variables[id(value)]
        key = (id(value), id(owner))
        if key in self.memo:
            return self.memo[key]
        saved, self.locals = self.locals, {}  # the running function's names are not the owner's
        try:
            if isinstance(value, Unpacked):
                source = unwrap(self.value(value.source, owner, depth + 1))
                if not isinstance(source, (tuple, list)) or value.index >= len(source):
                    raise Unknown(f"unpacking {name.value}")
                result = source[value.index]
            elif isinstance(value, cst.BaseExpression):
                result = self.value(value, owner, depth + 1)
            elif isinstance(value, cst.FunctionDef) and value in self.model.scope_of:
                result = Function(value, self.model.scope_of[value], {}, model=self.model)
            else:
                raise Unknown(name.value)
        finally:
            self.locals = saved
        self.memo[key] = result
        return result


def derivative_at_output(model: ModuleModel, site) -> cst.BaseExpression | None:
    """For a one-input elementwise site whose grad fn reads the forward's output: the grad fn's
    returned expression when its values are the forward's derivative taken at the output,
    f'(f(x)), and not the derivative, f'(x), at sample points (None when the maths cannot be
    evaluated or says otherwise)."""
    if len(site.inputs) != 1 or site.has_varargs or site.variables or len(site.outputs) != 1 or len(site.grad_fns) != 1:
        return None
    grad = site.grad_fns[0]
    out = site.outputs[0]
    if (not isinstance(out, cst.Name) or grad.at is not None or not grad.reads(out.value)
            or len(grad.upstream_params) != 1):
        return None
    returns = [r.value for r in grad.returns if r.value is not None]
    if len(returns) != 1 or isinstance(returns[0], (cst.Tuple, cst.List)):
        return None
    x_param = next((v for v in site.scope.bindings.get(site.inputs[0], []) if isinstance(v, Param)), None)
    dy_param = next((v for v in grad.scope.bindings.get(grad.upstream_params[0], []) if isinstance(v, Param)), None)
    if x_param is None or dy_param is None:
        return None

    budget = [0]  # statements run over every evaluation of this site

    def evaluate(expr: cst.BaseExpression, scope: Scope, env: dict[int, float]) -> float:
        """The value in every world of conditional bindings (at most 8), when all agree."""
        first = Evaluator(model, env, budget=budget)
        value = float(first.value(expr, scope))
        worlds = [{}]
        for key, n in first.choices.items():
            worlds = [{**w, key: i} for w in worlds for i in range(n)]
        if len(worlds) > 8:
            raise Unknown("too many conditional bindings")
        for picks in worlds[1:]:
            other = float(Evaluator(model, env, picks, budget=budget).value(expr, scope))
            if abs(other - value) > 1e-9 * max(1.0, abs(value)):
                raise Unknown("the value depends on which binding holds")
        return value

    def forward(at: float) -> float:
        return evaluate(out, site.scope, {id(x_param): at})

    import numpy as np  # only once the site is one to evaluate

    with np.errstate(all="ignore"):  # a log of a negative sample is NaN, skipped below
        agree_at_output = differ_from_true = points = 0
        for i in range(24):
            x = (0.2 + 1.1 * ((i * 0.61803398875) % 1.0)) * (1 if i % 2 else -1)  # spread over ±[0.2, 1.3]
            try:
                g = evaluate(returns[0], grad.scope, {id(x_param): x, id(dy_param): 1.0})
                y = forward(x)
                h, hy = 1e-6 * (1.0 + abs(x)), 1e-6 * (1.0 + abs(y))
                true = (forward(x + h) - forward(x - h)) / (2 * h)
                at_output = (forward(y + hy) - forward(y - hy)) / (2 * hy)
            except Unknown:
                return None
            except (ArithmeticError, ValueError, TypeError, IndexError, KeyError, AttributeError):
                continue  # outside the maths' domain at this point (log of a negative, ...)
            if not all(math.isfinite(v) for v in (g, true, at_output)):
                continue
            points += 1
            agree_at_output += abs(g - at_output) <= 1e-4 * max(1.0, abs(at_output))
            differ_from_true += abs(g - true) > 1e-3 * max(1.0, abs(true))
    if points >= 8 and agree_at_output == points and differ_from_true >= 0.75 * points:
        return returns[0]
    return None
