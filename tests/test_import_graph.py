"""cglint's modules import one another without a cycle: the engine lints a source, notebooks and
fixes build on the engine, formatters on the report context, and nothing imports back up.

Edges are read statically from every `import` statement of every module under `cglint/`, at
module level and deferred inside functions alike (a deferred import is still a dependency);
imports under `if TYPE_CHECKING:` are annotations only and do not count, nor does the implicit
import of a submodule's parent package."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "cglint"


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports(tree: ast.AST):
    for node in ast.iter_child_nodes(tree):
        if _is_type_checking(node):
            yield from (n for child in node.orelse for n in [child, *_imports(child)] if isinstance(n, (ast.Import, ast.ImportFrom)))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _imports(node)


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the modules of the same package it imports."""
    modules = _modules(root)

    def owner(dotted: str) -> str | None:  # the longest prefix that is one of the modules
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            edges.update(t for t in map(owner, targets) if t is not None and t != name)
        graph[name] = edges
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return exc.args[1]
    return None


def package_graph(graph: dict[str, set[str]], packages: set[str]) -> dict[str, set[str]]:
    """The same edges between sub-packages (`cglint.model`, `cglint.runtime`, ...); a module
    outside them (`cglint.engine`) is a node of its own, and the root package is no node."""

    def node(module: str) -> str:
        head = ".".join(module.split(".")[:2])
        return head if head in packages else module

    out: dict[str, set[str]] = {}
    for module, edges in graph.items():
        if "." not in module:
            continue
        out.setdefault(node(module), set()).update(node(e) for e in edges if "." in e and node(e) != node(module))
    return out


def _subpackages(root: Path) -> set[str]:
    return {f"{root.name}.{d.name}" for d in root.iterdir() if (d / "__init__.py").is_file()}


def test_cglint_packages_have_no_cycle():
    """Packages depend one way: the gradient-check core (`cglint.gradcheck`) on nothing of
    cglint's; the evaluator (`cglint.samples`), the runtime and trace on it; the evaluator on the
    model, never the other way; neither the model nor trace on the runtime."""
    graph = package_graph(import_graph(PACKAGE), _subpackages(PACKAGE))
    assert cycle(graph) is None, " -> ".join(cycle(graph))
    assert graph["cglint.gradcheck"] == set(), graph["cglint.gradcheck"]
    assert "cglint.gradcheck" in graph["cglint.samples"] and "cglint.gradcheck" in graph["cglint.trace"]
    assert "cglint.model" in graph["cglint.samples"] and "cglint.samples" not in graph["cglint.model"]
    assert "cglint.runtime" not in graph["cglint.model"] and "cglint.runtime" not in graph["cglint.trace"]


def test_a_package_cycle_is_found(tmp_path):
    """Two sub-packages whose modules import each other, acyclic module by module, are a cycle."""
    pkg = tmp_path / "pkg"
    for sub in ("a", "b"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("from pkg.b import y\n")
    (pkg / "b" / "y.py").write_text("")
    (pkg / "b" / "z.py").write_text("from pkg.a import w\n")
    (pkg / "a" / "w.py").write_text("")
    graph = import_graph(pkg)
    assert cycle(graph) is None
    assert sorted(set(cycle(package_graph(graph, _subpackages(pkg))))) == ["pkg.a", "pkg.b"]
    (pkg / "b" / "z.py").write_text("")
    assert cycle(package_graph(import_graph(pkg), _subpackages(pkg))) is None


def test_cglint_imports_have_no_cycle():
    graph = import_graph(PACKAGE)
    assert {"cglint.engine", "cglint.notebook", "cglint.fix", "cglint.model.module"} <= graph.keys()
    assert "cglint.notebook" in graph["cglint.engine"] and "cglint.engine" in graph["cglint.fix"]
    assert cycle(graph) is None, " -> ".join(cycle(graph))


@pytest.mark.parametrize("deferred", [False, True])
def test_a_cycle_is_found(tmp_path, deferred):
    """The check fails on a cycle, whether the import back is at module level or in a function,
    and ignores one under TYPE_CHECKING."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    back = "def f():\n    from . import a\n" if deferred else "import pkg.a\n"
    (pkg / "b.py").write_text(back)
    assert sorted(set(cycle(import_graph(pkg)))) == ["pkg.a", "pkg.b"]
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n")
    assert cycle(import_graph(pkg)) is None


def private_imports(root: Path) -> list[str]:
    """`from cglint.x import _name` (or a relative one): one module reaching into another's
    private names, which couples them where a public query should."""
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] == root.name):
                out += [f"{path.relative_to(root.parent)}:{node.lineno}: {a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    return out


def test_no_module_imports_another_modules_private_names(tmp_path):
    assert private_imports(PACKAGE) == []
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("from pkg.b import _hidden, shown\nfrom .b import __version__\n")
    assert [line.split(": ")[1] for line in private_imports(pkg)] == ["_hidden"]


def rule_walks(path: Path) -> list[str]:
    """What in a rule module walks the syntax tree itself instead of asking the model: libcst's
    matchers, cglint's walkers, `.children`, a visitor class. Transformers that build a fix's
    new code are not analysis and are allowed."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            out += [f"imports {n}" for n in names if n in ("libcst.matchers", "cglint.cstwalk")]
            if isinstance(node, ast.ImportFrom) and node.module == "libcst":
                out += [f"imports libcst.{a.name}" for a in node.names if a.name == "matchers"]
        elif isinstance(node, ast.Attribute) and node.attr in ("children", "findall", "CSTVisitor"):
            out.append(f"line {node.lineno}: .{node.attr}")
    return out


def test_rules_ask_the_model_and_never_walk_the_tree(tmp_path):
    rules = sorted((PACKAGE / "rules").glob("cg*.py"))
    assert len(rules) >= 20
    assert {p.name: rule_walks(p) for p in rules if rule_walks(p)} == {}
    bad = tmp_path / "cg999_bad.py"
    bad.write_text("import libcst.matchers as m\nclass V(cst.CSTVisitor):\n    pass\ndef f(n):\n    return n.children\n")
    assert rule_walks(bad) == ["imports libcst.matchers", "line 2: .CSTVisitor", "line 5: .children"]


def private_attribute_uses(root: Path) -> list[str]:
    """`engine._helper` where `engine` is a module of the package a file imports: the same
    coupling as importing the private name."""
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == root.name:
                modules |= {a.asname or a.name for a in node.names if not a.name[:1].isupper()}
            elif isinstance(node, ast.Import):
                modules |= {a.asname for a in node.names if a.asname and a.name.split(".")[0] == root.name}
        out += [f"{path.relative_to(root.parent)}:{n.lineno}: {n.value.id}.{n.attr}" for n in ast.walk(tree)
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in modules
                and n.attr.startswith("_") and not n.attr.startswith("__")]
    return out


def test_no_module_uses_another_modules_private_attributes(tmp_path):
    assert private_attribute_uses(PACKAGE) == []
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("from pkg import engine\nimport pkg.noqa as nq\nengine._run()\nnq.NOQA\nnq._x\n")
    assert sorted(line.split(": ")[1] for line in private_attribute_uses(pkg)) == ["engine._run", "nq._x"]
