"""Decorators and what they do to a function: whether a user decorator (or a decorator
factory's call) applies `tf.custom_gradient` or `tf.function`, whether it compiles the forward
under the custom gradient, and which parameters of a helper reach NumPy or `.numpy()` (eager
only). A mixin of `ModuleModel`, asked through `boundaries.BoundaryQueries`.
"""

from __future__ import annotations

import libcst as cst

from cglint.model.ops import TF_FUNCTION
from cglint.model.boundaries import STATIC_ATTRS, Callee, calls_in
from cglint.model.scopes import Scope, is_self


class DecoratorQueries:
    def applies_custom_gradient(self, decorator: cst.BaseExpression, scope: Scope) -> bool:
        """Whether a decorator that is not `tf.custom_gradient` itself applies it: a function
        (here or imported) returning `tf.custom_gradient(f)` (possibly under `tf.function(...)`)
        or a wrapper that does (`return tf.custom_gradient(f)(*args)`, a `@tf.custom_gradient`
        wrapper), or a decorator factory returning such a function."""
        return self._applies(decorator, scope, "custom_gradient")

    def applies_tf_function(self, decorator: cst.BaseExpression, scope: Scope) -> bool:
        """The same for `tf.function`: a user decorator (`def compiled(f): return
        tf.function(f, jit_compile=True)`, imported or not) that compiles what it decorates."""
        return self._applies(decorator, scope, "function")

    def _applies(self, decorator: cst.BaseExpression, scope: Scope, what: str) -> bool:
        if isinstance(decorator, cst.Name) and scope.lookup(decorator.value) is None \
                and self.import_spec(decorator.value) is None:
            return False  # a builtin, TensorFlow or an installed package: never project code
        if isinstance(decorator, cst.Attribute) and not is_self(decorator.value) \
                and self.qualname(decorator) is not None and self.module_of(decorator.value, scope) is None:
            return False  # `@tf.function`, `@functools.wraps(...)`: an import's own attribute
        return any(c.model._wraps(c, what, 0) for c in self.callables(decorator, scope))

    def applications_of(self, factory: cst.FunctionDef) -> list[str]:
        """Module-level functions decorated with `factory` or a call of it (`@straight_through(clip=1.0)
        def binarize(x)`), through any name bound to it: calling them reaches what the factory
        makes with the module's own arguments."""
        out = []
        for stmt in self.module.body:
            if isinstance(stmt, cst.FunctionDef) and any(
                    c.node is factory for d in stmt.decorators
                    for c in self.callables(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator,
                                            self.root)):
                out.append(stmt.name.value)
        return out

    def compiles_under_custom_gradient(self, decorator: cst.BaseExpression, scope: Scope) -> bool:
        """Whether a user decorator (or what a decorator factory's call returns, `@fused_op()`)
        applies `tf.custom_gradient` to `tf.function(...)` of what it decorates: the compiled
        forward must return tensors, not `(y, grad_fn)`."""
        if not self._may_be_project_decorator(decorator, scope):
            return False
        return any(isinstance(c.node, cst.FunctionDef) and c.model._custom_gradient_of_compiled(c)
                   for c in self.callables(decorator, scope))

    def _custom_gradient_of_compiled(self, fn: Callee) -> bool:
        for ret in fn.scope.returns:
            for call in calls_in(ret.value) if ret.value is not None else []:
                if self._is_custom_gradient(call.func) and call.args and any(
                        isinstance(v, cst.Call) and self.qualname(v.func) in TF_FUNCTION
                        for v in self.resolve(call.args[0].value, fn.scope)):
                    return True
        return False

    def eager_only_params(self, fn: Callee) -> dict[str, str]:
        """The parameters a project helper (here or in another module) turns into NumPy, which
        works on eager tensors only: `t.numpy()` or a `numpy` function reading `t` directly
        (not its static `.shape`/`.dtype`), each with the operation's name. A helper that
        checks `tf.executing_eagerly()` says nothing."""
        if not isinstance(fn.node, cst.FunctionDef):
            return {}
        model, params = fn.model, {p.name.value for p in [*fn.node.params.posonly_params, *fn.node.params.params]}
        out: dict[str, str] = {}
        for scope in fn.scope.walk():
            for call in scope.calls:
                func = call.func
                qualname = model.qualname(func) or ""
                if qualname.endswith("executing_eagerly"):
                    return {}
                if isinstance(func, cst.Attribute) and func.attr.value == "numpy" and not call.args:
                    read, what = [func.value] if isinstance(func.value, cst.Name) else [], "`.numpy()`"
                elif qualname.startswith("numpy."):
                    read = [n for a in call.args for n in model.reads_in(a.value, STATIC_ATTRS)]
                    what = f"`{qualname}`"
                else:
                    continue
                for name in read:
                    if name.value in params and scope.lookup(name.value) is not None \
                            and scope.lookup(name.value)[0] is fn.scope:  # type: ignore[index]
                        out.setdefault(name.value, what)
        return out

    def _is_wanted(self, func: cst.BaseExpression, what: str) -> bool:
        return self._is_custom_gradient(func) if what == "custom_gradient" else self.qualname(func) in TF_FUNCTION

    def _wraps(self, fn: Callee, what: str, depth: int) -> bool:
        if depth > 2 or not isinstance(fn.node, cst.FunctionDef):
            return False
        if any(self._is_wanted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator, what)
               for d in fn.node.decorators):
            return depth > 0  # a nested wrapper the decorator returns, decorated with it
        return any(self._makes(ret.value, fn.scope, what, depth) for ret in fn.scope.returns)

    def _makes(self, expr: cst.BaseExpression | None, scope: Scope, what: str, depth: int) -> bool:
        """Whether a returned value is `tf.custom_gradient(...)` (`what`), a call of or on one
        (`tf.function(op)`, `op(*args)` with `op = tf.custom_gradient(f)`), or a nested wrapper
        that returns one."""
        if expr is None or depth > 3:
            return False
        for value in self.resolve(expr, scope):
            if isinstance(value, cst.FunctionDef) and value in self.scope_of:
                if self._wraps(Callee(value, self), what, depth + 1):
                    return True
                continue
            for call in calls_in(value):
                if self._is_wanted(call.func, what):
                    return True
                if isinstance(call.func, cst.Name) and self._makes(call.func, scope, what, depth + 1):
                    return True
                if any(isinstance(a.value, cst.Name) and self._makes(a.value, scope, what, depth + 1)
                       for a in call.args if not a.keyword):
                    return True
        return False

