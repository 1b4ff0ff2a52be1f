"""libcst's `PositionProvider` codegen pass, cheaper, with the same ranges.

Positions are a codegen pass over the statements holding findings; on a module full of them
it is a tenth of the lint. libcst's state pays a generator-based context manager per node
(`record_syntactic_position`), a regex split per token and a `CodePosition` per node on entry;
this state does the same bookkeeping with a plain context object, a newline test first and a
tuple on entry. tests/test_positions.py checks the ranges against libcst's own provider.
"""

from __future__ import annotations

import re
from typing import Any

from libcst import CSTNode
from libcst.metadata import CodePosition, CodeRange
from libcst.metadata.position_provider import PositionProvidingCodegenState

NEWLINE_RE = re.compile(r"\r\n?|\n")  # libcst's line breaks in generated code


class _Syntactic:
    """`with state.record_syntactic_position(node, start_node=..., end_node=...)`."""

    __slots__ = ("state", "node", "start_node", "end_node", "start")

    def __init__(self, state: FastPositionState, node: CSTNode, start_node: Any, end_node: Any) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node

    def __enter__(self) -> None:
        self.start = (self.state.line, self.state.column)

    def __exit__(self, *exc: object) -> None:
        state = self.state
        computed = state.provider._computed
        start = computed[self.start_node].start if self.start_node is not None else CodePosition(*self.start)
        end = computed[self.end_node].end if self.end_node is not None else CodePosition(state.line, state.column)
        computed[self.node] = CodeRange(start, end)


class FastPositionState(PositionProvidingCodegenState):
    def _update_position(self, value: str) -> None:
        if "\n" not in value and "\r" not in value:
            self.column += len(value)
            return
        segments = NEWLINE_RE.split(value)
        self.line += len(segments) - 1
        self.column = len(segments[-1])

    def before_codegen(self, node: CSTNode) -> None:
        self._stack.append((self.line, self.column))  # type: ignore[arg-type]

    def after_codegen(self, node: CSTNode) -> None:
        start = self._stack.pop()
        computed = self.provider._computed  # type: ignore[attr-defined]
        if node not in computed:  # a syntactic position recorded inside wins, as in libcst
            computed[node] = CodeRange(CodePosition(*start), CodePosition(self.line, self.column))  # type: ignore[misc]

    def record_syntactic_position(self, node: CSTNode, *, start_node: CSTNode | None = None,
                                  end_node: CSTNode | None = None) -> Any:
        return _Syntactic(self, node, start_node, end_node)
