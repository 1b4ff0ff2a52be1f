"""Functions the evaluator (`cglint.samples.evaluate`) follows into: the module's defs with several
statements (local assignments, tuple unpacking, `if` on evaluable conditions, several returns),
nested defs and lambdas with their closures, Python `for` loops and `tf.while_loop`, run one
statement at a time on sample values. The user's code is still read, never run.

The module chooses how long its loops run, so everything is bounded: statements and trips per
evaluation (`MAX_STEPS`) and over the evaluations of one judgement (`MAX_SITE_STEPS`: a
`budget` the evaluators share), trips of one `while_loop` (`MAX_TRIPS`), nested calls (`MAX_CALLS`).
Beyond a bound, or at any statement not listed here, the value is `Unknown`.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

MAX_STEPS = 2000
MAX_SITE_STEPS = 100_000  # over every evaluation one judgement makes (points, directions, worlds)
MAX_TRIPS = 256
MAX_CALLS = 6


class Unknown(Exception):
    """The expression holds something the evaluator does not compute."""


class Var:
    """A variable's sample value; compared by identity, as `variables` and `w.ref()` are."""

    def __init__(self, value: Any) -> None:
        self.value = value


def unwrap(value: Any) -> Any:
    return value.value if isinstance(value, Var) else value


class Function:
    """A def or lambda as a value: its node, its scope and, when it was made inside an
    interpreted function, that function's locals (its closure, read when it is called);
    `bound`: the arguments it is called with first (a method's `self`); `model`: the module
    defining it, when it may be another project module's (its names are that module's)."""

    def __init__(self, node: cst.FunctionDef | cst.Lambda, scope, closure: dict[str, Any], bound: tuple = (),
                 model=None) -> None:
        self.node, self.scope, self.closure, self.bound, self.model = node, scope, closure, bound, model


class Instance:
    """The `self` a method runs with: what it holds is not known (its variables are, by the
    model's `weights`), so reading an attribute of it is Unknown."""


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


# Context managers and calls that only name, place or check what the maths computes.
_SCOPES = ("tensorflow.name_scope", "tensorflow.compat.v1.name_scope", "tensorflow.control_dependencies",
           "tensorflow.device", "keras.name_scope", "keras.src.backend.name_scope")
_CHECKS = ("tensorflow.debugging.", "tensorflow.assert_", "tensorflow.print")

_AUGMENTED = {cst.AddAssign: cst.Add, cst.SubtractAssign: cst.Subtract, cst.MultiplyAssign: cst.Multiply,
              cst.DivideAssign: cst.Divide, cst.PowerAssign: cst.Power, cst.MatrixMultiplyAssign: cst.MatrixMultiply}


class Interpreter:
    """Mixed into the Evaluator: `value`, `binary`, `locals` (the running function's names),
    `frames` (the scopes of the functions running), `helpers`, `steps` and `budget` are its."""

    def truth(self, value: Any) -> bool:
        """A condition's truth, when it is one value (a Python bool or number, a one-element
        array, None): an array of several has none, in Python as in TensorFlow."""
        value = unwrap(value)
        if value is None or isinstance(value, (bool, int, float, str, tuple, list, dict)):
            return bool(value)
        if hasattr(value, "size") and value.size == 1:
            return bool(value.reshape(()))
        raise Unknown("the truth of an array")

    def call_function(self, fn: Function, args: list, kwargs: dict, depth: int) -> Any:
        if fn.model is not None and fn.model is not self.model:
            return self.foreign(fn, args, kwargs, depth)
        node = fn.node
        if len(self.helpers) >= MAX_CALLS or (isinstance(node, cst.FunctionDef) and any(
                not (isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod") for d in node.decorators)):
            raise Unknown("call")
        frame = {**fn.closure, **self._arguments(fn, [*fn.bound, *args], kwargs, depth)}
        saved = self.locals, self.frames
        self.locals, self.frames = frame, [*self.frames, fn.scope]
        self.helpers.append(node)
        try:
            if isinstance(node, cst.Lambda):
                return self.value(node.body, fn.scope, depth)
            try:
                self.block(node.body, fn.scope, depth)
            except _Return as r:
                return r.value
            except (_Break, _Continue):
                raise Unknown("break outside a loop") from None
            return None
        finally:
            self.locals, self.frames = saved
            self.helpers.pop()

    def _arguments(self, fn: Function, args: list, kwargs: dict, depth: int) -> dict[str, Any]:
        p = fn.node.params
        positional = [*p.posonly_params, *p.params]
        names = {q.name.value for q in [*positional, *p.kwonly_params]}
        values = {q.name.value: a for q, a in zip(positional, args)}
        extra = args[len(positional):]
        if isinstance(p.star_arg, cst.Param):
            values[p.star_arg.name.value] = tuple(extra)
        elif extra:
            raise Unknown("too many arguments")
        rest = {k: v for k, v in kwargs.items() if k not in names}
        if any(k in values for k in kwargs) or (rest and p.star_kwarg is None):
            raise Unknown("arguments")
        values.update({k: v for k, v in kwargs.items() if k in names})
        if p.star_kwarg is not None:
            values[p.star_kwarg.name.value] = rest
        saved, self.locals = self.locals, dict(fn.closure)  # defaults are read where the def is
        try:
            for q in [*positional, *p.kwonly_params]:
                if q.name.value not in values:
                    if q.default is None:
                        raise Unknown("a missing argument")
                    values[q.name.value] = self.value(q.default, fn.scope.parent, depth + 1)
        finally:
            self.locals = saved
        return values

    # ---- statements ---------------------------------------------------------------------------

    def block(self, block: cst.BaseSuite, scope, depth: int) -> None:
        for stmt in block.body:
            self._statement(stmt, scope, depth)

    def step(self) -> None:
        self.steps += 1
        self.budget[0] += 1
        if self.steps > MAX_STEPS or self.budget[0] > MAX_SITE_STEPS:
            raise Unknown("too many steps")

    def _statement(self, stmt: cst.CSTNode, scope, depth: int) -> None:
        self.step()
        if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in stmt.body:
                self._small(small, scope, depth)
        elif isinstance(stmt, cst.If):
            if self.truth(self.value(stmt.test, scope, depth)):
                self.block(stmt.body, scope, depth)
            elif isinstance(stmt.orelse, cst.If):
                self._statement(stmt.orelse, scope, depth)
            elif stmt.orelse is not None:
                self.block(stmt.orelse.body, scope, depth)
        elif isinstance(stmt, cst.For) and stmt.orelse is None and stmt.asynchronous is None:
            items = self.value(stmt.iter, scope, depth)
            if not isinstance(items, (list, tuple, range)):
                raise Unknown("a loop over a non-sequence")
            for item in items:
                self.step()
                self.assign(stmt.target, item)
                try:
                    self.block(stmt.body, scope, depth)
                except _Break:
                    break
                except _Continue:
                    continue
        elif isinstance(stmt, cst.With) and stmt.asynchronous is None and all(
                isinstance(w.item, cst.Call) and self.model.qualname(w.item.func) in _SCOPES for w in stmt.items):
            for w in stmt.items:  # `as scope` binds the scope's name, a string
                if w.asname is not None:
                    self.assign(w.asname.name, "")
            self.block(stmt.body, scope, depth)
        elif isinstance(stmt, cst.FunctionDef) and not stmt.decorators and stmt in self.model.scope_of:
            self.locals[stmt.name.value] = Function(stmt, self.model.scope_of[stmt], self.locals, model=self.model)
        else:
            raise Unknown(type(stmt).__name__)

    def _small(self, s: cst.BaseSmallStatement, scope, depth: int) -> None:
        if isinstance(s, cst.Expr) and isinstance(s.value, (cst.SimpleString, cst.ConcatenatedString, cst.Ellipsis)):
            return  # a docstring
        if isinstance(s, (cst.Pass, cst.Assert)) or (isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) and (
                self.model.qualname(s.value.func) or "").startswith(_CHECKS)):
            return  # an assert checks values; it computes none
        if isinstance(s, cst.Assign):
            value = self.value(s.value, scope, depth)
            for t in s.targets:
                self.assign(t.target, value)
        elif isinstance(s, cst.AnnAssign) and s.value is not None:
            self.assign(s.target, self.value(s.value, scope, depth))
        elif isinstance(s, cst.AugAssign) and isinstance(s.target, cst.Name) and type(s.operator) in _AUGMENTED:
            self.assign(s.target, self.binary(_AUGMENTED[type(s.operator)], self.value(s.target, scope, depth),
                                              self.value(s.value, scope, depth)))
        elif isinstance(s, cst.Return):
            raise _Return(None if s.value is None else self.value(s.value, scope, depth))
        elif isinstance(s, cst.Break):
            raise _Break
        elif isinstance(s, cst.Continue):
            raise _Continue
        elif isinstance(s, cst.Del) and isinstance(s.target, cst.Name):
            self.locals.pop(s.target.value, None)
        else:
            raise Unknown(type(s).__name__)

    def assign(self, target: cst.BaseExpression, value: Any) -> None:
        if isinstance(target, cst.Name):
            self.locals[target.value] = value
        elif isinstance(target, (cst.Tuple, cst.List)) and not any(
                isinstance(e, cst.StarredElement) for e in target.elements):
            items = list(value) if isinstance(value, (tuple, list)) or hasattr(value, "ndim") and value.ndim else None
            if items is None or len(items) != len(target.elements):
                raise Unknown("unpacking")
            for e, item in zip(target.elements, items):
                self.assign(e.value, item)
        else:
            raise Unknown("assignment target")

    # ---- tf.while_loop ------------------------------------------------------------------------

    def while_loop(self, args: list, kwargs: dict, depth: int) -> Any:
        """`tf.while_loop(cond, body, loop_vars, ..., maximum_iterations=None)` (and
        `keras.ops.while_loop`): at most MAX_TRIPS trips, Unknown if it would run longer."""
        names = ["cond", "body", "loop_vars", "shape_invariants", "parallel_iterations", "back_prop",
                 "swap_memory", "maximum_iterations", "name"]
        bound = {**dict(zip(names, args)), **kwargs}
        if len(args) > len(names) or set(bound) - set(names) or not {"cond", "body", "loop_vars"} <= set(bound):
            raise Unknown("while_loop arguments")
        cond, body, state = bound["cond"], bound["body"], bound["loop_vars"]
        if not isinstance(cond, Function) or not isinstance(body, Function):
            raise Unknown("while_loop of unknown functions")
        limit = bound.get("maximum_iterations")
        limit = MAX_TRIPS + 1 if limit is None else int(limit)
        many = isinstance(state, (tuple, list))
        kind = type(state) if many else None
        trips = 0
        while trips < limit and self.truth(self.call_function(cond, list(state) if many else [state], {}, depth)):
            trips += 1
            if trips > MAX_TRIPS:
                raise Unknown("a while_loop of more trips than evaluated")
            self.step()
            state = self.call_function(body, list(state) if many else [state], {}, depth)
            if many:
                if not isinstance(state, (tuple, list)) or len(state) != len(bound["loop_vars"]):
                    raise Unknown("a while_loop body of another structure")
                state = kind(state)
        return state
