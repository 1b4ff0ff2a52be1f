"""Flow, summaries and evaluation: what an expression flattens to, how many tensors a call passes,
whether a value is a plain Python value, a list, a callable or "no gradient"."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from cglint import cstwalk
from cglint.cstwalk import Walker
from cglint.model.ops import MULTI_OUTPUT_OPS, is_function_name, tf_op_name
from cglint.model.scopes import Binding, Param, Scope, has_star, is_self, positional_arguments

if TYPE_CHECKING:
    from cglint.model.module import ModuleModel
    from cglint.model.sites import GradientSite


# ---- expression kinds ----------------------------------------------------------------------

# What a returned expression is, as far as the source says: rules compare these.
LIST, TUPLE, CALLABLE, NONE, TENSOR, UNKNOWN = "list", "tuple", "callable", "none", "tensor", "unknown"


class FlowQueries:
    """Structures, counts and plain Python values, followed through the module's data flow."""

    def literal_elements(self, expr: cst.BaseExpression | None, scope: Scope,
                         depth: int = 0) -> list[cst.BaseExpression] | None:
        """Elements of a literal tuple/list, following a name bound once to one, and through
        `tuple(...)`/`list(...)` and a comprehension that yields the entries unchanged."""
        values = self.resolve(expr, scope)
        if len(values) != 1:
            return None
        value = values[0]
        if isinstance(value, (cst.Tuple, cst.List)):
            return [el.value for el in value.elements] if not has_star(value) else None
        if (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in ("tuple", "list")
                and scope.lookup(value.func.value) is None):
            # `tuple([dx, dw])`, `list((dw, db))`: the literal inside.
            inner = positional_arguments(value)
            if inner is not None and len(inner) == 1 and len(value.args) == 1:
                return self.literal_elements(inner[0], scope) if depth < 4 else None
        if isinstance(value, (cst.ListComp, cst.GeneratorExp)) and depth < 4:
            # `[g for g in (dw, db)]`: the iterable's entries, when the comprehension yields each as is.
            loop = value.for_in
            if (isinstance(value.elt, cst.Name) and isinstance(loop.target, cst.Name) and value.elt.value == loop.target.value
                    and not loop.ifs and loop.inner_for_in is None):
                return self.literal_elements(loop.iter, scope, depth + 1)
        return None

    def zipped_entries(self, expr: cst.BaseExpression | None, scope: Scope,
                       name: str) -> list[cst.BaseExpression] | None:
        """The literal entries a comprehension pairs with `name` position by position and yields
        as they come: `[g for _, g in zip(variables, grads)]` keeps `grads`' own order, whatever
        order `variables` has (`zip` reads no identity). None for anything else."""
        values = self.resolve(expr, scope) if expr is not None else []
        value = values[0] if len(values) == 1 else None
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in ("tuple", "list") \
                and len(value.args) == 1 and scope.lookup(value.func.value) is None:
            value = value.args[0].value
        if not isinstance(value, (cst.ListComp, cst.GeneratorExp)):
            return None
        loop, it = value.for_in, value.for_in.iter
        if loop.ifs or loop.inner_for_in is not None or not isinstance(it, cst.Call) or not (
                isinstance(it.func, cst.Name) and it.func.value == "zip" and scope.lookup("zip") is None):
            return None
        args = positional_arguments(it)
        target = loop.target
        if args is None or len(args) != 2 or not isinstance(target, cst.Tuple) or len(target.elements) != 2:
            return None
        names = [el.value.value if isinstance(el.value, cst.Name) else None for el in target.elements]
        side = [isinstance(a, cst.Name) and a.value == name for a in args]
        if side.count(True) != 1 or None in names or not isinstance(value.elt, cst.Name):
            return None
        mine, other = side.index(True), side.index(False)
        if value.elt.value != names[other] or names[mine] == names[other]:
            return None
        return self.literal_elements(args[other], scope)

    def flat_count(self, expr: cst.BaseExpression | None, scope: Scope, depth: int = 0,
                   params: dict[int, int | None] | None = None) -> int | None:
        """How many tensors `expr` flattens to, when that is literal in the source; else None.

        Literal tuples/lists/dicts are counted element by element; a tensor op, arithmetic, a
        number literal (TensorFlow counts a returned `0` as one gradient) or a parameter counts
        one; a call to anything unknown might return a structure: unknown. `params` maps a
        site's parameters (by `id` of their binding) to what they flatten to (`input_counts`)."""
        if expr is None or depth > 8:
            return None
        values = self.resolve(expr, scope)
        counts = set()
        for value in values:
            if isinstance(value, (cst.Tuple, cst.List)):
                if has_star(value):
                    return None
                parts = [self.flat_count(el.value, scope, depth + 1, params) for el in value.elements]
                if None in parts:
                    return None
                counts.add(sum(parts))  # type: ignore[arg-type]
            elif isinstance(value, cst.Dict):
                parts = [
                    self.flat_count(el.value, scope, depth + 1, params) if isinstance(el, cst.DictElement) else None
                    for el in value.elements
                ]
                if None in parts:
                    return None
                counts.add(sum(parts))  # type: ignore[arg-type]
            elif isinstance(value, Param) and value.node.star in ("*", "**"):
                return None  # `*args` / `**kwargs` hold any number of tensors
            elif isinstance(value, Param) and params is not None and id(value) in params:
                if params[id(value)] is None:
                    return None
                counts.add(params[id(value)])  # type: ignore[arg-type]
            elif isinstance(value, (Param, cst.BinaryOperation, cst.UnaryOperation, cst.Subscript,
                                    cst.Integer, cst.Float, cst.Imaginary)):
                counts.add(1)
            elif isinstance(value, cst.Name) and value.value == "None":
                counts.add(1)  # nest.flatten(None) is [None]: one (absent) gradient
            elif isinstance(value, cst.Call) and tf_op_name(self.qualname(value.func)) is not None:
                # Most ops return one tensor; the few that return lists are listed here.
                if tf_op_name(self.qualname(value.func)) in MULTI_OUTPUT_OPS:
                    return None
                counts.add(1)
            elif isinstance(value, cst.Call) and (fields := self._namedtuple_fields(value.func, scope)) is not None:
                # `RouterOutput(weights, aux_loss)`: TensorFlow's nest flattens a namedtuple field
                # by field (a dataclass it does not); every field must be given
                if any(a.star for a in value.args) or len(value.args) != len(fields):
                    return None
                parts = [self.flat_count(a.value, scope, depth + 1, params) for a in value.args]
                if None in parts:
                    return None
                counts.add(sum(parts))  # type: ignore[arg-type]
            else:
                return None
        return counts.pop() if len(counts) == 1 else None

    def _namedtuple_fields(self, func: cst.BaseExpression, scope: Scope) -> list[str] | None:
        """The fields of the namedtuple class `func` denotes (`collections.namedtuple("P", [...])`
        or a `typing.NamedTuple` subclass, in the project), else None."""
        for model, value, where in self.values(func, scope):
            if isinstance(value, cst.ClassDef):
                if not any((model.qualname(b.value) or "").endswith("NamedTuple") for b in value.bases):
                    return None
            elif not (isinstance(value, cst.Call) and (model.qualname(value.func) or "").endswith("namedtuple")):
                return None
            return model._fields(func if model is self else value, where, 0) if model is self else None
        return None

    # ---- counting as TensorFlow counts -----------------------------------------------------
    # TensorFlow flattens the positional arguments of each call (`nest.flatten(args)`): a list
    # argument holds several inputs, and the grad fn returns one gradient per flattened entry.

    def input_counts(self, site: GradientSite) -> list[int | None]:
        """Per positional input of `site`, how many tensors TensorFlow flattens it to: what the
        module's calls pass there when that is a literal structure (`f([a, b], c)`: 2 and 1),
        None when calls disagree or pass `*args` there; 1 where no call says (a guess: see
        `inputs_taken_apart`)."""
        cache = self.__dict__.setdefault("_input_counts", {})
        if id(site) not in cache:
            counts: list[int | None] = []
            guessed: set[str] = set()
            calls = self.calls_reaching(site)
            for i, param in enumerate(site.input_params):
                known: set[int | None] = set()
                for call, scope in calls:
                    positional = [a for a in call.args if a.keyword is None]
                    if any(a.star for a in positional[: i + 1]):
                        known.add(None)
                    elif i < len(positional):
                        count = self._structure_count(positional[i].value, scope)
                        if count is not None:
                            known.add(count)
                if len(known) > 1 or None in known:
                    counts.append(None)
                elif known:
                    counts.append(known.pop())
                else:
                    counts.append(1)
                    guessed.add(param.name.value)
            cache[id(site)] = (counts, guessed)
        return cache[id(site)][0]

    def inputs_taken_apart(self, site: GradientSite) -> set[str]:
        """Inputs whose count `input_counts` guessed (no call says) although the forward or a
        grad fn takes them apart as a structure (`a, b = pair`, `xs[0]`, `d["key"]`, `for x in xs`,
        `len(xs)`, `tf.add_n(xs)`, `*xs`): their real count is unknown. A walk of the site's
        body, so rules ask only when a count disagrees."""
        self.input_counts(site)
        guessed = self.__dict__["_input_counts"][id(site)][1]
        return _StructureUse.of(self, site) & guessed if guessed else set()

    def structure_count(self, arg: cst.BaseExpression, scope: Scope) -> int | None:
        """How many tensors a call argument that is a literal structure flattens to (None for
        anything else): what `input_counts` reads at each call."""
        return self._structure_count(arg, scope)

    def inputs_used_as_structures(self, site: GradientSite) -> set[str]:
        """The inputs the forward or a grad fn takes apart as a structure (`a, b = pair`)."""
        return _StructureUse.of(self, site)

    def passed_at_least(self, call: cst.Call, scope: Scope) -> int | None:
        """How many tensors a call passes positionally, at least: a literal structure counts
        flattened, anything else as one; None for `f(*xs)` (any number)."""
        positional = [a for a in call.args if a.keyword is None]
        if any(a.star for a in positional):
            return None
        return sum(self._structure_count(a.value, scope) or 1 for a in positional)

    def _structure_count(self, arg: cst.BaseExpression, scope: Scope, depth: int = 0) -> int | None:
        """What a call argument that is a literal structure (`[left, right]`, or a name bound
        only to one) flattens to, counting each entry that is not itself a literal structure as
        one tensor; None for anything else (a name, a call: that says nothing of structure)."""
        values = self.resolve(arg, scope)
        if depth > 8 or len(values) != 1 or not isinstance(values[0], (cst.Tuple, cst.List, cst.Dict)):
            return None
        value = values[0]
        if has_star(value):
            return None
        total = 0
        for el in value.elements:
            inner = el.value if isinstance(el, (cst.Element, cst.DictElement)) else None
            if inner is None:
                return None
            nested = self._structure_count(inner, scope, depth + 1)
            total += nested if nested is not None else 1
        return total

    def param_counts(self, site: GradientSite, guessed: bool = True) -> dict[int, int | None]:
        """`input_counts` keyed by `id` of each input's binding in the forward's scope, as
        `flat_count(params=...)` takes it. Without `guessed`, an input no call describes counts
        as unknown (None) rather than one tensor: an output that is that input has no known count."""
        out: dict[int, int | None] = {}
        counts = self.input_counts(site)
        unknown = set() if guessed else {n for n in self.__dict__["_input_counts"][id(site)][1]
                                         if not _used_as_tensor(self, site, n)}
        for param, count in zip(site.input_params, counts):
            if param.name.value in unknown:
                count = None
            for value in site.scope.bindings.get(param.name.value, []):
                if isinstance(value, Param) and value.node is param:
                    out[id(value)] = count
        return out

    # ---- plain Python values -------------------------------------------------------------
    # TensorFlow converts every positional argument of a custom-gradient call to a tensor
    # (eagerly to record the op, under tf.function before calling the forward): what an
    # argument holds when the source says it is a plain Python value.

    def python_value(self, expr: cst.BaseExpression | None, scope: Scope, depth: int = 0) -> str | None:
        """`"number"` (an int, or a number that may be one), `"float"` (a Python float on every
        path), `"bool"`, `"string"`, `"None"` or `"callable"` when every value `expr`
        may hold is that Python value: a literal (`16`, `-0.5`, `"same"`, `None`), a lambda, def
        or class, a TensorFlow / Keras function (`tf.nn.relu`, `keras.activations.gelu`),
        `int(...)`/`len(...)`-style builtins, a name bound only to those, a parameter annotated
        with a Python type or an `__init__` parameter defaulting to one (a layer's config, as
        `self.bits = bits`), and `self.x` bound only to those. None when it may be a tensor."""
        if expr is None or depth > 6:
            return None
        kinds = set()
        for value in self.resolve(expr, scope):
            kind = self._python_kind(value, scope, depth)
            if kind is None:
                return None
            kinds.add(kind)
        if not kinds:
            return None
        return _one_kind(kinds)

    def _python_kind(self, value: Binding, scope: Scope, depth: int) -> str | None:
        if isinstance(value, cst.Float):
            return "float"
        if isinstance(value, (cst.Integer, cst.Imaginary)):
            return "number"
        if isinstance(value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return "string"
        if isinstance(value, cst.Name):
            return {"None": "None", "True": "bool", "False": "bool"}.get(value.value)
        if isinstance(value, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
            return "callable"
        if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, (cst.Minus, cst.Plus)):
            kind = self._python_kind(value.expression, scope, depth + 1)
            return kind if kind in _NUMBERS else None
        if isinstance(value, cst.BinaryOperation):
            left = self.python_value(value.left, scope, depth + 1)
            right = self.python_value(value.right, scope, depth + 1)
            if left not in _NUMBERS or right not in _NUMBERS:
                return None
            # int op int stays an int except true division; anything with a float is a float
            return "float" if "float" in (left, right) or isinstance(value.operator, cst.Divide) else "number"
        if isinstance(value, Param):
            return self._python_param(value)
        if isinstance(value, cst.Call):
            func = value.func
            if isinstance(func, cst.Name) and func.value in _PYTHON_BUILTINS and scope.lookup(func.value) is None \
                    and func.value not in self.imports:
                if func.value == "round" and len(value.args) > 1:
                    return "float"  # round(x, n) keeps a float
                return _PYTHON_BUILTINS[func.value]
            return None
        if isinstance(value, cst.Attribute):
            if is_self(value.value):
                return self._python_attribute(value, scope, depth)
            field = self._record_field_kind(value, scope, depth)
            if field is not None:
                return field
            qualname = self.qualname(value)
            if qualname is not None and is_function_name(qualname):
                return "callable"
        return None

    def _python_param(self, param: Param) -> str | None:
        annotation = param.node.annotation
        if annotation is not None:
            names = self.reads_in(annotation.annotation)
            kinds = {_ANNOTATION_KINDS.get(n.value) for n in names}
            if names and None not in kinds:
                return _one_kind(kinds)
            return None
        # A layer's configuration: `def __init__(self, bits=8)`, stored as `self.bits = bits`.
        owners = self._bound_names.get(id(param), [])
        fn = owners[0][0].node if owners else None
        if isinstance(fn, cst.FunctionDef) and fn.name.value == "__init__" and param.node.default is not None:
            kind = self._python_kind(param.node.default, owners[0][0], 6)
            return kind if kind in ("number", "float", "string", "bool") else None
        return None

    def _python_attribute(self, attr: cst.Attribute, scope: Scope, depth: int) -> str | None:
        """`self.x` where every `self.x = value` of the class binds a plain Python value."""
        cls = scope.enclosing_class()
        values = cls.attributes.get(attr.attr.value, []) if cls is not None else []
        if cls is None or not values:
            return None
        kinds = set()
        for value in values:
            where = self._scope_reading(value, cls) if isinstance(value, cst.Name) else cls
            kind = self.python_value(value, where, depth + 1) if where is not None else None
            if kind is None:
                return None
            kinds.add(kind)
        return _one_kind(kinds)

    def _record_field_kind(self, attr: cst.Attribute, scope: Scope, depth: int) -> str | None:
        """`cfg.bits` / `self.config.bits` where every value `cfg` may hold is an instance of a
        record class of the project (a dataclass, a `NamedTuple`) whose field `bits` is annotated
        with a Python type (`bits: int = 4`): the field's kind."""
        if depth > 4:
            return None
        classes = self._instance_classes(attr.value, scope, depth)
        kinds = set()
        for model, cls in classes or []:
            kind = model._field_annotation_kind(cls, attr.attr.value)
            if kind is None:
                return None
            kinds.add(kind)
        return _one_kind(kinds) if kinds else None

    def _instance_classes(self, expr: cst.BaseExpression, scope: Scope, depth: int):
        """The project classes of which `expr` holds an instance, when every value says so
        (a constructor call, a parameter defaulting to one, `self.x` set only from those)."""
        if is_self_attr(expr):
            cls = scope.enclosing_class()
            values = cls.attributes.get(expr.attr.value, []) if cls is not None else []
            if not values:
                return None
            out = []
            for value in values:
                where = self._scope_reading(value, cls) if isinstance(value, cst.Name) else cls
                found = self._instance_classes(value, where, depth + 1) if where is not None else None
                if not found:
                    return None
                out += found
            return out
        out = []
        for value in self.resolve(expr, scope):
            if isinstance(value, Param):
                default = value.node.default
                if default is None:
                    return None
                value = default
            if not isinstance(value, cst.Call):
                return None
            classes = [(m, v) for m, v, _ in self.values(value.func, scope) if isinstance(v, cst.ClassDef)]
            if len(classes) != 1:
                return None
            out += classes
        return out or None

    @staticmethod
    def _field_annotation_kind(cls: cst.ClassDef, name: str) -> str | None:
        for stmt in cls.body.body:
            if isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.AnnAssign):
                ann = stmt.body[0]
                if isinstance(ann.target, cst.Name) and ann.target.value == name:
                    a = ann.annotation.annotation
                    return _ANNOTATION_KINDS.get(a.value) if isinstance(a, cst.Name) else None
        return None

    @staticmethod
    def _scope_reading(name: cst.Name, cls: Scope) -> Scope | None:
        """The method scope of `cls` in which `name` (a node) is read."""
        for scope in cls.walk():
            if any(n is name for n in scope.reads):
                return scope
        return None
# Functions that take a list of tensors: a parameter handed to one is a structure.
_LIST_TAKERS = frozenset({"len", "zip", "enumerate", "list", "tuple", "sum", "map", "sorted", "reversed",
                          "add_n", "stack", "concat", "meshgrid", "dynamic_stitch", "accumulate_n", "parallel_stack",
                          "flatten", "map_structure", "pack_sequence_as", "unstack_sequence"})


class _StructureUse(Walker):
    """Names (of a site's inputs) that its forward or grad fns take apart as a structure."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.found: set[str] = set()

    @classmethod
    def of(cls, model: ModuleModel, site: GradientSite) -> set[str]:
        cache = model.__dict__.setdefault("_structure_use", {})
        if id(site) not in cache:
            visitor = cls(set(site.inputs))
            visitor.walk(site.forward.body)
            cache[id(site)] = visitor.found
        return cache[id(site)]

    def _mark(self, expr: cst.CSTNode | None) -> None:
        if isinstance(expr, cst.Name) and expr.value in self.names:
            self.found.add(expr.value)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        # `xs[0]` picks an entry, `features["a"]` a dict's; `x[:, 0]` or `x[..., 1]` slices a tensor.
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            index = node.slice[0].slice.value
            if isinstance(index, cst.UnaryOperation):
                index = index.expression
            if isinstance(index, (cst.Integer, cst.SimpleString, cst.ConcatenatedString)):
                self._mark(node.value)

    def visit_For(self, node: cst.For) -> None:
        self._mark(node.iter)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._mark(node.iter)

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(isinstance(t.target, (cst.Tuple, cst.List)) for t in node.targets):
            self._mark(node.value)

    def visit_StarredElement(self, node: cst.StarredElement) -> None:
        self._mark(node.value)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.star:
            self._mark(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        last = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
        if last in _LIST_TAKERS:
            for arg in node.args:
                self._mark(arg.value)


# Builtins whose result is a plain Python value, for `python_value`.
_NUMBERS = ("number", "float")


def is_self_attr(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self"


def _used_as_tensor(model: ModuleModel, site: GradientSite, name: str) -> bool:
    """The forward or a grad fn uses input `name` as one tensor (`2 * x`, `tf.tan(x)`): an operand
    of arithmetic or an argument of a TensorFlow / Keras op. The count of one that no call states
    is then a fair reading of the code, not a guess about a structure."""

    def named(expr: cst.BaseExpression) -> bool:
        return isinstance(expr, cst.Name) and expr.value == name

    for node in cstwalk.nodes(site.forward):
        if isinstance(node, cst.BinaryOperation) and (named(node.left) or named(node.right)):
            return True
        if isinstance(node, cst.Call) and any(named(a.value) for a in node.args):
            qualname = model.qualname(node.func) or ""
            if qualname.startswith(("tensorflow.", "keras.")):
                return True
    return False


def _one_kind(kinds: set) -> str:
    """The kind of a value that may be any of `kinds`: an int-or-float is a number (an int on
    some path); any other mix is just a Python value."""
    if kinds <= {"number", "float"} and len(kinds) == 2:
        return "number"
    return next(iter(kinds)) if len(kinds) == 1 else "Python value"

_PYTHON_BUILTINS = {"int": "number", "float": "float", "round": "number", "len": "number", "abs": None,
                    "str": "string", "bool": "bool", "repr": "string"}
_PYTHON_BUILTINS = {k: v for k, v in _PYTHON_BUILTINS.items() if v is not None}
# Annotations naming a plain Python type (`bits: int`, `activation: Callable`).
_ANNOTATION_KINDS = {"int": "number", "float": "float", "complex": "number", "bool": "bool", "str": "string",
                     "Callable": "callable", "typing": "Python value", "collections": "Python value",
                     "abc": "Python value"}


def kind_of(model: ModuleModel, expr: cst.BaseExpression | None, scope: Scope) -> str:
    """Classify a value by its source: a list (literal, comprehension, `list(...)`, concatenation
    of lists), a tuple literal, a callable (lambda or def), `None`, a tensor (a TensorFlow op,
    arithmetic, a parameter), or unknown. A name bound to several kinds is unknown."""
    return _kind_of(model, expr, scope, 0)


def _kind_of(model: ModuleModel, expr: cst.BaseExpression | None, scope: Scope, depth: int) -> str:
    kinds = set()
    for v in model.resolve(expr, scope):
        kind = _kind(model, v)
        if kind == UNKNOWN and isinstance(v, cst.Call) and depth < 3:
            kind = _returned_kind(model, v, scope, depth)
        kinds.add(kind)
    return kinds.pop() if len(kinds) == 1 else UNKNOWN


def _returned_kind(model: ModuleModel, call: cst.Call, scope: Scope, depth: int) -> str:
    """What a call of a project function gives, when every function the callee may be returns
    the same kind (`_weight_grads(x, g)` whose body returns a lambda: a callable)."""
    kinds = set()
    for callee in model.callables(call.func, scope):
        node = callee.node
        if isinstance(node, cst.Lambda):
            kinds.add(_kind_of(callee.model, node.body, callee.scope, depth + 1))
            continue
        returns = [r.value for r in callee.scope.returns if r.value is not None]
        if not returns:
            return UNKNOWN
        kinds.update(_kind_of(callee.model, r, callee.scope, depth + 1) for r in returns)
    return kinds.pop() if len(kinds) == 1 else UNKNOWN


def _kind(model: ModuleModel, value: Binding) -> str:
    if isinstance(value, (cst.List, cst.ListComp)):
        return LIST
    if isinstance(value, cst.Tuple):
        return TUPLE
    if isinstance(value, (cst.Lambda, cst.FunctionDef)):
        return CALLABLE
    if isinstance(value, cst.Name) and value.value == "None":
        return NONE
    if isinstance(value, Param):
        return TENSOR if value.node.star not in ("*", "**") else UNKNOWN
    if isinstance(value, cst.Call):
        if isinstance(value.func, cst.Name) and value.func.value == "list":
            return LIST
        if isinstance(value.func, cst.Name) and value.func.value == "tuple":
            return TUPLE
        return TENSOR if tf_op_name(model.qualname(value.func)) is not None else UNKNOWN
    if isinstance(value, cst.BinaryOperation):
        if isinstance(value.operator, cst.Add) and isinstance(value.left, (cst.List, cst.ListComp)):
            return LIST
        return TENSOR if not isinstance(value.left, (cst.List, cst.ListComp, cst.Tuple)) else UNKNOWN
    if isinstance(value, cst.UnaryOperation):
        return TENSOR
    return UNKNOWN


# Calls that build an all-zero gradient, by their last name: `tf.zeros_like`, `np.zeros`, ...
_ZERO_BUILDERS = frozenset({"zeros", "zeros_like"})


def is_no_gradient(model: ModuleModel, expr: cst.BaseExpression | None, scope: Scope, depth: int = 0) -> bool:
    """Whether a gradient value is "nothing flows back": `None`, a literal zero, `tf.zeros(...)`
    / `zeros_like(...)`, or a tuple, list, comprehension or `[None] * n` made only of those."""
    if expr is None or depth > 8:
        return False
    values = model.resolve(expr, scope)
    return bool(values) and all(_no_gradient(model, v, scope, depth) for v in values)


def _no_gradient(model: ModuleModel, value: Binding, scope: Scope, depth: int) -> bool:
    if isinstance(value, cst.Name):
        return value.value == "None"
    if isinstance(value, (cst.Integer, cst.Float)):
        return float(value.evaluated_value) == 0.0
    if isinstance(value, (cst.Tuple, cst.List)):
        return all(
            not isinstance(el, cst.StarredElement) and is_no_gradient(model, el.value, scope, depth + 1)
            for el in value.elements
        )
    if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        return is_no_gradient(model, value.elt, model.scope_of.get(value, scope), depth + 1)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
        return is_no_gradient(model, value.left, scope, depth + 1) and isinstance(value.left, (cst.List, cst.Tuple))
    if isinstance(value, cst.Call):
        func = value.func
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        return last in _ZERO_BUILDERS
    return False
