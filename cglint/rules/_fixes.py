"""Building blocks the rules use to propose fixes (`Fix(edits, safe, description)`).

Fixes are built from the model's answers and libcst nodes; `cglint.fix` applies them,
checks the result parses and compiles, and iterates to a fixpoint."""

from __future__ import annotations

from typing import Iterable

import libcst as cst

from cglint.diagnostics import Fix
from cglint.model import GradFn, GradientSite, GradReturn, ModuleModel, Param, Scope

# Expressions that can sit in a call's function position or be reused without parentheses.
_ATOMIC = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.List, cst.Dict, cst.Tuple, cst.ListComp,
           cst.SimpleString, cst.Integer, cst.Float)


def parenthesized(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`expr` safe to put anywhere (`lambda x: x` -> `(lambda x: x)`)."""
    if isinstance(expr, _ATOMIC) or expr.lpar:
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def fresh_name(model: ModuleModel, *candidates: str) -> str:
    """The first candidate no scope of the module binds, reads or imports (then `name2`, ...)."""
    used = model.names_in_use()
    for name in candidates:
        if name not in used:
            return name
    base, n = candidates[-1], 2
    while f"{base}{n}" in used:
        n += 1
    return f"{base}{n}"


def sole_statement_line(model: ModuleModel, small: cst.CSTNode) -> cst.SimpleStatementLine | None:
    """The line holding `small` (an Assign or Return) when it is the only statement on it, so a
    statement can be inserted before it."""
    line = model.parent(small)
    if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 and line.body[0] is small:
        return line
    return None


def insert_before(line: cst.SimpleStatementLine, new: cst.BaseSmallStatement,
                  replacement: cst.BaseSmallStatement | None = None) -> tuple[cst.CSTNode, cst.CSTNode]:
    """An edit putting statement `new` on its own line before `line` (taking over its leading
    comments), optionally replacing the line's statement too."""
    first = cst.SimpleStatementLine(body=[new], leading_lines=line.leading_lines)
    second = line.with_changes(leading_lines=(), body=[replacement] if replacement is not None else line.body)
    return line, cst.FlattenSentinel([first, second])


def variables_expr(grad: GradFn) -> cst.BaseExpression | None:
    """How the grad fn reaches TensorFlow's `variables`: its parameter, or `kwargs["variables"]`."""
    params = grad.node.params
    named = [*params.posonly_params, *params.params, *params.kwonly_params]
    if any(p.name.value == "variables" for p in named):
        return cst.Name("variables")
    if isinstance(params.star_kwarg, cst.Param):
        return cst.parse_expression(f'{params.star_kwarg.name.value}["variables"]')
    return None


def add_variables_parameter(grad: GradFn) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    """An edit adding `variables=None` to the grad fn's parameters (keyword-only after `*args`)."""
    if "variables" in grad.scope.bindings:
        return None  # the name is taken inside the grad fn
    params = grad.node.params
    new = cst.Param(
        cst.Name("variables"),
        default=cst.Name("None"),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    if params.star_arg is not cst.MaybeSentinel.DEFAULT:
        return params, params.with_changes(kwonly_params=[*params.kwonly_params, new])
    last = params.params[-1] if params.params else None
    if last is not None and isinstance(last.comma, cst.Comma):  # `def grad(dy,)`: keep it tidy
        fixed = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        return params, params.with_changes(params=[*params.params[:-1], fixed, new])
    return params, params.with_changes(params=[*params.params, new])


# ---- variable gradients keyed on `variables` (CG002, CG006) ---------------------------------


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _grad_name(model: ModuleModel, expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None


def match_by_name(model: ModuleModel, grads: list[cst.BaseExpression], var_names: list[str]) -> list[int] | None:
    """grads[i] belongs to variable result[i], when the gradients' names say so for every one
    (`dw`, `dydw`, `w_grad`, `grad_w` -> `w`; the longest matching variable name wins); None
    when any gradient is unnamed or matches no single variable, or two claim the same one."""
    shorts = [_short(v).lower() for v in var_names]
    out: list[int] = []
    for expr in grads:
        name = _grad_name(model, expr)
        if name is None:
            return None
        name = name.lower()
        hits = [i for i, v in enumerate(shorts)
                if name != v and (name.endswith(v) or name.startswith(v + "_") or name.startswith(f"grad_{v}"))]
        if not hits:
            return None
        best = max(len(shorts[i]) for i in hits)
        longest = [i for i in hits if len(shorts[i]) == best]
        if len(longest) != 1:
            return None
        out.append(longest[0])
    return out if sorted(out) == list(range(len(var_names))) else None


def names_any(model: ModuleModel, grads: Iterable[cst.BaseExpression], var_names: list[str]) -> bool:
    shorts = [_short(v).lower() for v in var_names]
    for expr in grads:
        name = (_grad_name(model, expr) or "").lower()
        if name and any(name != v and (name.endswith(v) or name.startswith(v + "_")) for v in shorts):
            return True
    return False


def keyed_variable_gradients(
    site: GradientSite,
    grad: GradFn,
    ret: GradReturn,
    input_grads: str,
    var_grads: list[cst.BaseExpression],
) -> Fix | None:
    """Rewrite a grad fn's return as `return <input_grads>, [{w.ref(): dw, ...}[v.ref()] for v in
    variables]`, which is right whatever order TensorFlow gives `variables` in (a Keras 3 weight
    is keyed as `self.w.value.ref()`, its backing variable, which is what `variables` holds).

    Which gradient belongs to which variable: by name when every gradient's name points at one
    variable (`dydw` -> `w`); otherwise, in the order the forward first reads the variables.
    Both are assumptions about the author's intent, so the fix is unsafe. There is no fix when
    the counts differ, the grad fn cannot see `variables`, or names point two ways."""
    model = site.model
    variables = site.trainable_variables
    access = variables_expr(grad)
    if access is None or not variables or len(var_grads) != len(variables):
        return None
    if not all(v.exact for v in variables):
        return None  # a sublayer's weights: which ones, and in what number, the source does not say
    if not isinstance(ret.value, cst.Tuple) or ret.value is not (ret.node.value if isinstance(ret.node, cst.Return) else ret.node):
        return None
    names = [v.name for v in variables]
    for name in names:  # each variable must mean the same thing inside the grad fn
        root = name.split(".")[0]
        if grad.scope.lookup(root) is None:
            return None
    order = match_by_name(model, var_grads, names)
    if order is not None:
        how = "matched to variables by name"
    elif names_any(model, var_grads, names) and len(names) > 1:
        return None  # some names point at variables, but not one each: ambiguous
    else:
        order = list(range(len(names)))
        how = ("for the only variable" if len(names) == 1
               else "assuming they follow the order the forward first reads " + ", ".join(f"`{n}`" for n in names))
    code = model.module.code_for_node
    # A Keras 3 weight is keyed on its backing variable (`self.w.value.ref()`): `variables` holds
    # that, and the Keras wrapper has no `.ref()` at all.
    keys = [v.ref_code for v in variables]
    entries = ", ".join(f"{keys[order[i]]}: {code(g).strip()}" for i, g in enumerate(var_grads))
    loop = fresh_name(model, "v", "var", "variable")
    access_code = code(access)
    simple = len(var_grads) == 1 or all(isinstance(g, (cst.Name, cst.Attribute)) for g in var_grads)
    line = sole_statement_line(model, ret.node) if isinstance(ret.node, cst.Return) else None
    description = f"Return the variable gradients keyed on `variables` ({how})"
    if simple or line is None:
        value = f"{input_grads}, [{{{entries}}}[{loop}.ref()] for {loop} in {access_code}]"
        if isinstance(ret.node, cst.Return):
            return Fix([(ret.value, cst.parse_expression(value).with_changes(lpar=[], rpar=[]))], False, description)
        return Fix([(ret.node, cst.parse_expression(f"({value})"))], False, description)
    table = fresh_name(model, "grads_by_variable")
    assign = cst.parse_statement(f"{table} = {{{entries}}}\n").body[0]
    new_return = ret.node.with_changes(
        value=cst.parse_expression(f"{input_grads}, [{table}[{loop}.ref()] for {loop} in {access_code}]"))
    return Fix([insert_before(line, assign, new_return)], False, description)


def input_grads_code(site: GradientSite, grads: list[cst.BaseExpression]) -> str | None:
    """The input-gradient part of a rewritten return: `dx`, or `(dx, dy)` for several inputs."""
    if site.has_varargs or len(grads) != len(site.inputs) or not grads:
        return None
    code = [site.model.module.code_for_node(g).strip() for g in grads]
    return code[0] if len(code) == 1 else f"({', '.join(code)})"


def single_binding(scope: Scope, name: str) -> tuple[Scope, object] | None:
    """The scope binding `name` as seen from `scope`, when it binds it exactly once."""
    found = scope.lookup(name)
    if found is None or len(found[1]) != 1:
        return None
    return found[0], found[1][0]


__all__ = [
    "Param", "add_variables_parameter", "fresh_name", "input_grads_code", "insert_before",
    "keyed_variable_gradients", "match_by_name", "parenthesized", "single_binding", "sole_statement_line",
    "variables_expr",
]
