"""cglint's directives on a custom-gradient function, and the one parser of them (the rules
through the model, `--runtime`'s plan and `cglint trace` all ask here):

    # cglint: intentional             the gradient differs from the derivative on purpose
    # cglint: example x=normal(4, 3)  the inputs `--runtime` checks the function at

Both apply to the function when written in the comment lines directly above it (above its
decorators) or at the end of one of its decorator lines or its `def` line. `intentional` also
applies at the end of a line a finding on the gradient points at, where `# noqa` would go: a
`return` statement of the forward or of its grad fn, and the grad fn's `def` line.

The comments come from where each caller has them, in the same places: a libcst tree (the
model, `of_tree`), or the file's lines (`of_lines`: the runtime's plan, and trace through
`linecache` and the code objects it sees, `of_code`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence

if TYPE_CHECKING:
    import libcst as cst

INTENTIONAL = "# cglint: intentional"  # the line (or end of line) a message tells users to add
_INTENTIONAL = re.compile(r"#\s*cglint:\s*intentional\b")
_EXAMPLE = re.compile(r"#\s*cglint:\s*example\s(?P<spec>.*)")  # the spec: the rest, stripped


@dataclass(frozen=True)
class Directives:
    intentional: bool = False
    example: str | None = None  # the input spec (cglint.runtime.spec), never evaluated


def parse(function_comments: Iterable[str], flagged_comments: Iterable[str] = ()) -> Directives:
    """The directives in comments (or whole lines: a directive is read from its `#`). The
    function's own (above it, on its decorator and `def` lines) may hold both; the flagged
    lines' only `intentional`. The first example wins."""
    intentional, example = False, None
    for text in function_comments:
        intentional = intentional or bool(_INTENTIONAL.search(text))
        if example is None and (m := _EXAMPLE.search(text)) and m.group("spec").strip():
            example = m.group("spec").strip()
    intentional = intentional or any(_INTENTIONAL.search(text) for text in flagged_comments)
    return Directives(intentional, example)


def with_directive(line: str) -> str:
    """`line` (a flagged source line) as it reads with the directive at its end."""
    return f"{line.rstrip()}  {INTENTIONAL}"


# ---- from a file's lines --------------------------------------------------------------------


def comments_above(lines: Sequence[str], first: int) -> list[str]:
    """The comment lines directly above line `first` (1-based), nearest first."""
    out, i = [], first - 2
    while i >= 0 and lines[i].strip().startswith("#"):
        out.append(lines[i])
        i -= 1
    return out


def of_lines(lines: Sequence[str], first: int, def_line: int, flagged: Iterable[int] = ()) -> Directives:
    """For a function whose first decorator (or `def`) is line `first` and whose `def` is line
    `def_line` (1-based), with the lines findings on its gradient point at (`flagged`)."""
    own = comments_above(lines, first) + list(lines[first - 1:max(first, def_line)])
    return parse(own, (lines[n - 1] for n in flagged if 1 <= n <= len(lines)))


def of_code(lines: Sequence[str], code) -> Directives:
    """For a function by its code object (`cglint trace`): its decorator and `def` lines, and
    the lines of its `return` statements and of the functions defined in it (a grad fn: its
    `def` and `return` lines)."""
    first = def_line = code.co_firstlineno
    for n in range(first, min(first + 40, len(lines)) + 1):  # past the decorators to the `def`
        if lines[n - 1].lstrip().startswith(("def ", "async def ")):
            def_line = n
            break
    flagged = set(_return_lines(code))
    for inner in code.co_consts:
        if hasattr(inner, "co_firstlineno") and hasattr(inner, "co_code"):
            flagged.add(inner.co_firstlineno)
            flagged |= set(_return_lines(inner))
    return of_lines(lines, first, def_line, sorted(flagged))


def _return_lines(code) -> Iterable[int]:
    """The lines of a code object's `return` statements (all their lines, where Python tells)."""
    import dis

    for ins in dis.get_instructions(code):
        if ins.opname.startswith("RETURN"):
            positions = getattr(ins, "positions", None)  # Python 3.11+: the statement's lines
            if positions is not None and positions.lineno is not None:
                yield from range(positions.lineno, (positions.end_lineno or positions.lineno) + 1)
            elif ins.starts_line:
                yield ins.starts_line


# ---- from a libcst tree ---------------------------------------------------------------------


def suggestion(module: cst.Module, forward: cst.CSTNode, grad_fn: cst.CSTNode, returned: cst.CSTNode | None) -> str:
    """Where to write `intentional` for a finding on `returned` (a grad fn's `return` or its
    value), as a message says it: the flagged line as it reads with the directive at its end,
    or, where that line cannot be shown on one line, the line to add above the forward."""
    import libcst as cst

    for node in flagged_nodes(forward, [grad_fn]):
        if not isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) or returned is None:
            continue
        ret = next((s for s in node.body if isinstance(s, cst.Return)), None)
        if ret is None or (returned is not ret and returned is not ret.value):
            continue
        text = module.code_for_node(ret).strip()
        if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and "\n" not in text:
            comment = node.trailing_whitespace.comment
            shown = f"{text}  {comment.value}" if comment else text
            return f"end the line with it: `{with_directive(shown)}`"
    name = f" `def {forward.name.value}`" if isinstance(forward, cst.FunctionDef) else " the function"
    return f"add the line `{INTENTIONAL}` above{name}"


def flagged_nodes(forward: cst.CSTNode, grad_fns: Iterable[cst.CSTNode] = ()) -> list[cst.CSTNode]:
    """Where findings on a forward's gradient point, for `intentional` at the end of their
    line: the `return` statements (simple statement lines) of the forward and of its grad fns
    defined with `def`, and those grad fns themselves (their `def` line)."""
    import libcst as cst

    out: list[cst.CSTNode] = []
    for fn in [forward, *(g for g in grad_fns if g is not forward)]:
        if not isinstance(fn, cst.FunctionDef):
            continue
        if fn is not forward:
            out.append(fn)
        stack: list[cst.CSTNode] = [fn.body]
        while stack:
            node = stack.pop()
            if isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                if any(isinstance(s, cst.Return) for s in node.body):
                    out.append(node)
                continue
            if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                continue  # a nested function's returns are its own
            stack.extend(c for c in node.children if isinstance(c, _statement_parts()))
    return out


def of_tree(forward: cst.CSTNode, module: cst.Module, grad_fns: Iterable[cst.CSTNode] = ()) -> Directives:
    """For a forward (a `FunctionDef`; a lambda has no lines of its own) and its grad fns (the
    nodes, defs or lambdas), from the comments libcst keeps in the tree."""
    import libcst as cst

    if not isinstance(forward, cst.FunctionDef):
        return Directives()
    above = []
    lines = [*module.header, *forward.leading_lines] if module.body and module.body[0] is forward \
        else forward.leading_lines
    for line in reversed(lines):
        if line.comment is None:
            break
        above.append(line.comment.value)
    own = [*above, *(d.trailing_whitespace.comment.value for d in forward.decorators if d.trailing_whitespace.comment),
           *(line.comment.value for line in forward.lines_after_decorators if line.comment), *_header_comments(forward)]
    flagged = []
    for node in flagged_nodes(forward, grad_fns):
        if isinstance(node, cst.FunctionDef):
            flagged += _header_comments(node)
        elif node.trailing_whitespace.comment:
            flagged.append(node.trailing_whitespace.comment.value)
    return parse(own, flagged)


def _header_comments(fn: cst.FunctionDef) -> list[str]:
    import libcst as cst

    header = fn.body.header if isinstance(fn.body, cst.IndentedBlock) else fn.body.trailing_whitespace
    return [header.comment.value] if header.comment else []


@functools.lru_cache(maxsize=1)
def _statement_parts() -> tuple[type, ...]:
    """The node types a walk for `return` statements descends through."""
    import libcst as cst

    return (cst.BaseSuite, cst.BaseStatement, cst.BaseCompoundStatement, cst.Else, cst.ExceptHandler,
            cst.ExceptStarHandler, cst.Finally, cst.MatchCase)
