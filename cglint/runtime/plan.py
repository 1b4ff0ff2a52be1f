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
from libcst.metadata import MetadataWrapper, PositionProvider

from cglint.diagnostics import Diagnostic, FileResult
from cglint.model import GradientSite, ModuleModel

_EXAMPLE = re.compile(r"#\s*cglint:\s*example\s+(?P<spec>.+?)\s*$")
_INTENTIONAL = re.compile(r"#\s*cglint:\s*intentional\b")
# Calls whose first argument is a shape or a literal value: their result's shape is known.
_SHAPED = {"tensorflow.zeros", "tensorflow.ones", "tensorflow.random.normal", "tensorflow.random.uniform",
           "tensorflow.fill", "tensorflow.random.truncated_normal"}
_VALUED = {"tensorflow.Variable", "tensorflow.constant", "tensorflow.convert_to_tensor"}


@dataclass
class Planned:
    """One function to check: the dict the runner takes, plus what to attach results to."""

    site: GradientSite
    line: int
    request: dict  # for cglint.runtime.runner.run_module_checks
    diagnostics: list[Diagnostic] = field(default_factory=list)
    skip: str | None = None  # set when no child process could reach it
    end: int = 0  # the forward's last line (import-failure attribution spans [line, end])


def plan_file(result: FileResult, everything: bool = False) -> list[Planned]:
    model: ModuleModel | None = result.model
    if model is None or not model.sites:
        return []
    positions = MetadataWrapper(model.module, unsafe_skip_copy=True).resolve(PositionProvider)
    lines = result.source.splitlines()
    shapes = _module_shapes(model)
    planned = []
    for site in model.sites:
        span = positions[site.forward]
        start, end = span.start.line, span.end.line
        if isinstance(site.forward, cst.FunctionDef) and site.forward.decorators:
            start = positions[site.forward.decorators[0]].start.line
        mine = [d for d in result.diagnostics
                if start <= _module_line(result, d) <= end or _module_line(result, d) == positions[site.wrapper].start.line]
        if not mine and not everything:
            continue
        def_line = positions[site.anchor].start.line
        comments = _comments_above(lines, start) + lines[start:def_line]
        request: dict = {"function": "", "line": start, "shapes": shapes}
        example = next((m.group("spec") for c in comments if (m := _EXAMPLE.search(c))), None)
        if example:
            request["inputs"] = example
        elif (values := _call_site_values(model, site)) is not None:
            request["inputs"] = ", ".join(f"module:{v}" for v in values)
        if any(_INTENTIONAL.search(c) for c in comments):
            request["intentional"] = True
        name, skip = _import_name(model, site)
        request["function"] = name
        planned.append(Planned(site, start, request, mine, skip, end))
    return planned


def _module_line(result: FileResult, d: Diagnostic) -> int:
    """The diagnostic's line in the linted module (a notebook's diagnostics count lines in cells)."""
    return result.notebook.module_line(d) if result.notebook is not None else d.line


def _import_name(model: ModuleModel, site: GradientSite) -> tuple[str, str | None]:
    """How the child reaches the function: `op`, `Class.method`, or the name a call form is
    assigned to at module level. Functions nested in other functions are out of reach."""
    outer = model.scope_of[site.forward].parent
    if outer is model.root:
        if isinstance(site.forward, cst.FunctionDef):
            return site.forward.name.value, None
        named = sorted(n for n in site.call_names if n in model.root.bindings)
        return (named[0], None) if named else (site.name, "a lambda with no module-level name")
    if outer is not None and isinstance(outer.node, cst.ClassDef) and outer.parent is model.root:
        return site.name, None
    if site.call_names and site.call_names & set(model.root.bindings) and not isinstance(site.forward, cst.Lambda):
        return sorted(site.call_names & set(model.root.bindings))[0], None
    return site.name, "nested inside another function: not reachable by import"


def _comments_above(lines: list[str], start: int) -> list[str]:
    """The function's first line and the comment lines directly above it."""
    out = [lines[start - 1]] if start <= len(lines) else []
    i = start - 2
    while i >= 0 and lines[i].strip().startswith("#"):
        out.append(lines[i])
        i -= 1
    return out


def _call_site_values(model: ModuleModel, site: GradientSite) -> list[str] | None:
    """Module-level names passed positionally at a call of the function, when the call passes
    one for every input."""
    names = set(site.call_names) | ({site.forward.name.value} if isinstance(site.forward, cst.FunctionDef) else set())
    for call, scope in model.all_calls:
        if not (isinstance(call.func, cst.Name) and call.func.value in names):
            continue
        args = [a.value for a in call.args]
        if len(args) != len(site.inputs) or any(a.keyword or a.star for a in call.args):
            continue
        if all(isinstance(a, cst.Name) and a.value in model.root.bindings and scope.lookup(a.value)[0] is model.root
               for a in args):
            return [a.value for a in args]  # type: ignore[union-attr]
    return None


def _module_shapes(model: ModuleModel) -> list[list[int]]:
    """Literal shapes of the module-level variables and tensors, for the input search."""
    shapes: list[list[int]] = []
    for values in model.root.bindings.values():
        for value in values:
            if not isinstance(value, cst.Call) or not value.args:
                continue
            qual = model.qualname(value.func)
            first = value.args[0].value
            shape = None
            if qual in _VALUED:
                shape = _literal_shape(first)
            elif qual in _SHAPED and isinstance(first, (cst.List, cst.Tuple)):
                dims = [_int(el.value) for el in first.elements]
                shape = dims if None not in dims else None
            if shape is not None and shape not in shapes:
                shapes.append(shape)  # type: ignore[arg-type]
    return shapes


def _literal_shape(node: cst.BaseExpression) -> list[int] | None:
    if isinstance(node, (cst.Integer, cst.Float)) or (isinstance(node, cst.UnaryOperation) and isinstance(node.expression, (cst.Integer, cst.Float))):
        return []
    if isinstance(node, (cst.List, cst.Tuple)) and node.elements:
        inner = [_literal_shape(el.value) for el in node.elements]
        if None in inner or any(s != inner[0] for s in inner):
            return None
        return [len(node.elements), *inner[0]]  # type: ignore[misc]
    return None


def _int(node: cst.BaseExpression) -> int | None:
    return int(node.value) if isinstance(node, cst.Integer) else None
