"""Sites: the TensorFlow custom-gradient functions of a module (decorated or wrapped by a call),
their grad fns and what each returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

import libcst as cst

from cglint.model.scopes import (
    FunctionNode, Scope, has_star, is_self, is_staticmethod, positional_params, return_values,
    return_values_with_nodes, argument,
)
from cglint.model.variables import Variable
from cglint.names import KERAS_CUSTOM_GRADIENT, TF_CUSTOM_GRADIENT

if TYPE_CHECKING:
    from cglint.model.module import ModuleModel



@dataclass(eq=False)
class Helper:
    """A function a name refers to (see `ModuleModel.helper`): its def, its scope, and the
    model of the module defining it (another project module's, for an imported helper: ask it,
    not the importer, about the helper's body)."""

    node: cst.FunctionDef
    scope: Scope
    model: ModuleModel

    @property
    def params(self) -> list[str]:
        """Its positional parameter names, in order."""
        return [p.name.value for p in positional_params(self.node.params)]

    def returned(self) -> list[cst.BaseExpression]:
        return [r.value for r in self.scope.returns if r.value is not None]


@dataclass(eq=False)
class GradReturn:
    """One `return` of a grad fn (a lambda's body counts as its return)."""

    node: cst.CSTNode
    value: cst.BaseExpression | None
    # The top-level elements when the value is a literal tuple (or a name bound to one).
    elements: list[cst.BaseExpression] | None

    @property
    def pair(self) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
        """`(input_grads, var_grads)` when the return is a literal 2-tuple: the shape TensorFlow
        unpacks when the forward read variables (without variables it is two input gradients)."""
        if self.elements is None or len(self.elements) != 2:
            return None
        return self.elements[0], self.elements[1]


@dataclass(eq=False)
class GradFn:
    node: FunctionNode
    name: str
    scope: Scope
    upstream_params: list[str]  # positional parameters, excluding `variables` (passed by keyword)
    has_varargs: bool
    accepts_variables: bool  # a `variables` parameter or **kwargs
    returns: list[GradReturn]
    # How many of `upstream_params` have no default: callers must pass at least this many.
    required_upstream: int = 0
    # The parameter TensorFlow's `variables=` lands in: `variables`, the **kwargs name, or None.
    variables_param: str | None = None
    # Defined in another module: the expression of the site's module that reaches it, where
    # findings about it point (`make_grad(x)`, `self.backward`); None when defined here.
    at: cst.CSTNode | None = None

    @property
    def anchor(self) -> cst.CSTNode:
        """Where diagnostics about the grad fn's definition point: its name, or the lambda."""
        return self.node.name if isinstance(self.node, cst.FunctionDef) else self.node

    def reads(self, name: str) -> bool:
        """Whether the grad fn's body (nested functions included) reads `name`."""
        return self.scope.reads_name(name)

    @property
    def upstream_names(self) -> list[str]:
        """Every name the upstream gradients arrive under: the positional parameters (not
        `variables`) and a `*args` that collects them."""
        star = self.node.params.star_arg
        return list(self.upstream_params) + ([star.name.value] if isinstance(star, cst.Param) else [])


@dataclass(eq=False)
class GradientSite:
    """One TensorFlow custom-gradient function: the forward and what the model knows of it."""

    model: ModuleModel
    name: str  # the name users call it by (`op`, `Layer.call`, or the assigned name for call forms)
    forward: FunctionNode
    scope: Scope  # the forward's own scope
    wrapper: cst.CSTNode  # the `@tf.custom_gradient` decorator or the `tf.custom_gradient(...)` call
    is_method: bool
    inputs: list[str]  # positional inputs (`self`/`cls` excluded)
    has_varargs: bool
    outputs: list[cst.BaseExpression]  # the `y` of each `return y, grad_fn`
    grad_fns: list[GradFn]
    variables: list[Variable]
    call_names: set[str]  # names under which callers reach it (for keyword-call checks)

    # ---- questions rules ask -------------------------------------------------------------

    @property
    def anchor(self) -> cst.CSTNode:
        return self.forward.name if isinstance(self.forward, cst.FunctionDef) else self.forward

    @property
    def lines(self) -> tuple[int, int, int, int]:
        """(first, last, def, wrapper) line of the site: the first is the first decorator's, as
        Python counts a decorated def (`co_firstlineno`); the runtime's plan and trace's report
        both place a site by these."""
        positions = self.model.positions
        span = positions[self.forward]
        start, end = span.start.line, span.end.line
        if isinstance(self.forward, cst.FunctionDef) and self.forward.decorators:
            start = positions[self.forward.decorators[0]].start.line
        return start, end, positions[self.anchor].start.line, positions[self.wrapper].start.line

    @property
    def keras_ops(self) -> bool:
        """A Keras 3 `keras.ops.custom_gradient` site (TensorFlow's on the TensorFlow backend)."""
        expr = self.wrapper.decorator if isinstance(self.wrapper, cst.Decorator) else getattr(self.wrapper, "func", None)
        return self.model.qualname(expr) in KERAS_CUSTOM_GRADIENT

    @property
    def trainable_variables(self) -> list[Variable]:
        return [v for v in self.variables if v.trainable]

    @property
    def output_count(self) -> int | None:
        """Number of flattened outputs, when every return agrees and the count is literal (an
        input returned as an output flattens as the input does: `input_counts`)."""
        params = self.model.param_counts(self, guessed=False)
        counts = {self.model.flat_count(y, self.scope, params=params) for y in self.outputs}
        return counts.pop() if len(counts) == 1 else None

    def scopes(self) -> Iterator[Scope]:
        """The forward's scope and every scope nested in it (grad fns, helpers)."""
        return self.scope.walk()

    def calls(self) -> Iterator[tuple[cst.Call, Scope]]:
        """Every call inside the forward, grad fns included, with the scope it is in."""
        for scope in self.scopes():
            for call in scope.calls:
                yield call, scope

    def outside_grad_fn_scopes(self, fresh: bool = False) -> list[Scope]:
        """The scopes of grad fns defined outside the forward (a method, a table's entry, a
        factory's nested def, in this module or another), and of what they nest. `fresh`: only
        those made anew each time the function that makes them runs (a factory's nested def)."""
        out: list[Scope] = []
        for g in self.grad_fns:
            parent = g.scope.parent
            if g.scope.within(self.scope) or any(s is g.scope for s in out) or (
                    fresh and (parent is None or not isinstance(parent.node, (cst.FunctionDef, cst.Lambda)))):
                continue
            out += g.scope.walk()
        return out

    def grad_fn_scopes(self) -> set[Scope]:
        return {scope for g in self.grad_fns for scope in g.scope.walk()}

    @property
    def required_inputs(self) -> int:
        """Positional inputs without a default: TensorFlow counts a defaulted one as an input
        only when a caller passes it positionally, so the input count lies in
        `required_inputs ..= len(inputs)`."""
        return sum(1 for p in self.input_params if p.default is None)

    @property
    def input_params(self) -> list[cst.Param]:
        positional = positional_params(self.forward.params)
        return positional[1:] if self.is_method and positional else positional

    @property
    def outer(self) -> Scope:
        """The scope the forward is defined in (a class body for methods)."""
        return self.scope.parent  # type: ignore[return-value]

    @property
    def declared_intentional(self) -> bool:
        """`# cglint: intentional` where cglint.directives reads it (above the forward, on its
        decorator and `def` lines, or at the end of a `return` line of the forward or its grad
        fn or of the grad fn's `def`): a gradient meant to differ from the derivative."""
        from cglint import directives

        return directives.of_tree(self.forward, self.model.module, [g.node for g in self.grad_fns]).intentional

    def is_named_by(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """Whether the name `expr` (in `scope`) is this custom-gradient function. A decorated def
        is; in the call form only the result of `tf.custom_gradient(fwd)` is (`fwd` itself is
        the plain forward)."""
        if not isinstance(expr, cst.Name):
            return False
        found = scope.lookup(expr.value)
        target = self.forward if isinstance(self.wrapper, cst.Decorator) else self.wrapper
        return found is not None and any(v is target for v in found[1])

    def is_reached_by(self, call: cst.Call, scope: Scope) -> bool:
        """Whether `call` (made in `scope`) calls this custom-gradient function: by a name bound
        to the decorated def or to the `tf.custom_gradient(...)` result, or as `self.method(...)`
        from the same class."""
        func = call.func
        if isinstance(func, cst.Name):
            return self.is_named_by(func, scope)
        if isinstance(func, cst.Attribute) and is_self(func.value) and self.is_method:
            name = self.forward.name.value if isinstance(self.forward, cst.FunctionDef) else None
            return func.attr.value in ({name} | self.call_names) and scope.enclosing_class() is self.outer
        return False


@dataclass(eq=False)
class UnwrappedCandidate:
    """A function shaped like a custom-gradient forward (returns `(y, nested_grad_fn)`)."""

    node: cst.FunctionDef
    scope: Scope
    grad_fn: cst.FunctionDef


class SiteDiscovery:
    """Finding the custom-gradient functions of a module and their grad fns."""

    # ---- site discovery ------------------------------------------------------------------

    def _is_custom_gradient(self, expr: cst.BaseExpression) -> bool:
        qualname = self.qualname(expr)
        return qualname in TF_CUSTOM_GRADIENT or qualname in KERAS_CUSTOM_GRADIENT

    def _find_sites(self) -> list[GradientSite]:
        sites: list[GradientSite] = []
        for fn, scope in self.decorated:
            for dec in fn.decorators:
                if self._is_custom_gradient(dec.decorator):
                    sites.append(self._site(fn, dec, scope, fn.name.value, {fn.name.value}))
                    break
                if self.applies_custom_gradient(dec.decorator, scope):
                    # A user decorator applying it (`@cg_op`, imported): a site only when the
                    # def is shaped as TensorFlow then requires, `return y, grad_fn`.
                    site = self._site(fn, dec, scope, fn.name.value, {fn.name.value})
                    if site.grad_fns:
                        sites.append(site)
                    break
        for call, scope in self.all_calls:
            if not self._is_custom_gradient(call.func):
                continue
            target = argument(call, 0, "f")
            forward: FunctionNode | None = None
            name = "<lambda>"
            if isinstance(target, cst.Lambda):
                forward = target
                passed = self._passed_through(target)
                if passed is not None:  # `lambda t: self._clip(t)`: the method is the forward
                    forward, name = passed, passed.name.value
            elif isinstance(target, cst.Name):
                name = target.value
                for value in self.resolve(target, scope):
                    if isinstance(value, (cst.FunctionDef, cst.Lambda)):
                        forward = value
            elif isinstance(target, cst.Attribute) and is_self(target.value):
                name = target.attr.value
                cls = scope.enclosing_class()
                # The method on the class or a base of this module (`tf.custom_gradient(self._fwd)`).
                found = [c.node for c in self.method(cls, name) if c.model is self] if cls is not None else []
                forward = found[0] if found else None
            elif isinstance(target, cst.Call):  # a factory returning the forward, in this module
                found = [c.node for c in self.callables(target, scope) if c.model is self]
                forward = found[0] if len(found) == 1 else None
            if forward is None:
                continue
            call_names = self.names_bound_to(call, scope)
            fscope = self.scope_of.get(forward)
            if fscope is None or fscope.parent is None:
                continue
            sites.append(self._site(forward, call, fscope.parent, name, call_names))
        forwards = {id(s.forward) for s in sites}
        for forward, call, cls in self.overriding_forwards():
            if id(forward) not in forwards:
                site = self._site(forward, call, cls, forward.name.value, set())
                if site.grad_fns:  # shaped as TensorFlow requires: `return y, grad_fn`
                    sites.append(site)
        return sites

    def _passed_through(self, fn: cst.Lambda) -> cst.FunctionDef | None:
        """The def of this module a lambda hands its parameters to unchanged, in order
        (`lambda t: self._clip(t)`, `lambda *a: op(*a)`): TensorFlow's inputs and the `(y, grad)`
        it returns are that def's. None for anything else (an extra or reordered argument)."""
        body, params = fn.body, fn.params
        if not isinstance(body, cst.Call) or params.kwonly_params or params.star_kwarg not in (None, cst.MaybeSentinel.DEFAULT):
            return None
        names = [p.name.value for p in params.params]
        star = params.star_arg.name.value if isinstance(params.star_arg, cst.Param) else None
        expected = [(n, "") for n in names] + ([(star, "*")] if star else [])
        got = [(a.value.value, a.star) if isinstance(a.value, cst.Name) and a.keyword is None else None
               for a in body.args]
        if got != expected or fn not in self.scope_of:
            return None
        found = [c.node for c in self.callables(body.func, self.scope_of[fn]) if c.model is self]
        return found[0] if len(found) == 1 and isinstance(found[0], cst.FunctionDef) else None

    def _site(
        self, forward: FunctionNode, wrapper: cst.CSTNode, outer: Scope, name: str, call_names: set[str]
    ) -> GradientSite:
        scope = self.scope_of[forward]
        is_method = isinstance(outer.node, cst.ClassDef) and not is_staticmethod(forward)
        positional = positional_params(forward.params)
        if is_method and positional:
            positional = positional[1:]
        if isinstance(outer.node, cst.ClassDef):
            name = f"{outer.node.name.value}.{name}"
        outputs: list[cst.BaseExpression] = []
        grad_fns: list[GradFn] = []
        seen: set[int] = set()
        for value in return_values(forward, scope):
            if not isinstance(value, cst.Tuple) or len(value.elements) != 2 or has_star(value):
                continue
            outputs.append(value.elements[0].value)
            grad = self._grad_fn(value.elements[1].value, scope)
            if grad is not None and id(grad.node) not in seen:
                seen.add(id(grad.node))
                grad_fns.append(grad)
        site = GradientSite(
            model=self,
            name=name,
            forward=forward,
            scope=scope,
            wrapper=wrapper,
            is_method=is_method,
            inputs=[p.name.value for p in positional],
            has_varargs=isinstance(forward.params.star_arg, cst.Param),
            outputs=outputs,
            grad_fns=grad_fns,
            variables=[],
            call_names=call_names,
        )
        site.variables = self._variables_read(site)
        return site

    def _grad_fn(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> GradFn | None:
        # The function TensorFlow calls: a def or lambda here, or reached across a boundary
        # (`functools.partial(_grad, x=x)`, `self._grad` on a base class, `GRADS["gelu"]`,
        # `make_grad(x)`, `cfg.grad_fn`, in this module or another: `BoundaryQueries`).
        callees = self.callables(expr, scope)
        if not callees:
            return None
        callee = callees[-1]
        node, model = callee.node, callee.model
        bound_positional, bound_keywords = callee.bound, callee.keywords
        name = node.name.value if isinstance(node, cst.FunctionDef) else expr.value if isinstance(expr, cst.Name) \
            else "<lambda>"
        self.adopt(callee, expr)
        gscope = callee.scope
        params = node.params
        positional = positional_params(params)[bound_positional:]
        # TensorFlow passes `variables` by keyword, so it is never an upstream gradient.
        upstream = [p for p in positional if p.name.value != "variables" and p.name.value not in bound_keywords]
        named = {p.name.value for p in positional} | {p.name.value for p in params.kwonly_params}
        kwargs = params.star_kwarg.name.value if isinstance(params.star_kwarg, cst.Param) else None
        returns = []
        higher_order = isinstance(node, cst.FunctionDef) and any(self._is_custom_gradient(d.decorator) for d in node.decorators)
        for value, ret in return_values_with_nodes(node, gscope):
            if higher_order:
                # The grad fn is itself `@tf.custom_gradient`: it returns `(gradients, grad_of_grad)`
                # and its callers (TensorFlow) get the gradients alone.
                pair = self.literal_elements(value, gscope) if value is not None else None
                value = pair[0] if pair is not None and len(pair) == 2 else None
            returns.append(GradReturn(ret, value, self.literal_elements(value, gscope) if value is not None else None))
        return GradFn(
            node=node,
            name=name,
            scope=gscope,
            upstream_params=[p.name.value for p in upstream],
            has_varargs=isinstance(params.star_arg, cst.Param),
            accepts_variables="variables" in named or params.star_kwarg is not None,
            returns=returns,
            required_upstream=sum(1 for p in upstream if p.default is None),
            variables_param="variables" if "variables" in named else kwargs,
            at=expr if model is not self else None,
        )

    def site_for_function(self, node: cst.CSTNode) -> GradientSite | None:
        return self._site_by_forward.get(id(node))

    def discarded_grad_fns(self) -> Iterator[tuple[cst.Call, Scope, cst.FunctionDef]]:
        """Calls of a plain function shaped like a custom-gradient forward (returning `(y,
        grad_fn)`: undecorated here or in another project module, or the raw forward `fwd` of a
        `tf.custom_gradient(fwd)`) whose grad fn the caller drops (`y, _ = fwd(x)`, the second
        name never read): the custom gradient is never applied. Calls inside a custom-gradient
        forward are left alone (a helper's grad fn may be unused there on purpose)."""
        for call, target, scope in self.unpacked_calls:
            second = target.elements[1].value if len(target.elements) == 2 else None
            if not isinstance(second, cst.Name) or any(
                    n.value == second.value for s in scope.walk() for n in s.reads):
                continue
            if any(scope.within(site.scope) for site in self.sites):
                continue
            callees = self.callables(call.func, scope)
            if len(callees) != 1 or not isinstance(callees[0].node, cst.FunctionDef) or callees[0].node.decorators:
                continue
            fn, model = callees[0].node, callees[0].model
            site = model.site_for_function(fn)
            if (site is not None and not isinstance(site.wrapper, cst.Decorator)) or any(
                    c.node is fn for c in model.unwrapped_candidates()):
                yield call, scope, fn

    def unwrapped_candidates(self) -> Iterator[UnwrappedCandidate]:
        """Functions returning `(y, g)` where `g` is a def nested in them, not wrapped as a site."""
        wrapped = {id(s.forward) for s in self.sites}
        for scope in self.root.walk():
            node = scope.node
            if not isinstance(node, cst.FunctionDef) or id(node) in wrapped:
                continue
            for value in return_values(node, scope):
                if isinstance(value, cst.Tuple) and len(value.elements) == 2 and not has_star(value):
                    second = value.elements[1].value
                    if isinstance(second, cst.Name):
                        defs = [v for v in scope.bindings.get(second.value, []) if isinstance(v, cst.FunctionDef)]
                        if defs:
                            yield UnwrappedCandidate(node, scope, defs[0])
                            break
