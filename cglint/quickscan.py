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
import contextlib
import hashlib
import os
import re
import time
from dataclasses import dataclass, field
from typing import Callable

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
    # CG017's and CG020's call; CG021's recompute_grad; a Defun's gradient function (`--runtime` checks it)
    if not sites and not needles and not (imports_tf and ("gradient_override_map" in source or "grad_func" in source
                                                          or "recompute_grad" in source)):
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
# the custom gradient of an all-keyword call (CG010), and a positional call can pass a float64
# tensor (CG016) or a literal structure (CG007). Such a file is linted when it names something an
# imported project module exports that can lead to a custom gradient: the project index
# (`exports`) knows, built once per content.
# Import lines, in two steps so that no part of a line is scanned twice: the keyword at a
# line's start, then the rest of the line (its leading blanks stripped) by an anchored match
# whose groups cannot trade characters (a run of dots or blanks is split one way only).
_IMPORT = re.compile(r"^[ \t]*(from|import)[ \t]([^\n]*)", re.MULTILINE)
_FROM_REST = re.compile(r"(\.*)(\w*(?:\.\w+)*)[ \t]+import[ \t]+\(?([\w., \t]*)")
_IMPORT_REST = re.compile(r"[\w., \t]+")
MAX_IMPORTED = 32  # project modules read to decide
_texts: dict[str, tuple[tuple[int, int], str, bool, bool, list[tuple[int, str]]]] = {}


def calls_project_site(source: str, path: str | None) -> tuple[bool, dict[str, str]]:
    """Whether a file that mentions no custom gradient may call one defined in another module
    of its project, and the project files that answer depends on (path -> sha256).

    It may when it names something an imported project module exports that can lead to a
    custom gradient (`exports`: the site itself, a factory, a class, a table, a re-export): the
    rules whose evidence is at the call (CG004, CG007, CG008, CG010, CG015, CG016) judge calls of
    every form, positional ones included; or, for CG013, when an imported module may hold a
    forgotten forward. A file that merely imports a module that mentions `custom_gradient` is
    not a candidate."""
    seen: dict[str, str] = {}
    if not path or path.startswith("<") or path == "-":
        return False, seen
    todo = [(path, spec) for spec in _imported_modules(source)]
    found_all: list[str] = []
    done = 0
    while todo and done < MAX_IMPORTED:
        importer, (level, dotted) = todo.pop(0)
        found = _index.resolve(os.path.dirname(os.path.abspath(importer)), importer, level, dotted)
        if found is None or found in seen:
            continue
        done += 1
        read = _module_text(found)
        if read is None:
            continue
        seen[found], _mentions, _forgets, imports = read
        found_all.append(found)
        if importer == path:  # one step further: a module an `__init__` re-exports, `pkg.ops.clip`
            todo += [(found, spec) for spec in imports]
    if not found_all:
        return False, seen
    # The index first (a module imported later may fill a registry imported earlier), then the
    # names this file uses.
    for f in found_all:
        exports(f)
    names = frozenset().union(*(_index.exports[f] if f in _index.exports else exports(f) for f in found_all))
    return bool(names & set(_WORD.findall(source))), seen


# Words that make a top-level statement lead to a custom gradient (the wrappers, CG017's
# override map and registration, recompute_grad's): a statement naming one, or naming something
# an imported project module exports, exports what it binds.
_SEEDS = frozenset({"custom_gradient", "gradient_override_map", "RegisterGradient", "recompute_grad"})
_WORD = re.compile(r"[^\W\d]\w*")
MAX_GRAPH = 8192  # project modules one index holds
MAX_SIBLINGS = 32  # as model.tables: a registry's directory is read for what fills it


class _Index:
    """What each project module exports (`exports`), for every module reachable from the ones
    asked about, computed together: a fixed point over the import graph (cycles included), where
    only modules that mention a seed, or a name an imported module exports, are parsed. Built once
    per content: a module whose (mtime, size) changed starts a new index."""

    def __init__(self) -> None:
        self.imports: dict[str, list[str]] = {}  # path -> the project modules it imports
        self.stamps: dict[str, tuple[int, int] | None] = {}
        self.exports: dict[str, frozenset[str]] = {}
        self.statements: dict[str, list[_Statement] | None] = {}
        self.stars: dict[str, list[str]] = {}
        self.paths: dict[tuple[str, int, str], str | None] = {}
        self.importers: dict[str, set[str]] = {}
        self.filled: set[str] = set()  # registries: a site elsewhere is stored in them
        self.listed: dict[str, list[str]] = {}
        self.roots: dict[str, list[str]] = {}
        self.dirs: dict[str, list[int] | None] = {}  # directories listed, with their identity before
        self.unlisted = False
        self.files: dict[str, tuple[frozenset[str], frozenset[str]]] = {}  # directory -> its files and directories
        self.sources: dict[str, dict[str, list[tuple[int, str]]]] = {}  # path -> local name -> the modules it may come from

    def resolve(self, here: str, importer: str, level: int, dotted: str) -> str | None:
        """`module_path`, remembered per (importer's directory, import) for this index."""
        key = (here, level, dotted)
        if key not in self.paths:
            if level:
                self.paths[key] = module_path(importer, level, dotted, self.isfile)
            else:  # as module_path, with the roots of a directory found once
                roots = self.roots.get(here)
                if roots is None:
                    roots = self.roots[here] = _roots(here, self.isfile)
                parts = [p for p in dotted.split(".") if p]
                self.paths[key] = next((f for f in (_module_file(r, parts, self.isfile) for r in roots) if f), None)
        return self.paths[key]

    def isfile(self, path: str) -> bool:
        """`os.path.isfile`; within `listings()`, from one listing per directory (a large tree
        asks each directory for dozens of names, most of them absent): a name listed as a
        file, or a link to one."""
        if not _listings_on:
            self.unlisted = True  # a resolution `snapshot` cannot vouch for
            return os.path.isfile(path)
        directory, name = os.path.split(path)
        return name in self._listing(directory)[0]

    def _listing(self, directory: str) -> tuple[frozenset[str], frozenset[str]]:
        """(files, directories) of `directory`; one its parent (listed already) does not hold
        is not read. A directory that cannot be read is recorded as absent (`snapshot`)."""
        found = self.files.get(directory)
        if found is None:
            found = _EMPTY_LISTING
            parent, name = os.path.split(directory)
            listed = self.files.get(parent)
            if listed is None or name in listed[1]:
                identity = _identity(directory)
                files, dirs = set(), set()
                try:
                    with os.scandir(directory) as entries:
                        for entry in entries:
                            try:
                                if entry.is_file():
                                    files.add(entry.name)
                                elif entry.is_dir():
                                    dirs.add(entry.name)
                            except OSError:
                                pass
                except (OSError, ValueError):
                    identity = None
                self.dirs[directory] = identity
                found = (frozenset(files), frozenset(dirs))
            self.files[directory] = found
        return found

    def siblings(self, directory: str) -> list[str]:
        """The modules of a directory the model reads for what fills a registry defined there
        (`model.tables`: the first 4 * MAX_SIBLINGS names), listed once."""
        if directory not in self.listed:
            self.dirs.setdefault(directory, _identity(directory))
            try:
                names = sorted(n for n in os.listdir(directory) if n.endswith(".py"))[:4 * MAX_SIBLINGS]
            except OSError:
                names = []
            self.listed[directory] = [os.path.join(directory, n) for n in names]
        return self.listed[directory]

    def snapshot(self) -> dict[str, list[int] | None] | None:
        """Every file and directory this index read, by identity (`_identity`): while they are all
        unchanged, every answer `calls_project_site` gave from it stands (the cache's quiet
        files with project imports). None when it cannot vouch for that: the graph was cut at
        MAX_GRAPH (what it holds then depends on the order of the questions), or a file changed
        since it was read, or changed too recently to tell (git's "racy" case)."""
        if len(self.imports) >= MAX_GRAPH or self.unlisted:
            return None
        out: dict[str, list[int] | None] = dict(self.dirs)
        recent = time.time_ns() - 2_000_000_000
        for path, stamp in self.stamps.items():
            now = _identity(path)
            if (None if now is None else (now[3], now[2])) != stamp:
                return None
            out[path] = now
        if any(i is not None and i[3] > recent for i in out.values()):  # as Cache.remember_quiet
            return None
        return out

    def fresh(self, path: str) -> bool:
        return path in self.stamps and self.stamps[path] == _stamp(path)

    def add(self, root: str) -> None:
        """Every module reachable from `root`, then the fixed point over them."""
        if root in self.exports:
            return
        new: list[str] = []
        todo = [root]
        while todo and len(self.imports) < MAX_GRAPH:
            path = todo.pop()
            if path in self.imports:
                continue
            self.stamps[path] = _stamp(path)  # before the read: a change after it shows in `snapshot`
            read = _module_text(path)
            here = os.path.dirname(os.path.abspath(path))
            found = [self.resolve(here, path, level, dotted) for level, dotted in (read[3] if read else [])]
            self.imports[path] = [f for f in dict.fromkeys(found) if f is not None and f != path]
            new.append(path)
            todo += [f for f in self.imports[path] + self.siblings(here) if f not in self.imports]
        for path in new:
            for t in self.imports[path]:
                self.importers.setdefault(t, set()).add(path)
        importers = self.importers
        for path in new:
            self.exports.setdefault(path, frozenset())
        # Every new module once (its imports may export already), seeds last so that they are
        # popped first; then whoever imports a module whose exports changed.
        work = sorted(new, key=lambda p: _mentions_seed(p) or _forgets(p))
        while work:
            path = work.pop()
            upstream = frozenset().union(*(self.exports.get(t, frozenset()) for t in self.imports.get(path, ())))
            names = self._names(path, upstream)
            for registry in self._fills(path, upstream):
                if registry not in self.filled:
                    self.filled.add(registry)
                    work.append(registry)
            if names != self.exports.get(path):
                self.exports[path] = names
                work += [i for i in importers.get(path, ()) if i not in work]

    def _names(self, path: str, upstream: frozenset[str]) -> frozenset[str]:
        if path not in self.statements:
            text = _text_of(path)
            if text is None or not (path in self.filled or any(w in text for w in _SEEDS.union(upstream))
                                    or _forgets(path)):
                return frozenset()  # not parsed until a seed or an exported name appears in it
            self.statements[path], self.stars[path], self.sources[path] = _summary(path, text, self.isfile)
        statements = self.statements[path]
        if statements is None:
            return frozenset()
        out: set[str] = set()
        filled = path in self.filled
        for entry in statements:
            if filled or entry.site or entry.words & upstream:
                out |= entry.bound
        for star in self.stars[path]:
            out |= self.exports.get(star, frozenset())
        return frozenset(out)


    def _fills(self, path: str, upstream: frozenset[str]) -> list[str]:
        """The project modules a site of `path` may be stored in: where a statement that applies a
        seed, or names a site of this module, stores something (`@register("clip")` with `from
        .registry import register`, `@registry.register(...)`, `OPS["clip"] = clip`)."""
        statements = self.statements.get(path)
        if not statements:
            return []
        here = os.path.dirname(os.path.abspath(path))
        out: list[str] = []
        own = frozenset().union(*(e.bound for e in statements if e.site))
        for entry in statements:
            if entry.site or entry.words & own:
                for name in entry.stores:
                    for level, dotted in self.sources.get(path, {}).get(name, ()):
                        found = self.resolve(here, path, level, dotted)
                        if found is not None and found != path:
                            out.append(found)
        return out


_EMPTY_LISTING: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())
_index = _Index()
_generation = 0
_listings_on = False


def exports(path: str) -> frozenset[str]:
    """The top-level names of a project module that can lead to a custom gradient: a name is
    exported when the statement that binds it names a seed (`custom_gradient`,
    `gradient_override_map`, ...) or a name an imported project module exports — a decorated
    def, a factory or class holding one, a table of them, a helper calling one, `from .ops import
    clip as clip_grad`, a star import. Over-approximate by construction (a word anywhere in the
    statement counts, at any depth of imports), so the prefilter never hides what the model
    resolves."""
    global _index, _generation
    if path in _index.exports and not _index.fresh(path):
        _index = _Index()  # a module changed on disk (a long-lived host): index again
        _generation += 1
    _index.add(path)
    return _index.exports.get(path, frozenset())


def _forgets(path: str) -> bool:
    """The module may hold CG013's forgotten forward (`files.may_forget_decorator`)."""
    read = _module_text(path)
    return read is not None and read[2]


def _mentions_seed(path: str) -> bool:
    read = _module_text(path)
    return read is not None and read[1]


@dataclass(frozen=True)
class _Statement:
    """A top-level statement (or one name of an import) as the index sees it."""

    words: frozenset[str]  # every identifier it names
    bound: frozenset[str]  # the names it binds
    site: bool = False  # it applies a seed: `@tf.custom_gradient`, `tf.custom_gradient(f)`, `RegisterGradient(...)`
    stores: frozenset[str] = frozenset()  # names it may store what it makes in: `@register(...)`, `TABLE[k] = f`


def _terminal(expr: ast.expr) -> str | None:
    while isinstance(expr, ast.Call):
        expr = expr.func
    return expr.attr if isinstance(expr, ast.Attribute) else expr.id if isinstance(expr, ast.Name) else None


def _summary(path: str, text: str, isfile: Callable[[str], bool] = os.path.isfile) -> tuple[list[_Statement] | None, list[str], dict[str, list[tuple[int, str]]]]:
    """Each top-level statement's words, bindings and whether it applies a seed (under any local
    name: `from tensorflow import custom_gradient as cg`); each imported name on its own; the
    modules star-imported."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None, [], {}  # the model reads nothing from a module Python cannot parse
    seeds = set(_SEEDS)
    sources: dict[str, list[tuple[int, str]]] = {}
    tensorflow = "tensorflow" in text or "tf." in text  # as files.may_forget_decorator asks
    for stmt in tree.body:  # local names of the seeds
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            seeds.update(a.asname for a in stmt.names if a.asname and a.name.split(".")[-1] in _SEEDS)
        elif isinstance(stmt, ast.Assign) and _terminal(stmt.value) in _SEEDS and not isinstance(stmt.value, ast.Call):
            seeds.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
    out: list[_Statement] = []
    stars: list[str] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for a in stmt.names:
                if a.name == "*":
                    found = module_path(path, getattr(stmt, "level", 0), getattr(stmt, "module", None) or "", isfile)
                    stars += [found] if found is not None else []
                    continue
                local = a.asname or (a.name.split(".")[0] if isinstance(stmt, ast.Import) else a.name)
                if isinstance(stmt, ast.Import):
                    sources[local] = [(0, a.name if a.asname else local)]
                else:  # a name defined in the module, or a submodule of the package
                    base = f"{stmt.module}.{a.name}" if stmt.module else a.name
                    sources[local] = [(stmt.level, stmt.module or ""), (stmt.level, base)]
                out.append(_Statement(frozenset(a.name.split(".")), frozenset({local})))
            continue
        words: set[str] = set()
        site = False
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name):
                words.add(n.id)
            elif isinstance(n, ast.Attribute):
                words.add(n.attr)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                words.add(n.name)
                site = site or any(_terminal(d) in seeds for d in n.decorator_list)
            elif isinstance(n, ast.Call):
                site = site or _terminal(n.func) in seeds
            elif isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier():
                words.add(n.value)  # getattr(ops, "clip"), a registry's key
        if tensorflow and isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            site = site or _returns_value_and_nested_def(stmt)  # CG013's forgotten forward
        out.append(_Statement(frozenset(words), frozenset(_bound(stmt)), site, frozenset(_stores(stmt, seeds))))
    return out, stars, sources


def _root(expr: ast.expr) -> str | None:
    while isinstance(expr, (ast.Attribute, ast.Subscript, ast.Call)):
        expr = expr.func if isinstance(expr, ast.Call) else expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _stores(stmt: ast.stmt, seeds: set[str]) -> set[str]:
    """Where a top-level statement may store a function in a registry: the other decorators of a
    decorated site (`@register("clip")`, `@OPS.register`), a subscript or attribute it assigns
    (`OPS["clip"] = clip`), a method it calls (`OPS.update(...)`, `REGISTRY.register(clip)`)."""
    out: set[str] = set()
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        if any(_terminal(d) in seeds for d in stmt.decorator_list):
            out.update(r for d in stmt.decorator_list if _terminal(d) not in seeds and (r := _root(d)))
    elif isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        out.update(r for t in targets if isinstance(t, (ast.Subscript, ast.Attribute)) and (r := _root(t)))
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute):
        out.update(r for r in [_root(stmt.value.func)] if r)
    return out


def _bound(stmt: ast.stmt) -> set[str]:
    """The module-level names a top-level statement binds: a def's or class's name, assignment
    and loop targets, `with ... as` names, and those of the statements nested in an `if`, `try`,
    `for` or `with` (never a function's locals)."""
    out: set[str] = set()
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in stmt.items if item.optional_vars is not None]
    elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {a.asname or a.name.split(".")[0] for a in stmt.names}
    for target in targets:
        out.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    for name in ("body", "orelse", "finalbody", "handlers"):
        for inner in getattr(stmt, name, None) or ():
            if isinstance(inner, ast.ExceptHandler):
                out.update(*(_bound(s) for s in inner.body))
            elif isinstance(inner, ast.stmt):
                out |= _bound(inner)
    return out


def _identity(path: str) -> list[int] | None:
    """As the cache's quiet index identifies a file: device, inode, size, modification and change times."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


@contextlib.contextmanager
def listings():
    """While the tree does not change (one command-line run), the index resolves imports from
    one listing per directory; after, from the file system again (a long-lived host sees new
    files), with resolutions it remembers kept as before."""
    global _listings_on, _index, _generation
    # A fresh index: an earlier run's resolutions may be stale now (`snapshot` vouches only for its own).
    _index = _Index()
    _generation += 1
    _listings_on = True
    try:
        yield
    finally:
        _listings_on = False
        _index.files.clear()
        _index.roots.clear()


def snapshot() -> dict[str, list[int] | None] | None:
    """The current index's `snapshot` (see `_Index.snapshot`)."""
    return _index.snapshot()


def generation() -> int:
    """Counts the indexes this process started: answers given under two of them cannot share a snapshot."""
    return _generation


def unchanged(snap: dict[str, list[int] | None]) -> bool:
    """Whether every file and directory of a snapshot still has the identity it had."""
    return all(_identity(path) == identity for path, identity in snap.items())


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _module_sha(path: str) -> str | None:
    read = _module_text(path)
    return read[0] if read is not None else None


def _text_of(path: str) -> str | None:
    from cglint import files

    try:
        data = files.read_bytes(path, 1_000_000, what="a module the linted file imports")[0]
    except (OSError, ValueError):
        return None
    return data.decode("utf-8", "replace")


def _imported_modules(source: str) -> list[tuple[int, str]]:
    """(level, dotted module) of each import: `from .a import b` gives `.a` and `.a.b` (b may
    be a submodule), `import a.b` gives `a.b`."""
    out: list[tuple[int, str]] = []
    for line in _IMPORT.finditer(source):
        rest = line.group(2).lstrip(" \t")
        if line.group(1) == "import":
            m = _IMPORT_REST.match(rest)
            dots = module = names = None
            plain = m.group() if m else None
            if plain is None:
                continue
        else:
            m = _FROM_REST.match(rest)
            if m is None:
                continue
            (dots, module, names), plain = m.groups(), None
        if plain is not None:
            out += [(0, n.split()[0]) for n in plain.split(",") if n.strip()]
            continue
        level = len(dots)
        if module or not level:
            out.append((level, module))
        out += [(level, f"{module}.{n.split()[0]}" if module else n.split()[0]) for n in names.split(",") if n.strip()]
    return out


def _module_text(path: str) -> tuple[str, bool, bool, list[tuple[int, str]]] | None:
    """A project module's sha256, whether it mentions a seed (`custom_gradient`, ...), whether it may hold a
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
    _texts[path] = (stamp, hashlib.sha256(data).hexdigest(), any(seed in text for seed in _SEEDS), files.may_forget_decorator(text),
                    _imported_modules(text))
    return _texts[path][1:]


def module_path(importer: str, level: int, dotted: str, isfile: Callable[[str], bool] = os.path.isfile) -> str | None:
    """The project file `dotted` names for a module at `importer` (relative imports from its
    package, absolute ones from the directory above its top package and from its own), or None.
    `isfile`: `os.path.isfile`, or the index's cached listings (the same answer, fewer stats)."""
    parts = [p for p in dotted.split(".") if p]
    here = os.path.dirname(os.path.abspath(importer))
    if level:
        base = here
        for _ in range(level - 1):
            base = os.path.dirname(base)
        return _module_file(base, parts, isfile)
    for root in _roots(here, isfile):
        found = _module_file(root, parts, isfile)
        if found is not None:
            return found
    return None


def _module_file(base: str, parts: list[str], isfile: Callable[[str], bool] = os.path.isfile) -> str | None:
    target = os.path.join(base, *parts)
    for candidate in (target + ".py", os.path.join(target, "__init__.py")):
        if isfile(candidate):
            return candidate
    return None


def _roots(directory: str, isfile: Callable[[str], bool] = os.path.isfile) -> list[str]:
    """Where absolute imports of the project resolve: the directory above the top package the
    importer is in, and the importer's own directory."""
    top = directory
    while isfile(os.path.join(top, "__init__.py")) and os.path.dirname(top) != top:
        top = os.path.dirname(top)
    return [top] if top == directory else [top, directory]
