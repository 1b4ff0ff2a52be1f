"""A grad fn judged against the forward's vector-Jacobian product, on small sample arrays.

TensorFlow's contract: each gradient a grad fn returns is the forward's VJP with the upstream,
for its own input or variable, at the point the forward ran. Both are evaluated
(`cglint.samples.evaluate`: the project's NumPy ops, never the user's code) at a few sample
points: the VJP by float64 central differences along random directions, the grad fn directly.
`output_read_for_input` says where a grad fn reads the forward's output that reading an input
(or the output's own operand) instead makes every gradient right, when the gradients as written
are wrong at most points. Anything Unknown claims nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations, product
from typing import TYPE_CHECKING, Any

import libcst as cst

from cglint.cstwalk import Walker
from cglint.samples.evaluate import Evaluator, Unknown, Var
from cglint.samples.interpret import Function
from cglint.model.scopes import Param

if TYPE_CHECKING:
    import numpy as np

    from cglint.model.module import ModuleModel
    from cglint.model.sites import GradientSite
    from cglint.model.variables import Variable

_DIM = 3  # every dimension the source does not fix
POINTS = 3
_MAX_READS = 4  # reads of the output tried in every combination
_MAX_ELEMENTS = 400  # per sample array
# What NumPy or Python raise on maths they cannot do with these samples (shapes that do not
# match, a dict read by a key it lacks, ...): that world is not evaluable.
MATHS_ERRORS = (ArithmeticError, ValueError, TypeError, IndexError, KeyError, AttributeError)


@dataclass
class OutputRead:
    """Reading `instead` at `reads` (the grad fn's reads of the output `output`) makes every
    returned gradient match the VJP; as written, `wrong` (an input's or variable's name) does not."""

    reads: list[cst.Name]
    output: str
    instead: str
    wrong: str
    straight_through: bool = False  # judged against the straight-through estimator's derivative


def output_read_for_input(model: ModuleModel, site: GradientSite) -> OutputRead | None:
    try:
        check = Check(model, site)
    except (Unknown, Skip):
        return None
    import numpy as np  # only once a site gets this far

    check.np = np
    with np.errstate(all="ignore"):
        return check.in_every_world()


class _StringKeys(Walker):
    """`name["key"]` subscripts: the keys read of each name, in source order."""

    def __init__(self) -> None:
        self.keys: dict[str, list[str]] = {}

    def visit_Subscript(self, node: cst.Subscript) -> None:
        index = node.slice[0].slice if len(node.slice) == 1 else None
        if (isinstance(node.value, cst.Name) and isinstance(index, cst.Index)
                and isinstance(index.value, cst.SimpleString)):
            key = index.value.evaluated_value
            keys = self.keys.setdefault(node.value.value, [])
            keys += [key] if isinstance(key, str) and key not in keys else []


class Skip(Exception):
    pass


class Check:
    def __init__(self, model: ModuleModel, site: GradientSite, reads_output: bool = True,
                 any_output: bool = False) -> None:
        self.model, self.site = model, site
        out = site.outputs[0] if len(site.outputs) == 1 else None
        # A named output, except for the value check (CG019, `any_output`): evaluating every site
        # whose output is an expression for every check doubled a lint of 6,000 sites.
        if (not isinstance(out, cst.BaseExpression if any_output else cst.Name) or len(site.grad_fns) != 1
                or site.has_varargs or not site.inputs or any(not v.exact for v in site.variables)):
            raise Skip
        self.grad = site.grad_fns[0]
        if self.grad.at is not None:
            raise Skip  # defined in another module: its names are that module's
        returns = [r.value for r in self.grad.returns]
        # `grad(dy)`, or Keras's `grad(*args, upstream=None)`: that one is run
        keras_style = self.grad.has_varargs and not self.grad.upstream_params
        if not returns or None in returns or not (len(self.grad.upstream_params) == 1 and not self.grad.has_varargs
                                                  or keras_style):
            raise Skip
        # One return is read as an expression; several (or names bound under `if`s) are run.
        self.out, self.returned = out, returns[0] if len(returns) == 1 else None
        # The grad fn's reads of the forward's output (the forward's own binding of the name).
        if isinstance(out, cst.Name) and out.value not in site.scope.bindings:
            raise Skip
        self.reads = [n for s in self.grad.scope.walk() for n in s.reads if n.value == getattr(out, "value", None)
                      and s.lookup(n.value) is not None and s.lookup(n.value)[0] is site.scope]
        if reads_output and not self.reads:
            raise Skip
        self.inputs = [self._param(site.scope, n) for n in site.inputs]
        self.dy = None if keras_style else self._param(self.grad.scope, self.grad.upstream_params[0])
        vp = self.grad.variables_param
        self.vars_param = self._param(self.grad.scope, vp, required=False) if vp else None
        if site.variables and self.vars_param is None:
            raise Skip
        self.free, self.extra = self._free_params(), {}
        self.positive = self.straight = self.rounded = False
        self.budget = [0]  # statements run over every evaluation of this site

    def _keys(self, name: str) -> list[str] | None:
        """The string keys an input is read by (`features["a"]`): it is sampled as a dict."""
        cache = self.model.__dict__.setdefault("_string_keys", {})
        if id(self.site.forward) not in cache:  # one walk of the forward per site, not the module's parent table
            finder = _StringKeys()
            finder.walk(self.site.forward)
            cache[id(self.site.forward)] = finder.keys
        return cache[id(self.site.forward)].get(name) or None

    @staticmethod
    def _param(scope, name: str, required: bool = True) -> Param | None:
        found = next((v for v in scope.bindings.get(name, []) if isinstance(v, Param)), None)
        if found is None and required:
            raise Skip
        return found

    # ---- samples -----------------------------------------------------------------------------

    def sample(self, shape: tuple) -> np.ndarray:
        if int(self.np.prod(shape)) > _MAX_ELEMENTS:
            raise Skip
        mag = self.rng.uniform(0.2, 1.3, size=shape)
        return mag if self.positive else mag * self.rng.choice([-1.0, 1.0], size=shape)

    def var_shape(self, var: Variable) -> tuple:
        """From `shape=` (add_weight, an initializer's call) or the initial value; dimensions
        the source does not fix are `_DIM`."""
        call = var.created_by
        scopes = self.model.__dict__.get("_call_scopes")
        if scopes is None:  # each call's scope, from the model's walk (the parent table costs a walk of its own)
            scopes = self.model.__dict__["_call_scopes"] = {id(c): sc for c, sc in self.model.all_calls}
        scope = scopes.get(id(call), self.model.root)
        ev = Evaluator(self.model, {})
        for node in self._calls_in(call):
            shape = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "shape"), None)
            if shape is not None:
                return self._dims(shape, scope, ev)
        init = call.args[0].value if call.args and call.args[0].keyword is None else None
        if init is None:
            return (_DIM, _DIM)
        bound = scope.lookup(init.value) if isinstance(init, cst.Name) else None
        if bound is not None and len(bound[1]) == 1 and isinstance(bound[1][0], Param) and bound[1][0].node.default:
            init = bound[1][0].node.default  # `tf.Variable(scale)` with `scale=1.5`: its default's shape
        try:
            return tuple(self.np.shape(ev.value(init, scope)))
        except (Unknown, ValueError, TypeError):
            pass
        if isinstance(init, cst.Call) and init.args and isinstance(init.args[0].value, (cst.List, cst.Tuple)):
            return self._dims(init.args[0].value, scope, ev)
        raise Skip

    def _dims(self, shape: cst.BaseExpression, scope, ev: Evaluator) -> tuple:
        if not isinstance(shape, (cst.List, cst.Tuple)):
            raise Skip
        dims = []
        for el in shape.elements:
            try:
                v = ev.value(el.value, scope)
                dims.append(int(v) if isinstance(v, (int, float)) and v == int(v) and 0 < v <= 64 else _DIM)
            except (Unknown, ValueError, TypeError):
                dims.append(_DIM)
        return tuple(dims)

    @staticmethod
    def _calls_in(call: cst.Call):
        node = call
        yield node
        for a in call.args:
            if isinstance(a.value, cst.Call):
                yield a.value
        while isinstance(node.func, cst.Call):  # `Ones()(shape=(4,))`
            node = node.func
            yield node

    # ---- the forward and the grad fn ---------------------------------------------------------

    def _pack(self, flat: list) -> tuple[list, list]:
        """The inputs (a dict for an input read by string keys) and the variables, from one
        array per slot."""
        xs, i = [], 0
        for keys in self.layout:
            xs.append(flat[i] if keys is None else dict(zip(keys, flat[i:i + len(keys)])))
            i += 1 if keys is None else len(keys)
        return xs, flat[i:]

    def forward(self, flat: list, frozen: dict, record: bool = False) -> Any:
        xs, ws = self._pack(flat)
        env = {**self.extra, **{id(p): x for p, x in zip(self.inputs, xs)}}
        variables = {id(v.created_by): Var(w) for v, w in zip(self.site.variables, ws)}
        ev = Evaluator(self.model, env, variables=variables, frozen=frozen, record=record,
                       straight_through=self.straight, budget=self.budget)
        y = ev.value(self.out, self.site.scope)
        self.rounded |= ev.rounded
        if ev.choices:
            raise Unknown("conditional bindings")
        y = self.np.asarray(y.value if isinstance(y, Var) else y)
        if y.dtype == bool or y.dtype == object:
            raise Skip
        return y

    def grads(self, flat: list, dy, swap: dict[int, str], order: list[int] | None = None) -> list:
        """The returned gradients, one per slot (None: no gradient); with `order`, `variables`
        holds the variables in that order, and their gradients come as returned."""
        xs, ws = self._pack(flat)
        variables = [Var(w) for w in ws]
        env = {**self.extra, **{id(p): x for p, x in zip(self.inputs, xs)}}
        env[id(self.dy)] = dy  # (id(None) for Keras's `*args`: read by none)
        if self.vars_param is not None:
            env[id(self.vars_param)] = [variables[i] for i in order or range(len(variables))] or None
        by_call = {id(v.created_by): var for v, var in zip(self.site.variables, variables)}
        ev = Evaluator(self.model, env, variables=by_call, swap=swap, budget=self.budget)
        try:
            if self.returned is None or self.dy is None:
                raise Unknown("several returns, or the upstream in `*args`")
            value = ev.value(self.returned, self.grad.scope)
            if ev.choices:
                raise Unknown("conditional bindings")
        except Unknown:
            ev = Evaluator(self.model, env, variables=by_call, swap=swap, budget=self.budget)
            kwargs = {self.vars_param.node.name.value: env[id(self.vars_param)]} if self.vars_param else {}
            value = ev.call_function(Function(self.grad.node, self.grad.scope, {}), [dy], kwargs, 0)
        n = len(self.inputs)
        if self.site.variables:
            if not isinstance(value, (tuple, list)) or len(value) != 2:
                raise Unknown("return shape")
            grads, var_grads = value
            if not isinstance(var_grads, (tuple, list)) or len(var_grads) != len(variables):
                raise Unknown("variable gradients")
        else:
            grads, var_grads = value, []
        if n == 1 and not (isinstance(grads, (tuple, list)) and len(grads) == 1):
            grads = [grads]
        if not isinstance(grads, (tuple, list)) or len(grads) != n:
            raise Unknown("input gradients")
        out = []
        for g, keys in zip(grads, self.layout):
            if keys is not None and g is not None and not isinstance(g, dict):
                raise Unknown("a structured input's gradient")
            out += [g] if keys is None else [None if g is None else g.get(k) for k in keys]
        return [None if g is None else g.value if isinstance(g, Var) else g for g in [*out, *var_grads]]

    def _agrees(self, g, slot: int, point) -> bool:
        flat, dy, slopes = point
        target = flat[slot]
        if g is None:
            g = 0.0
        try:
            g = self.np.broadcast_to(self.np.asarray(g, dtype=float), self.np.shape(target))
        except (ValueError, TypeError):
            return False  # a gradient of another shape
        for v, slope in slopes[slot]:
            got = float(self.np.sum(g * v))
            if not abs(got - slope) <= 1e-4 * max(1.0, abs(slope)):
                return False
        return True

    # ---- the check ---------------------------------------------------------------------------

    def _point(self, shapes: list[tuple]) -> tuple | None:
        """Sample inputs (of `shapes`), variables and upstream, and the VJP's projections on
        random directions, for each input and variable: the slopes of <dy, forward>."""
        np = self.np
        flat = [self.sample(s) for s in shapes] + [self.sample(s) for s in self.var_shapes]
        frozen: dict = {}
        y = self.forward(flat, frozen, record=True)
        if not np.all(np.isfinite(y)):
            return None
        dy = self.sample(y.shape)
        slopes = []
        for slot, base in enumerate(flat):
            per = []
            for _ in range(2):
                v = self.sample(np.shape(base))
                slope = []
                for h in (1e-6, 1e-4):
                    ends = []
                    for sign in (1, -1):
                        moved = [a + sign * h * v if i == slot else a for i, a in enumerate(flat)]
                        ends.append(float(np.sum(dy * self.forward(moved, frozen))))
                    slope.append((ends[0] - ends[1]) / (2 * h))
                if not (np.isfinite(slope[0]) and abs(slope[0] - slope[1]) <= 1e-6 * max(1.0, abs(slope[0]))):
                    return None  # near a pole or a kink: differences say nothing reliable here
                per.append((v, slope[0]))
            slopes.append(per)
        return flat, dy, slopes

    def x_shape(self) -> tuple:
        """The first of a few shapes for every input at which the forward evaluates."""
        dims = [_DIM] + [s[0] for s in self.var_shapes if len(s) == 2 and s[0] != _DIM]
        for shape in [*((_DIM, d) for d in dims[:3]), (_DIM,), ()]:
            try:
                self.forward([self.sample(shape) for _ in range(self.input_slots)]
                              + [self.sample(s) for s in self.var_shapes], {}, record=True)
                return shape
            except MATHS_ERRORS:
                continue
        raise Skip

    def _candidates(self) -> list[tuple[tuple, str]]:
        """(reads of the output, the name read there instead): the inputs and the names the
        output is computed from directly (`z` in `y = tf.tanh(z)`)."""
        names = list(self.site.inputs)
        for bound in self.site.scope.bindings.get(self.out.value, []):
            if isinstance(bound, cst.BaseExpression):
                names += [n.value for n in self.model.reads_in(bound)]
        names = [n for n in dict.fromkeys(names) if n != self.out.value and self._data(n)][:4]
        k = len(self.reads)
        subsets = ([c for r in range(1, k + 1) for c in combinations(self.reads, r)] if k <= _MAX_READS
                   else [(r,) for r in self.reads] + [tuple(self.reads)])
        return [(s, n) for n in names for s in subsets]

    def _data(self, name: str) -> bool:
        """`name` read from the grad fn is a value the forward computes or takes (not a module,
        a function or `self`)."""
        found = self.grad.scope.lookup(name)
        if found is None or found[0] is self.model.root and name in self.model.imports:
            return False
        return all(isinstance(b, cst.BaseExpression) or (isinstance(b, Param) and b in self.inputs)
                   for b in found[0].visible(name, None))

    def lay_out(self) -> None:
        self.layout = [self._keys(name) for name in self.site.inputs]
        self.input_slots = sum(1 if k is None else len(k) for k in self.layout)
        self.slots = [name if keys is None else f"{name}[{k!r}]" for name, keys in zip(self.site.inputs, self.layout)
                      for k in (keys or [None])] + [v.name for v in self.site.variables]

    def in_every_world(self) -> OutputRead | None:
        """The claim, when it holds for every value of the enclosing functions' parameters the
        forward reads (`axis` in `def reduce_prod(t, axis)` around it) that it evaluates at:
        each is tried as 0, 1 and -1, at most two of them. Samples are of both signs and, when
        that says nothing, positive only: the domain of a scale, a concentration, a variance
        (`i0e(k)` stands for `exp(-k) I0(k)` only where `k > 0`). A forward that rounds or
        quantises has a zero derivative almost everywhere, which judges nothing: when it says
        nothing, the forward's derivative is its straight-through estimator's."""
        if len(self.free) > 2:
            return None
        self.lay_out()
        for self.straight, self.positive in product((False, True), (False, True)):
            if self.straight and not self.rounded:
                return None
            found = self._worlds()
            if found is not None:
                found.straight_through = self.straight
                return found
        return None

    def _worlds(self) -> OutputRead | None:
        found = None
        for values in product((0.0, 1.0, -1.0), repeat=len(self.free)):
            self.extra = {id(p): v for p, v in zip(self.free, values)}
            self.rng = self.np.random.default_rng(0)
            try:
                hit = self.run()
            except (Unknown, Skip, *MATHS_ERRORS):
                continue  # not evaluable with these values
            if hit is None or (found is not None and found.instead != hit.instead):
                return None
            if found is not None:  # the reads any world needed changed, in source order
                hit.reads = [r for r in self.reads if any(r is x for x in [*found.reads, *hit.reads])]
            found = hit
        return found

    def _free_params(self) -> list[Param]:
        """Parameters of enclosing functions (not the inputs, not `self`) read by the forward or
        the grad fn."""
        out: list[Param] = []
        for scope in self.site.scopes():
            for name in scope.reads:
                found = scope.lookup(name.value)
                if found is None or found[0].within(self.site.scope) or name.value in ("self", "cls"):
                    continue
                out += [b for b in found[1] if isinstance(b, Param) and b not in out]
        return out

    def run(self) -> OutputRead | None:
        """The claim at every input of one sample shape; else at each input of several in the
        shape that broadcasts against the others (a per-channel `alpha` (C,) against `x`
        (N, C)): a gradient reduced over the batch axes is right at that shape alone, and one
        kept at the output's shape (`_unbroadcast(d, y)`) wrong there alone. A read found there
        must also make the gradients right at the first shape."""
        self.var_shapes = [self.var_shape(v) for v in self.site.variables]
        x_shape = self.x_shape()
        n = self.input_slots
        same = [x_shape] * n
        first = self._run_at(same)
        if first is not None and first is not False:
            return first
        for i in range(n if n > 1 and x_shape else 0):
            try:
                found = self._run_at([x_shape[1:] if j == i else x_shape for j in range(n)])
                if isinstance(found, OutputRead) and (first is False or self._right_with(same, found)):
                    return found
            except (Skip, *MATHS_ERRORS):
                continue  # the forward takes no input of this shape
        return None

    def _right_with(self, shapes: list[tuple], found: OutputRead) -> bool:
        """The gradients match the VJP at every sample point of `shapes` with the read swapped."""
        points = 0
        for _ in range(3 * POINTS):
            point = self._point(shapes) if points < POINTS else None
            if point is not None:
                points += 1
                swapped = self.grads(point[0], point[1], {id(r): found.instead for r in found.reads})
                if not all(self._agrees(g, i, point) for i, g in enumerate(swapped)):
                    return False
        return points == POINTS

    def _run_at(self, shapes: list[tuple]) -> OutputRead | bool | None:
        """None: right as written; False: wrong, and no read of the output explains it."""
        candidates = None
        wrong_at = 0
        wrong_slot = None
        points = 0
        for _ in range(3 * POINTS):
            if points == POINTS:
                break
            try:
                point = self._point(shapes)
            except MATHS_ERRORS:
                raise Skip from None
            if point is None:
                continue
            points += 1
            flat, dy, _ = point
            try:
                actual = self.grads(flat, dy, {})
                bad = [i for i, g in enumerate(actual) if not self._agrees(g, i, point)]
            except MATHS_ERRORS:
                bad = [0]
            if bad:
                wrong_at += 1
                wrong_slot = wrong_slot if wrong_slot is not None else bad[0]
            elif candidates is None:
                return None  # right at the first point: nothing to say
            kept = []
            for reads, name in candidates if candidates is not None else self._candidates():
                try:
                    swapped = self.grads(flat, dy, {id(r): name for r in reads})
                    if all(self._agrees(g, i, point) for i, g in enumerate(swapped)):
                        kept.append((reads, name))
                except (Unknown, *MATHS_ERRORS):
                    continue
            candidates = kept
            if not candidates:
                return False
        if points < POINTS:
            raise Skip
        if wrong_at * 3 < 2 * POINTS or wrong_slot is None:
            return None
        reads, name = candidates[0]
        return OutputRead(list(reads), self.out.value, name, self.slots[wrong_slot])
