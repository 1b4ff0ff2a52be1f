"""`Walker.walk` is `node.visit(visitor)` without rebuilding nodes: the same nodes, in the same
order, the same visit/leave calls, the same pruning when a visit returns False. Checked on every
fixture, every rule example and the modules of the installed TensorFlow that hold custom
gradients (real code with every statement kind)."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from cglint.cstwalk import _TOKENS, Walker, child_fields, parents
from cglint.rules import ALL_RULES

ROOT = Path(__file__).resolve().parents[1]


def _corpus() -> list[tuple[str, str]]:
    out = [(p.name, p.read_text()) for p in sorted(ROOT.glob("fixtures/**/*.py"))]
    out += [(f"{r.code}-{i}", code) for r in ALL_RULES for i, code in enumerate(r.INVALID + r.VALID)]
    try:
        import importlib.util

        spec = importlib.util.find_spec("tensorflow")
        tf_root = Path(spec.origin).parent if spec and spec.origin else None
    except (ImportError, ValueError):
        tf_root = None
    if tf_root is not None:
        for name in ("python/ops/custom_gradient.py", "python/ops/math_grad.py", "python/ops/nn_ops.py",
                     "python/eager/backprop.py", "python/ops/control_flow_ops.py"):
            path = tf_root / name
            if path.exists():
                out.append((name, path.read_text()))
    return out


CORPUS = _corpus()


class Recorder(Walker):
    """Records every non-token node it enters and leaves; prunes under lambdas (False)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:  # libcst's path
        if type(node) in _TOKENS:
            return True
        self.events.append(("visit", id(node)))
        return not isinstance(node, cst.Lambda)

    def on_leave(self, node: cst.CSTNode) -> None:
        if type(node) not in _TOKENS:
            self.events.append(("leave", id(node)))


def _fast_recorder() -> Walker:
    """The same recorder written as visit_X/leave_X methods, for every non-token node class."""
    classes = {c for c in vars(cst).values() if isinstance(c, type) and issubclass(c, cst.CSTNode)
               and not c.__name__.startswith("Base") and c not in _TOKENS}
    ns: dict = {"events": None}

    def make(name: str, prune: bool):
        def visit(self, node):
            self.events.append(("visit", id(node)))
            return False if prune else None

        def leave(self, node):
            self.events.append(("leave", id(node)))

        return visit, leave

    for c in classes:
        v, l = make(c.__name__, c is cst.Lambda)
        ns[f"visit_{c.__name__}"], ns[f"leave_{c.__name__}"] = v, l
    cls = type("FastRecorder", (Walker,), ns)
    obj = cls()
    obj.events = []
    return obj


@pytest.mark.parametrize("name,source", CORPUS, ids=[n for n, _ in CORPUS])
def test_walk_visits_what_libcst_visits(name, source):
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        pytest.skip("not parseable by libcst (a CG000 example)")
    slow = Recorder()
    module.visit(slow)
    fast = _fast_recorder()
    fast.walk(module)
    assert len(fast.events) == len(slow.events)
    assert fast.events == slow.events


@pytest.mark.parametrize("name,source", CORPUS[::7], ids=[n for n, _ in CORPUS[::7]])
def test_parents_are_libcsts_parents(name, source):
    from libcst.metadata import MetadataWrapper, ParentNodeProvider

    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        pytest.skip("not parseable by libcst (a CG000 example)")
    slow = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ParentNodeProvider)
    fast = parents(module)
    expected = {id(n): id(p) for n, p in slow.items() if type(n) not in _TOKENS and not _under_token(n, slow)}
    assert {id(n): id(p) for n, p in fast.items()} == expected


def _under_token(node, table) -> bool:
    while node in table:
        node = table[node]
        if type(node) in _TOKENS:
            return True
    return False


def test_child_order_is_source_order():
    # A def's decorators come before its name (libcst's order, not the dataclass's).
    order = child_fields(cst.FunctionDef)
    assert order.index("decorators") < order.index("name") < order.index("params") < order.index("body")
    assert child_fields(cst.IfExp).index("body") < child_fields(cst.IfExp).index("test")


@pytest.mark.parametrize("name,source", CORPUS[::7], ids=[n for n, _ in CORPUS[::7]])
def test_a_calls_parent_from_its_scope_is_its_parent_in_the_module(name, source):
    """`ModuleModel.parent` answers a call from its scope's subtree: the module's answer."""
    from cglint.model import ModuleModel

    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        pytest.skip("not parseable by libcst (a CG000 example)")
    model = ModuleModel(module)
    asked = [(call, model.parent(call)) for call, _ in model.all_calls]
    table = parents(module)
    assert all(found is table.get(call) for call, found in asked)
