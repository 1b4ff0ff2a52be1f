"""The static half of the runtime mode: which functions of a linted file to check, and with what.

Works from the static pass's model alone (no TensorFlow here): for each custom-gradient site it
decides whether it is checked (flagged by a rule, or every site with `--runtime=all`), how a child
process can reach it by import, and where its inputs come from, in this order:

1. a `# cglint: example x=normal(2, 3)` comment on the function (see `cglint.runtime.spec`);
2. module-level values passed to it at a call site in the module: `custom_op(x)` -> `module:x`;
3. a search over small shapes built from the literal shapes of the module's variables/tensors.

A `# cglint: intentional` comment marks a deliberately different gradient.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from cglint import directives
from cglint.diagnostics import Diagnostic, FileResult
from cglint.model import GradientSite, ModuleModel

# A module that works with complex numbers: its custom gradients get complex probes too.
_COMPLEX = re.compile(r"\bcomplex(64|128)\b|tf\.complex\(|\bconj\(|\b\d+(\.\d*)?j\b")
# Mixed precision: the runtime also tries half-precision inputs (a grad fn that fixes float32).
_HALF = re.compile(r"\bmixed_b?float16\b|\bb?float16\b")
# Calls whose first argument is a shape or a literal value: their result's shape is known.
_SHAPED = {"tensorflow.zeros", "tensorflow.ones", "tensorflow.random.normal", "tensorflow.random.uniform",
           "tensorflow.fill", "tensorflow.random.truncated_normal", "tensorflow.random.stateless_normal",
           "tensorflow.random.stateless_uniform", "tensorflow.random.stateless_truncated_normal"}
_VALUED = {"tensorflow.Variable", "tensorflow.constant", "tensorflow.convert_to_tensor"}


@dataclass
class Planned:
    """One function to check: the dict the runner takes, plus what to attach results to."""

    site: GradientSite | None  # None for a `tf.RegisterGradient` function
    line: int
    request: dict  # for cglint.runtime.runner.run_module_checks
    diagnostics: list[Diagnostic] = field(default_factory=list)
    skip: str | None = None  # set when no child process could reach it
    end: int = 0  # the forward's last line (import-failure attribution spans [line, end])


def plan_file(result: FileResult, everything: bool = False) -> list[Planned]:
    model: ModuleModel | None = result.model
    if model is None:
        return []
    registered = _registered_gradients(model, result, everything)
    if not model.sites and not registered:
        return []
    lines = result.source.splitlines()
    shapes = _module_shapes(model)
    planned = registered
    for site in model.sites:
        start, end, def_line, wrapper_line = site.lines
        mine = [d for d in result.diagnostics
                if start <= _module_line(result, d) <= end or _module_line(result, d) == wrapper_line]
        if not mine and not everything:
            continue
        # The lines findings on the gradient point at (`# cglint: intentional` may end them).
        positions = model.positions
        flagged = [n for node in directives.flagged_nodes(site.forward, [g.node for g in site.grad_fns])
                   if node in positions
                   for n in ([positions[node.name].start.line] if isinstance(node, cst.FunctionDef) else
                             range(positions[node].start.line, positions[node].end.line + 1))]
        declared = directives.of_lines(lines, start, def_line, flagged)
        request: dict = {"function": "", "line": start, "shapes": shapes}
        example = declared.example
        if example:
            request["inputs"] = example
        else:
            known = _call_site_inputs(model, site)
            if known and len(known) == len(site.inputs) and not site.has_varargs:
                request["inputs"] = ", ".join(known[i] for i in range(len(known)))
            elif known:
                request["hints"] = known  # the rest is searched
            if ranks := _call_site_ranks(model, site, known):
                request["ranks"] = ranks  # the search keeps these inputs at their rank
            if (arity := _call_arity(model, site)) is not None:
                request["arity"] = arity  # parameters with defaults that callers pass are inputs
        if _uses_nested_custom_gradient(model, site):
            request["order"] = 2  # the documented higher-order pattern: check what it is for
        if _COMPLEX.search(result.source):
            request["complex"] = True
        if half := _HALF.search(result.source):
            request["half"] = "bfloat16" if "bfloat16" in half.group(0) else "float16"
        if declared.intentional:
            request["intentional"] = True
        name, skip = _import_name(model, site)
        request["function"] = name
        if skip is not None and (owner := _owning_method(model, site) or _owning_function(model, site)) is not None:
            request["reach"] = owner  # the child builds the class or calls the function that makes it
            # Named as the user calls it: the layer's method or the function that makes it, then
            # the inner op (`FusedBiasAct.call.<locals>.func`), as trace names it.
            request["called_as"] = owner["qualname"]
            skip = None
        elif skip is None and "inputs" not in request and (owner := _decorated_method(model, site)) is not None:
            request["reach"] = owner  # a method needs an instance: the child builds the class
        applied = (request.get("reach") or {}).get("applied")
        if applied and skip is None:
            # A decorator factory's product is called by the names it decorates
            # (`@straight_through(surrogate) def binarize(x)`): one verdict per application,
            # under that name, each reached through it with the module's own arguments.
            for name in applied:
                planned.append(Planned(site, start, {**request, "function": name, "called_as": name,
                                                     "reach": {**request["reach"], "applied": [name],
                                                               "only_applied": True}},
                                       mine, None, end))
            continue
        planned.append(Planned(site, start, request, mine, skip, end))
    return planned


def _registered_gradients(model: ModuleModel, result: FileResult, everything: bool) -> list[Planned]:
    """`@tf.RegisterGradient("Name")` functions defined at module level, with the op types the
    module's `gradient_override_map({"Relu": "Name"})` calls send to them (string literals), and
    `@function.Defun(..., python_grad_func=g)` functions: the child differentiates each op in a
    graph, where TensorFlow uses that gradient, and checks it (`registered.py`)."""
    overrides: dict[str, list[str]] = {}
    for call, _ in model.all_calls:
        if (isinstance(call.func, cst.Attribute) and call.func.attr.value == "gradient_override_map"
                and call.args and isinstance(call.args[0].value, cst.Dict)):
            for el in call.args[0].value.elements:
                if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString) \
                        and isinstance(el.value, cst.SimpleString):
                    ops = overrides.setdefault(el.value.evaluated_value, [])
                    if el.key.evaluated_value not in ops:
                        ops.append(el.key.evaluated_value)
    lines = result.source.splitlines()
    planned = []
    for fn, scope in model.decorated:
        for dec in fn.decorators:
            call = dec.decorator
            qual = model.qualname(call.func) if isinstance(call, cst.Call) else None
            if not (qual or "").startswith("tensorflow."):
                continue
            if qual.endswith(".Defun") and any(a.keyword and a.keyword.value in ("python_grad_func", "grad_func")
                                               for a in call.args):
                # `function.Defun(tf.float32, python_grad_func=g)`: the Defun's own gradient
                name, how = fn.name.value, {"defun": True}
            elif qual.endswith(".RegisterGradient") and call.args and isinstance(call.args[0].value, cst.SimpleString):
                name = call.args[0].value.evaluated_value
                how = {"registered": {"name": name, "ops": overrides.get(name, [])}}
            else:
                continue
            span = model.positions[fn]
            start, end = model.positions[fn.decorators[0]].start.line, span.end.line
            mine = [d for d in result.diagnostics if start <= _module_line(result, d) <= end]
            if not mine and not everything:
                continue
            request: dict = {"function": fn.name.value, "line": start, "shapes": _module_shapes(model), **how}
            declared = directives.of_lines(lines, start, model.positions[fn.name].start.line)
            if declared.example:
                request["inputs"] = declared.example
            if declared.intentional:
                request["intentional"] = True
            skip = None if scope is model.root else \
                "defined inside a function: not reachable by import"
            planned.append(Planned(None, start, request, mine, skip, end))
    return planned


def _module_line(result: FileResult, d: Diagnostic) -> int:
    """The diagnostic's line in the linted module (a notebook's diagnostics count lines in cells)."""
    return result.notebook.module_line(d) if result.notebook is not None else d.line


def _import_name(model: ModuleModel, site: GradientSite) -> tuple[str, str | None]:
    """How the child reaches the function by import: `op`, `Class.method`, or the name a call
    form is assigned to at module level. Functions nested in other functions are not importable
    (`_owning_method` / `_owning_function` reach them by calling what makes them)."""
    outer = model.scope_of[site.forward].parent
    if outer is model.root:
        if isinstance(site.forward, cst.FunctionDef):
            return site.forward.name.value, None
        named = sorted(n for n in site.call_names if n in model.root.bindings) or _wrapped_name(model, site)
        return (named[0], None) if named else (site.name, "a lambda with no module-level name")
    if outer is not None and isinstance(outer.node, cst.ClassDef) and outer.parent is model.root:
        return site.name, None
    if site.call_names and site.call_names & set(model.root.bindings) and not isinstance(site.forward, cst.Lambda):
        return sorted(site.call_names & set(model.root.bindings))[0], None
    return site.name, "nested inside another function: not reachable by import"


def _wrapped_name(model: ModuleModel, site: GradientSite) -> list[str]:
    """`double = logged(tf.custom_gradient(lambda x: ...))`: the module-level name the user's
    wrappers around the call form are assigned to (the child unwraps them, `check.resolve`)."""
    node = model.parent(site.wrapper)
    for _ in range(8):
        if isinstance(node, (cst.Arg, cst.Call)):
            node = model.parent(node)
            continue
        if (isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
                and model.scope_of.get(site.forward, model.root).parent is model.root):
            return [node.targets[0].target.value]
        break
    return []


def _owning_method(model: ModuleModel, site: GradientSite) -> dict | None:
    """A custom gradient made inside a method of a module-level class (a Keras layer's `call`, a
    `tf.Module`'s `__call__`): the class and method that make it, and the site's qualified name
    as Python gives it (`Layer.call.<locals>.op`), for the child to reach by building the class."""
    scope = model.scope_of[site.forward].parent
    names = [_code_name(site)]
    while scope is not None and isinstance(scope.node, cst.FunctionDef):
        owner = scope.parent
        if owner is not None and isinstance(owner.node, cst.ClassDef) and owner.parent is model.root:
            qualname = ".".join([owner.node.name.value, scope.node.name.value, "<locals>"] + names)
            return {"class": owner.node.name.value, "method": scope.node.name.value, "qualname": qualname,
                    **_lambda_line(model, site)}
        names = [scope.node.name.value, "<locals>"] + names
        scope = owner
    return None


def _code_name(site: GradientSite) -> str:
    """The name Python gives the forward's code: its def's, or `<lambda>`."""
    return site.forward.name.value if isinstance(site.forward, cst.FunctionDef) else "<lambda>"


def _lambda_line(model: ModuleModel, site: GradientSite) -> dict:
    """Python names every lambda `<lambda>`: its line tells the custom-gradient one apart."""
    if not isinstance(site.forward, cst.Lambda):
        return {}
    return {"line": model.positions[site.forward].start.line}


def _decorated_method(model: ModuleModel, site: GradientSite) -> dict | None:
    """A method of a module-level class that is itself the custom gradient (`@tf.custom_gradient
    def _affine(self, x)`): it needs an instance, so the child builds the class, calls the
    instance (a Keras layer builds its weights on its first call, and its `call` may reach the
    method) and then the method, as `_owning_method`'s sites are reached."""
    if not isinstance(site.forward, cst.FunctionDef):
        return None
    outer = model.scope_of[site.forward].parent
    if outer is None or not isinstance(outer.node, cst.ClassDef) or outer.parent is not model.root:
        return None
    if any(isinstance(d.decorator, cst.Name) and d.decorator.value in ("staticmethod", "classmethod")
           for d in site.forward.decorators):
        return None  # reachable by import
    cls = outer.node.name.value
    return {"class": cls, "method": site.forward.name.value, "qualname": f"{cls}.{site.forward.name.value}",
            "direct": True}


def _owning_function(model: ModuleModel, site: GradientSite) -> dict | None:
    """A custom gradient made inside a module-level function (a closure over its arguments, a
    factory returning it, a wrapper): that function, and the site's qualified name as Python
    gives it (`make.<locals>.op`). The child calls the function, and a callable it returns, and
    checks the custom gradient where that reaches it, as `cglint trace` would."""
    scope = model.scope_of[site.forward].parent
    names = [_code_name(site)]
    while scope is not None and isinstance(scope.node, cst.FunctionDef):
        if scope.parent is model.root:
            outer = scope.node.name.value
            owner = {"function": outer, "site": site.name, "qualname": ".".join([outer, "<locals>"] + names),
                     **_lambda_line(model, site)}
            if applied := model.applications_of(scope.node)[:4]:
                owner["applied"] = applied
            return owner
        names = [scope.node.name.value, "<locals>"] + names
        scope = scope.parent
    return None


def _call_site_inputs(model: ModuleModel, site: GradientSite) -> dict[int, str]:
    """What a call of the function in the module passes, by position, as input specs: a
    module-level name (`module:BATCH`, a Python number stays one), a number literal
    (`float(0.1)`: TensorFlow never differentiates it, and an intentional multiplier is a
    scalar as the module uses it), or `self.attr` of the calling class when the class makes it
    with a known shape or a number. The call that tells the most wins."""
    names = set(site.call_names) | ({site.forward.name.value} if isinstance(site.forward, cst.FunctionDef) else set())
    best: dict[int, str] = {}
    for call, scope in model.all_calls:
        if not (isinstance(call.func, cst.Name) and call.func.value in names):
            continue
        if any(a.keyword or a.star for a in call.args):
            continue
        if not site.has_varargs and len(call.args) != len(site.inputs):
            continue
        known = {}
        for i, arg in enumerate(call.args):
            spec = _arg_spec(model, arg.value, scope)
            if spec is not None:
                known[i] = spec
        if len(known) > len(best):
            best = known
    return best


def _call_site_ranks(model: ModuleModel, site: GradientSite, known: dict[int, str]) -> dict[int, int]:
    """The rank of what a call passes where its shape is not known: a layer's weight made with
    a shape of the constructor's sizes (`tf.Variable(init([n]))`, `add_weight(shape=(units,))`)
    is per feature whatever n is, and checking it as a batch claims a shape the code never uses."""
    names = set(site.call_names) | ({site.forward.name.value} if isinstance(site.forward, cst.FunctionDef) else set())
    ranks: dict[int, int] = {}
    for call, scope in model.all_calls:
        if not (isinstance(call.func, cst.Name) and call.func.value in names) or any(a.keyword or a.star for a in call.args):
            continue
        for i, arg in enumerate(call.args):
            node = arg.value
            if i in known or not (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name)
                                  and node.value.value == "self"):
                continue
            cls = scope
            while cls is not None and not isinstance(cls.node, cst.ClassDef):
                cls = cls.parent
            for value in (cls.attributes.get(node.attr.value, []) if cls is not None else []):
                if isinstance(value, cst.Call) and (rank := _rank_of_call(model, value)) is not None:
                    ranks.setdefault(i, rank)
    return ranks


def _rank_of_call(model: ModuleModel, call: cst.Call, depth: int = 0) -> int | None:
    """The length of the shape a variable- or tensor-making call is given, its sizes unknown."""
    if depth > 3:
        return None
    keyword = next((a.value for a in call.args if a.keyword and a.keyword.value == "shape"), None)
    positional = [a.value for a in call.args if not a.keyword and not a.star]
    qual = model.qualname(call.func) or ""
    node = keyword if keyword is not None else (_scaled_operand(positional[0]) if positional else None)
    if node is None:
        return None
    if qual in _VALUED and keyword is None:
        return _rank_of_call(model, node, depth + 1) if isinstance(node, cst.Call) else None
    if keyword is not None or qual in _SHAPED or qual.startswith(("keras.initializers.", "tensorflow.keras.initializers.",
                                                                  "tensorflow.initializers.")):
        return len(node.elements) if isinstance(node, (cst.List, cst.Tuple)) else None
    return None


def _call_arity(model: ModuleModel, site: GradientSite) -> int | None:
    """The most positional arguments the module's calls of the function pass (None without
    calls): TensorFlow differentiates what is passed, and a defaulted parameter no caller passes
    is no input (`def grad_reverse(x, scale=1.0)` called as `grad_reverse(x)` has one)."""
    names = set(site.call_names) | ({site.forward.name.value} if isinstance(site.forward, cst.FunctionDef) else set())
    counts = [len(call.args) for call, _ in model.all_calls
              if isinstance(call.func, cst.Name) and call.func.value in names and not any(a.star for a in call.args)]
    return max(counts) if counts else None


def _number_spec(node: cst.BaseExpression) -> str | None:
    sign = ""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        sign, node = "-", node.expression
    if isinstance(node, cst.Integer):
        return f"int({sign}{int(node.value)})"
    if isinstance(node, cst.Float):
        return f"float({sign}{float(node.value)!r})"
    return None


def _arg_spec(model: ModuleModel, node: cst.BaseExpression, scope) -> str | None:
    # `tf.convert_to_tensor(self.kernel)`, `tf.identity(w)`: the value of what they wrap.
    while isinstance(node, cst.Call) and node.args and \
            model.qualname(node.func) in ("tensorflow.convert_to_tensor", "tensorflow.identity"):
        node = node.args[0].value
    if (number := _number_spec(node)) is not None:
        return number
    if isinstance(node, cst.Name):
        found = scope.lookup(node.value)
        if found is not None and found[0] is model.root:
            return f"module:{node.value}"
        return None
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        cls = scope
        while cls is not None and not isinstance(cls.node, cst.ClassDef):
            cls = cls.parent
        for value in (cls.attributes.get(node.attr.value, []) if cls is not None else []):
            if (number := _number_spec(value)) is not None:
                return number.replace("int(", "float(") if "." in number else number
            if isinstance(value, cst.Call):
                shape = _shape_of_call(model, value, cls)
                if shape is not None:
                    return f"normal({', '.join(map(str, shape))})"
    return None


def _uses_nested_custom_gradient(model: ModuleModel, site: GradientSite) -> bool:
    """A custom-gradient function defined inside this one (in its grad fn, typically): the
    grad fn has its own custom gradient, so the second derivative is the user's."""
    for other in model.sites:
        scope = other.scope.parent
        while other is not site and scope is not None:
            if scope is site.scope:
                return True
            scope = scope.parent
    return False


def _module_shapes(model: ModuleModel) -> list[list[int]]:
    """Literal shapes of the variables and tensors the module makes anywhere (module level,
    `__init__`, `build`), for the input search: `tf.Variable([[...]])`, `tf.zeros([n])`,
    `tf.Variable(tf.random.normal([16, 4]))`, initialiser calls `GlorotUniform()((16, 4))`,
    `self.add_weight(shape=(16, 4))`; dimensions may be module-level integer constants."""
    shapes: list[list[int]] = []
    for call, scope in model.all_calls:
        shape = _shape_of_call(model, call, scope)
        if shape is not None and shape not in shapes:
            shapes.append(shape)
    return shapes


def _shape_of_call(model: ModuleModel, call: cst.Call, scope, depth: int = 0) -> list[int] | None:
    if depth > 3:
        return None
    keyword = next((a.value for a in call.args if a.keyword and a.keyword.value == "shape"), None)
    if keyword is not None:  # add_weight(shape=...), initializer(shape=...), tf.zeros(shape=...)
        return _dims(model, keyword, scope)
    positional = [a.value for a in call.args if not a.keyword and not a.star]
    if not positional:
        return None
    first = _scaled_operand(positional[0])
    qual = model.qualname(call.func)
    if qual in _VALUED:
        if isinstance(first, cst.Call):
            return _shape_of_call(model, first, scope, depth + 1)
        return _literal_shape(first)
    if qual in _SHAPED or (qual or "").startswith(("keras.initializers.", "tensorflow.keras.initializers.",
                                                  "tensorflow.initializers.")) \
            or isinstance(call.func, cst.Call):  # an initialiser instance called on a shape
        return _dims(model, first, scope)
    return None


def _scaled_operand(node: cst.BaseExpression) -> cst.BaseExpression:
    """`tf.random.normal([6, 6]) * 0.4`, `0.1 * init(...)`: arithmetic with a number keeps the
    tensor's shape, so the tensor operand stands for the whole."""
    while isinstance(node, cst.BinaryOperation):
        numbers = [_number_spec(side) is not None for side in (node.left, node.right)]
        if numbers == [False, True]:
            node = node.left
        elif numbers == [True, False]:
            node = node.right
        else:
            break
    return node


def _dims(model: ModuleModel, node: cst.BaseExpression, scope) -> list[int] | None:
    if not isinstance(node, (cst.List, cst.Tuple)):
        return None
    dims = [_int(model, el.value, scope) for el in node.elements]
    return dims if None not in dims and all(d >= 0 for d in dims) else None  # type: ignore[operator]


def _literal_shape(node: cst.BaseExpression) -> list[int] | None:
    if isinstance(node, (cst.Integer, cst.Float)) or (isinstance(node, cst.UnaryOperation) and isinstance(node.expression, (cst.Integer, cst.Float))):
        return []
    if isinstance(node, (cst.List, cst.Tuple)) and node.elements:
        inner = [_literal_shape(el.value) for el in node.elements]
        if None in inner or any(s != inner[0] for s in inner):
            return None
        return [len(node.elements), *inner[0]]  # type: ignore[misc]
    return None


def _int(model: ModuleModel, node: cst.BaseExpression, scope=None) -> int | None:
    """An integer literal, or a name bound only to one (`UNITS = 8`)."""
    if isinstance(node, cst.Integer):
        return int(node.value)
    if isinstance(node, cst.Name):
        found = (scope or model.root).lookup(node.value)
        values = found[1] if found else []
        ints = {int(v.value) for v in values if isinstance(v, cst.Integer)}
        if len(ints) == 1 and len(values) == 1:
            return ints.pop()
    return None
