"""The project index: the modules of the project a linted file imports, so that a forward in one
file and the variables it reads in another are one program.

`from .state import kernel`, `from pkg.state import kernel` and `from pkg import kernel` (an
`__init__` re-export) are resolved to the project's own files: relative imports from the
importer's package, absolute ones from the directory above its top package and from its own
directory (a script next to its helpers). Installed packages are never read. Each module is
read, hashed and modelled once per content (a changed file is read again; an unchanged one is
reused by every lint in the process), with bounds on file size, re-export chains and the number
of modules kept. Imported modules are modelled for their module-level bindings only (no sites):
that also keeps an import cycle from recursing.

The same file gives the same answer alone or in its tree: whoever lints it (the command line,
the language server, flake8, stdin with `--stdin-filename`) reads the modules it imports from
disk. The modules a result depends on, with their content hashes, go with it to the cache, so a
change to one of them invalidates the entry (`FileResult.dependencies`).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from cglint.quickscan import module_path

if TYPE_CHECKING:
    from cglint.model.module import ModuleModel
    from cglint.model.scopes import Binding

# `(level, module, name)`: `from ..a.b import c` is (2, "a.b", "c"); `import a.b as m` is (0, "a.b", None).
ImportSpec = tuple[int, str, "str | None"]

MAX_BYTES = 1_000_000  # a larger module is not read for its bindings
MAX_CHAIN = 4  # re-exports followed (`__init__` importing from a submodule, ...)
MAX_MODULES = 256  # models kept per process


class Project:
    """Imported modules, modelled once per (path, content hash)."""

    def __init__(self, aliases: tuple[str, ...] = ()) -> None:
        self.aliases = aliases
        self._models: OrderedDict[tuple[str, str], ModuleModel | None] = OrderedDict()
        self._lock = threading.Lock()  # the language server lints on more than one thread
        self.epoch = 0  # lints begun: answers project modules remember hold for one (`ModuleModel.memo`)

    # -- files ---------------------------------------------------------------------------

    def module_path(self, importer: str, level: int, dotted: str) -> str | None:
        """The project file `dotted` names for a module at `importer`, or None."""
        return module_path(importer, level, dotted)

    def model(self, path: str) -> tuple[ModuleModel, str] | None:
        """The module at `path` modelled for its bindings, and its content hash."""
        from cglint import files

        try:  # the guarded reader: a module named by the tree may be a FIFO or a link to /dev/zero
            data = files.read_bytes(path, MAX_BYTES, what="a module the linted file imports")[0]
        except (OSError, ValueError):
            return None
        digest = hashlib.sha256(data).hexdigest()
        key = (path, digest)
        with self._lock:
            if key in self._models:
                self._models.move_to_end(key)
                model = self._models[key]
                return (model, digest) if model is not None else None
        model = _parse(data, path, self)
        with self._lock:
            self._models[key] = model
            while len(self._models) > MAX_MODULES:
                self._models.popitem(last=False)
        return (model, digest) if model is not None else None

    # -- names ---------------------------------------------------------------------------

    def symbol(self, importer: str, spec: ImportSpec, seen: dict[str, str],
               depth: int = 0) -> list[tuple[ModuleModel, Binding]]:
        """What `from <module> import <name>` binds, as module-level bindings of the project
        module that defines it (followed through re-exports). `seen` collects the files read,
        with their content hashes."""
        level, module, name = spec
        if name is None or depth > MAX_CHAIN:
            return []
        path = self.module_path(importer, level, module)
        loaded = self.model(path) if path is not None else None
        if loaded is None:
            return []
        model, digest = loaded
        seen[path] = digest  # type: ignore[index]
        values = model.root.visible(name, None)
        if values:
            return [(model, v) for v in values if v is not None]
        again = model.import_spec(name)
        if again is not None:  # a re-export: `from .state import kernel` in `__init__.py`
            return self.symbol(path, again, seen, depth + 1)  # type: ignore[arg-type]
        return []


    def module_named(self, importer: str, spec: ImportSpec, seen: dict[str, str]) -> ModuleModel | None:
        """The project module an import binds to a name, when it is a module rather than a
        name defined in one: `import mypkg.ops as ops`, `from mypkg import ops`, `from . import
        ops`, `import mypkg` (its `__init__`)."""
        level, module, name = spec
        dotted = module if name is None else f"{module}.{name}" if module else name
        path = self.module_path(importer, level, dotted)
        loaded = self.model(path) if path is not None else None
        if loaded is None:
            return None
        seen[path] = loaded[1]  # type: ignore[index]
        return loaded[0]

    def sibling_models(self, path: str, words: tuple[str, ...], seen: dict[str, str],
                       limit: int = 32) -> list[ModuleModel]:
        """The modules of `path`'s directory whose text mentions one of `words` (where a
        registry defined in one module is filled by the others), at most `limit` of them. Every
        file read goes to `seen`: one that starts mentioning them changes the answer."""
        from cglint import files

        directory = os.path.dirname(os.path.abspath(path))
        try:
            names = sorted(n for n in os.listdir(directory) if n.endswith(".py"))[:4 * limit]
        except OSError:
            return []
        out: list[ModuleModel] = []
        for name in names:
            candidate = os.path.join(directory, name)
            if candidate == os.path.abspath(path):
                continue
            try:
                text = files.read_bytes(candidate, MAX_BYTES, what="a module of the linted file's package")[0]
            except (OSError, ValueError):
                continue
            seen[candidate] = hashlib.sha256(text).hexdigest()
            if any(w.encode() in text for w in words):
                loaded = self.model(candidate)
                if loaded is not None:
                    out.append(loaded[0])
                    if len(out) >= limit:
                        break
        return out


def _parse(data: bytes, path: str, project: Project) -> ModuleModel | None:
    from cglint import cstparse
    from cglint import source as pysource
    from cglint.model.module import ModuleModel

    try:
        text = pysource.decode(data).text
        tree, error = pysource.parse(text)
        if tree is None:
            return None
        module = cstparse.parse_module(pysource.analysis_text(text, tree), tree)
        return ModuleModel(module, project.aliases, project=project, path=path, sites=False)
    except Exception:  # noqa: BLE001 - a module that cannot be read says nothing, never breaks the lint
        return None


_projects: dict[tuple[str, ...], Project] = {}


def project_for(aliases: tuple[str, ...]) -> Project:
    """The process's project index for these TensorFlow aliases (configuration)."""
    found = _projects.get(aliases)
    if found is None:
        found = _projects[aliases] = Project(aliases)
    return found
