"""The second, cheaper-than-libcst look at a file that passed the text prefilter.

libcst keeps every byte of the source, which makes it right for fixes and slow to parse
(~8x Python's own C parser). Most files that mention `custom_gradient` hold no TensorFlow
custom-gradient site at all (docstrings, `custom_gradient.copy_handle_data`, Keras 3's or JAX's
custom_gradient), so before libcst `ast` tells whether the module can matter to any rule: a
use of TensorFlow's custom_gradient (decorator or call), or, for CG013, a TensorFlow module
with a function that returns `(value, nested_def)`, or, for CG017, a TensorFlow module that
mentions `gradient_override_map`; or, for CG010, a module with a keyword call that imports a
project module mentioning custom_gradient (`calls_project_site`). A module that can matter is analysed
whole, however it is asked for (so every output format, the cache, the language server and
flake8 give the same findings).
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
from dataclasses import dataclass, field

from cglint import source as pysource
from cglint.names import KERAS_CUSTOM_GRADIENT, TF_CUSTOM_GRADIENT, alias_to_tensorflow, normalize

# The wrappers that make a site: TensorFlow's, and Keras 3's (tf.custom_gradient on its TF backend).
_WRAPPERS = TF_CUSTOM_GRADIENT | KERAS_CUSTOM_GRADIENT


@dataclass
class Scan:
    relevant: bool  # can any rule fire on this module?
    source: str = field(repr=False)
    needles: set[str] = field(default_factory=set)
    tree: ast.Module | None = field(default=None, repr=False)  # Python's parse


def scan(source: str, tensorflow_aliases: tuple[str, ...] = (), tree: ast.Module | None = None) -> Scan | None:
    """None when Python's parser rejects the source (libcst then reports CG000 precisely).
    `tree` is Python's parse of `source` (or of a same-shape text: `source.analysis_text`)
    when the caller has it already."""
    if tree is None:
        tree, _ = pysource.parse(source)
        if tree is None:
            return None
    statements = list(_statements(tree.body))
    imports = _reach(_imports(statements), tensorflow_aliases, tree, source)
    imports_tf = any(q == "tensorflow" or q.startswith("tensorflow.") for q in imports.values())
    # `custom_grad = tf.custom_gradient` at module level: `@custom_grad` is the wrapper (as the
    # model's module aliases say; over-approximated: a name bound twice still counts here)
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, (ast.Attribute, ast.Name)):
            qualname = _qualname(stmt.value, imports)
            if qualname in _WRAPPERS:
                imports.update({t.id: qualname for t in stmt.targets if isinstance(t, ast.Name)})
    # Only statements on lines that mention custom_gradient can call it; walking just their
    # expressions keeps this scan a small fraction of a full tree walk.
    mention = {i for i, line in enumerate(pysource.split_lines(source), 1) if "custom_gradient" in line}
    needles: set[str] = set()
    sites = 0
    for stmt in statements:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(_qualname(d, imports) in _WRAPPERS for d in stmt.decorator_list):
                sites += 1
                needles.add(stmt.name)
            elif imports_tf and _returns_value_and_nested_def(stmt):
                needles.add(stmt.name)  # a CG013 candidate: every use of it matters
            continue
        if not isinstance(stmt, ast.stmt) or isinstance(stmt, _COMPOUND) or not any(i in mention for i in range(stmt.lineno, (stmt.end_lineno or 0) + 1)):
            continue
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and _qualname(node.func, imports) in _WRAPPERS:
                sites += 1
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    if isinstance(arg, ast.Name):
                        needles.add(arg.id)
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
            if _qualname(stmt.value.func, imports) in _WRAPPERS:
                needles.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
    # CG017's call; a Defun's gradient function (`--runtime` checks it)
    if not sites and not needles and not (imports_tf and ("gradient_override_map" in source or "grad_func" in source)):
        return Scan(False, source)
    return Scan(True, source, needles, tree)


def _returns_value_and_nested_def(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Over-approximates the model's `unwrapped_candidates`: a nested def anywhere in `fn` and a
    return of a 2-tuple naming one, or of a bare name (which may hold such a tuple)."""
    inner = list(_statements(fn.body))
    nested = {n.name for n in inner if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if not nested:
        return False
    # `return y, grad` directly, or `return out` with `out = (y, grad)` earlier (as the model follows).
    tuples = [n.value for n in inner if isinstance(n, ast.Return) and n.value is not None]
    bound = {n.value for n in inner if isinstance(n, ast.Return) and isinstance(n.value, ast.Name)}
    if bound:
        bound = {n.id for n in bound}  # type: ignore[attr-defined]
        tuples += [a.value for a in inner if isinstance(a, ast.Assign)
                   and any(isinstance(t, ast.Name) and t.id in bound for t in a.targets)]
    return any(isinstance(v, ast.Tuple) and len(v.elts) == 2 and isinstance(v.elts[1], ast.Name)
               and v.elts[1].id in nested for v in tuples)


_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.ClassDef) + (
    (ast.TryStar,) if hasattr(ast, "TryStar") else ()) + ((ast.Match,) if hasattr(ast, "Match") else ())


def _statements(body: list[ast.stmt]):
    """Every statement, nested ones included, without descending into expressions."""
    for stmt in body:
        yield stmt
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(stmt, name, None)
            if inner:
                yield from _statements(inner)


def _imports(statements: list[ast.stmt]) -> dict[str, str]:
    """Local name -> dotted name, as the model resolves them (see model.Collector)."""
    out: dict[str, str] = {}
    for node in statements:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    out[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    out[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                out[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return out


def _reach(imports: dict[str, str], aliases: tuple[str, ...], tree: ast.Module, source: str) -> dict[str, str]:
    """As `model.reach_imports`, over-approximated (the model decides): configured re-exports
    are TensorFlow, an unimported `tf` is, and so is TensorFlow's own module-local
    `custom_gradient` (a top-level def exported by `@tf_export("custom_gradient")`)."""
    out = {name: alias_to_tensorflow(dotted, aliases) for name, dotted in imports.items()} if aliases else dict(imports)
    if "tf" not in out and "tf." in source:
        out["tf"] = "tensorflow"
    if "custom_gradient" not in out and 'tf_export("custom_gradient")' in source:
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "custom_gradient":
                out["custom_gradient"] = "tensorflow.custom_gradient"
    return out


def _qualname(expr: ast.expr, imports: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name) or expr.id not in imports:
        return None
    parts.append(imports[expr.id])
    return normalize(".".join(reversed(parts)))


# ---- a file that only calls a custom-gradient function of another project module -----------
# `from .ops import clip_grad; clip_grad(x=t)` mentions no custom gradient, yet TensorFlow skips
# the custom gradient of an all-keyword call (CG010). Such a file is linted when it makes a
# keyword call and imports a project module whose text mentions `custom_gradient` (directly or
# through the modules that one imports: re-exports, registries). Text and stat calls only.

# an argument passed by keyword, over-approximated (`f(\n    x=t)`, `f(g(a), x=t)`; also `a, b = ...`)
_KEYWORD_CALL = re.compile(r"[(,]\s*\w+[ \t]*=(?!=)")
_UNPACKED_CALL = re.compile(r"^[ \t]*\w+[ \t]*,[ \t]*\w+[ \t]*=[ \t]*[\w.]+\(", re.MULTILINE)
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+\(?([\w., \t]*)|import[ \t]+([\w., \t]+))",
                     re.MULTILINE)
MAX_IMPORTED = 32  # project modules read to decide
_texts: dict[str, tuple[tuple[int, int], str, bool, bool, list[tuple[int, str]]]] = {}


def calls_project_site(source: str, path: str | None) -> tuple[bool, dict[str, str]]:
    """Whether a file that mentions no custom gradient may call one defined in another module
    of its project, and the project files that answer depends on (path -> sha256)."""
    seen: dict[str, str] = {}
    # A keyword call, or an unpacked call that may drop the grad fn of a forgotten forward (CG013).
    unpacks = _UNPACKED_CALL.search(source) is not None
    if not path or path.startswith("<") or path == "-" or not (unpacks or _KEYWORD_CALL.search(source)):
        return False, seen
    todo = [(path, spec) for spec in _imported_modules(source)]
    done = 0
    while todo and done < MAX_IMPORTED:
        importer, (level, dotted) = todo.pop(0)
        found = module_path(importer, level, dotted)
        if found is None or found in seen:
            continue
        done += 1
        read = _module_text(found)
        if read is None:
            continue
        seen[found], mentions, forgets, imports = read
        if mentions or (unpacks and forgets):
            return True, seen
        if importer == path:  # one step further: an `__init__` re-export, a registry's users
            todo += [(found, spec) for spec in imports]
    return False, seen


def _imported_modules(source: str) -> list[tuple[int, str]]:
    """(level, dotted module) of each import: `from .a import b` gives `.a` and `.a.b` (b may
    be a submodule), `import a.b` gives `a.b`."""
    out: list[tuple[int, str]] = []
    for m in _IMPORT.finditer(source):
        dots, module, names, plain = m.groups()
        if plain is not None:
            out += [(0, n.split()[0]) for n in plain.split(",") if n.strip()]
            continue
        level = len(dots)
        if module or not level:
            out.append((level, module))
        out += [(level, f"{module}.{n.split()[0]}" if module else n.split()[0]) for n in names.split(",") if n.strip()]
    return out


def _module_text(path: str) -> tuple[str, bool, bool, list[tuple[int, str]]] | None:
    """A project module's sha256, whether it mentions custom_gradient, whether it may hold a
    forgotten forward (CG013), its imports; remembered
    per (mtime, size)."""
    from cglint import files

    try:
        st = os.stat(path)
        stamp = (st.st_mtime_ns, st.st_size)
        hit = _texts.get(path)
        if hit is not None and hit[0] == stamp:
            return hit[1:]
        data = files.read_bytes(path, 1_000_000, what="a module the linted file imports")[0]
    except (OSError, ValueError):
        return None
    text = data.decode("utf-8", "replace")
    _texts[path] = (stamp, hashlib.sha256(data).hexdigest(), "custom_gradient" in text, files.may_forget_decorator(text),
                    _imported_modules(text))
    return _texts[path][1:]


def module_path(importer: str, level: int, dotted: str) -> str | None:
    """The project file `dotted` names for a module at `importer` (relative imports from its
    package, absolute ones from the directory above its top package and from its own), or None."""
    parts = [p for p in dotted.split(".") if p]
    here = os.path.dirname(os.path.abspath(importer))
    if level:
        base = here
        for _ in range(level - 1):
            base = os.path.dirname(base)
        return _module_file(base, parts)
    for root in _roots(here):
        found = _module_file(root, parts)
        if found is not None:
            return found
    return None


def _module_file(base: str, parts: list[str]) -> str | None:
    target = os.path.join(base, *parts)
    for candidate in (target + ".py", os.path.join(target, "__init__.py")):
        if os.path.isfile(candidate):
            return candidate
    return None


def _roots(directory: str) -> list[str]:
    """Where absolute imports of the project resolve: the directory above the top package the
    importer is in, and the importer's own directory."""
    top = directory
    while os.path.isfile(os.path.join(top, "__init__.py")) and os.path.dirname(top) != top:
        top = os.path.dirname(top)
    return [top] if top == directory else [top, directory]
