"""A read-only walk of a libcst tree, several times faster than `node.visit(visitor)`.

libcst's `visit` rebuilds every node it passes (`_visit_and_replace_children` calls each node's
constructor, with its validation) and descends into every whitespace, comma and parenthesis
node: for the model's one walk of a module that is most of a lint's time. The model's visitors
only read, so `Walker.walk` visits the same nodes in the same order and calls the same
`visit_X`/`leave_X` methods, without rebuilding anything, and skips the token nodes
(whitespace, comments, parentheses, operators, commas) a visitor has no method for.

The order of a node's children is libcst's own: read once per node class from the field names
its `_visit_and_replace_children` passes to libcst's `visit_*` helpers, in the order it passes
them (source order: a def's decorators before its name). `tests/test_cstwalk.py` checks the walk
against `node.visit` on the project's fixtures and examples.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from typing import Any, Callable

import libcst as cst
from libcst._nodes import op as _op
from libcst._nodes import whitespace as _ws

_HELPERS = frozenset({"visit_required", "visit_optional", "visit_sentinel", "visit_iterable", "visit_sequence",
                      "visit_body_iterable", "visit_body_sequence"})

# Nodes that hold only whitespace or punctuation: nothing the model reads can be under them.
_TOKENS: frozenset[type] = frozenset(
    cls for module in (_op, _ws) for cls in vars(module).values()
    if isinstance(cls, type) and issubclass(cls, cst.CSTNode)
) | {cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace,
     cst.RightCurlyBrace, cst.Asynchronous, cst.ImportStar}

_fields: dict[type, tuple[str, ...]] = {}


def child_fields(cls: type) -> tuple[str, ...]:
    """The fields of `cls` libcst visits, in the order it visits them."""
    found = _fields.get(cls)
    if found is None:
        names: list[str] = []
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(cls._visit_and_replace_children)))  # type: ignore[attr-defined]
        except (OSError, TypeError, SyntaxError):  # no source to read: the declared order
            found = _fields[cls] = tuple(f.name for f in dataclasses.fields(cls))
            return found

        class Calls(ast.NodeVisitor):
            def visit_Call(self, node: ast.Call) -> None:
                self.generic_visit(node)  # arguments are evaluated before the call
                func = node.func
                if (isinstance(func, ast.Name) and func.id in _HELPERS and len(node.args) >= 2
                        and isinstance(node.args[1], ast.Constant) and node.args[1].value not in names):
                    names.append(node.args[1].value)

        Calls().visit(tree)
        found = _fields[cls] = tuple(names)
    return found


def _is_real(fn: Any) -> bool:
    return fn is not None and not getattr(fn, "_is_no_op", False)


# id of a field value's type -> what it is to the walk: a node, a sequence of them, or neither
# (a string, None, a sentinel). `isinstance(value, cst.CSTNode)` goes through ABCMeta.
_NODE, _SEQUENCE, _OTHER = 1, 2, 3  # all true: `kinds.get(t) or _kind(t)`
_kinds: dict[type, int] = {tuple: _SEQUENCE, list: _SEQUENCE}


def _kind(cls: type) -> int:
    kind = _kinds.get(cls)
    if kind is None:
        kind = _kinds[cls] = _NODE if issubclass(cls, cst.CSTNode) else _OTHER
    return kind


class Walker(cst.CSTVisitor):
    """A `CSTVisitor` whose `walk(node)` is `node.visit(self)` without the rebuilding."""

    # node class -> (visit_X, leave_X, skip the node, the fields to descend into)
    _dispatch: dict[type, tuple[Callable | None, Callable | None, bool, tuple[str, ...]]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._dispatch = {}

    def _methods(self, node_cls: type) -> tuple[Callable | None, Callable | None, bool, tuple[str, ...]]:
        table = type(self)._dispatch
        entry = table.get(node_cls)
        if entry is None:
            name = node_cls.__name__
            visit = getattr(type(self), f"visit_{name}", None)
            leave = getattr(type(self), f"leave_{name}", None)
            visit, leave = (visit if _is_real(visit) else None), (leave if _is_real(leave) else None)
            # A token node with no method of this visitor: skipped with everything under it.
            skip = node_cls in _TOKENS and visit is None and leave is None
            entry = table[node_cls] = (visit, leave, skip, child_fields(node_cls))
        return entry

    def walk(self, node: cst.CSTNode) -> None:
        table = type(self)._dispatch
        visit, leave, skip, fields = table.get(type(node)) or self._methods(type(node))
        if skip:
            return
        if visit is None or visit(self, node) is not False:
            kinds = _kinds
            for field in fields:
                value = getattr(node, field)
                kind = kinds.get(type(value)) or _kind(type(value))
                if kind == _NODE:
                    entry = table.get(type(value))
                    if entry is None or not entry[2]:  # a token under nothing of ours: not entered
                        self.walk(value)
                elif kind == _SEQUENCE:
                    for item in value:
                        entry = table.get(type(item))
                        if entry is None or not entry[2]:
                            if (kinds.get(type(item)) or _kind(type(item))) == _NODE:
                                self.walk(item)
        if leave is not None:
            leave(self, node)


def nodes(root: cst.CSTNode):
    """Every node under `root` (itself included) but whitespace and punctuation, fast: an
    iterative walk of `child_fields` (`node.children` runs a visitor per node)."""
    stack = [root]
    kinds = _kinds
    while stack:
        node = stack.pop()
        yield node
        for field in child_fields(type(node)):
            value = getattr(node, field)
            kind = kinds.get(type(value)) or _kind(type(value))
            if kind == _NODE:
                if type(value) not in _TOKENS:
                    stack.append(value)
            elif kind == _SEQUENCE:
                stack.extend(item for item in value if type(item) not in _TOKENS
                             and (kinds.get(type(item)) or _kind(type(item))) == _NODE)


def parents(root: cst.CSTNode) -> dict[cst.CSTNode, cst.CSTNode]:
    """Each node's parent under `root`, whitespace and punctuation left out: what libcst's
    `ParentNodeProvider` answers for every other node, without its rebuilding visit (which cost
    a third of a lint wherever a rule asked for one parent)."""
    out: dict[cst.CSTNode, cst.CSTNode] = {}
    stack = [root]
    kinds = _kinds
    while stack:
        node = stack.pop()
        for field in child_fields(type(node)):
            value = getattr(node, field)
            kind = kinds.get(type(value)) or _kind(type(value))
            if kind == _NODE:
                if type(value) not in _TOKENS:
                    out[value] = node
                    stack.append(value)
            elif kind == _SEQUENCE:
                for item in value:
                    if type(item) not in _TOKENS and (kinds.get(type(item)) or _kind(type(item))) == _NODE:
                        out[item] = node
                        stack.append(item)
    return out
