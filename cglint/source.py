"""Source text as Python sees it: decoding (PEP 263), line breaks, and the text libcst parses.

- Python breaks lines at `\\r\\n`, `\\r` and `\\n` only. `str.splitlines` also breaks at
  `\\x0b \\x0c \\x1c \\x1d \\x1e \\x85 \\u2028 \\u2029`, which shifts every later line number:
  `split_lines` and `line_col` count as Python (and libcst) do.
- `decode` reads bytes as Python does: a BOM or a `# -*- coding: ... -*-` cookie, else UTF-8.
- `parse` is Python's own parser: it decides what is a syntax error, and it guards libcst,
  whose native parser overflows its stack (a segmentation fault) on nesting Python refuses.
- `analysis_text` is what libcst is given: the source with pathological expressions (hundreds
  of levels deep, thousands of nodes, huge literals) replaced by a same-length `(_ ... )`
  stub. libcst's parser is superlinear in nesting depth (1,000 nested `[` take ~9 s) and
  rules never need such an expression's inside, so every line and column stays where it was.
  Fixes never write a stubbed span (see `cglint.fix`).
"""

from __future__ import annotations

import ast
import codecs
import io
import re
import tokenize
import warnings
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass

LINE_BREAK = re.compile(r"\r\n|\r|\n")

# Beyond these an expression is replaced by a stub in the text libcst parses.
MAX_EXPRESSION_HEIGHT = 100
MAX_EXPRESSION_NODES = 5000
MAX_LITERAL_CHARS = 4000
_GATE_CHARS = 400  # a statement shorter than this cannot hold such an expression


def split_lines(text: str, keepends: bool = False) -> list[str]:
    """`str.splitlines` with Python's line breaks only."""
    out = []
    start = 0
    for match in LINE_BREAK.finditer(text):
        out.append(text[start : match.end() if keepends else match.start()])
        start = match.end()
    if start < len(text):
        out.append(text[start:])
    return out


def line_starts(text: str) -> list[int]:
    """Offset of the first character of each line (Python's line breaks)."""
    return [0, *(m.end() for m in LINE_BREAK.finditer(text))]


def line_col(text: str, offset: int, starts: list[int] | None = None) -> tuple[int, int]:
    """1-based (line, column) of `offset`, columns in code points."""
    starts = starts if starts is not None else line_starts(text)
    line = bisect_right(starts, offset)
    return line, offset - starts[line - 1] + 1


# ---- decoding --------------------------------------------------------------------------------


class UndecodableError(ValueError):
    pass


@dataclass(frozen=True)
class Decoded:
    text: str
    encoding: str  # the codec to write the text back with ("utf-8" for UTF-8 with or without BOM)
    bom: bool


def decode(data: bytes) -> Decoded:
    """Bytes to text as Python reads a module: BOM, else coding cookie, else UTF-8."""
    bom = data.startswith(codecs.BOM_UTF8)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:  # unknown codec, or a cookie that contradicts the BOM
        raise UndecodableError(str(exc)) from None
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        name = "UTF-8" if encoding in ("utf-8", "utf-8-sig") else encoding
        raise UndecodableError(f"not valid {name} (byte {exc.start})") from None
    except LookupError as exc:
        raise UndecodableError(str(exc)) from None
    return Decoded(text, "utf-8" if encoding == "utf-8-sig" else encoding, bom)


def encode(text: str, decoded: Decoded) -> bytes:
    """The inverse of `decode` (raises UnicodeEncodeError if the text no longer fits the codec)."""
    return (codecs.BOM_UTF8 if decoded.bom else b"") + text.encode(decoded.encoding)


# ---- Python's parser -------------------------------------------------------------------------


@dataclass(frozen=True)
class PythonError:
    message: str
    line: int
    column: int  # 1-based
    nesting: bool  # Python gives up on depth: libcst must not be run on this text


_NESTING = ("too many nested parentheses", "too many levels of indentation", "too complex",
            "too many statically nested blocks", "parser stack overflow")


def parse(text: str) -> tuple[ast.Module | None, PythonError | None]:
    """Python's parse of `text`: the tree, or why Python rejects it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes etc. are not ours to print
            return ast.parse(text), None
    except SyntaxError as exc:
        message = exc.msg or "invalid syntax"
        nesting = any(n in message for n in _NESTING)
        line = exc.lineno or 1
        column = _column(text, line, exc.offset) if exc.offset else 1
        return None, PythonError(message, line, column, nesting)
    except (RecursionError, MemoryError):
        return None, PythonError("nesting too deep (Python's parser gives up)", 1, 1, True)
    except ValueError as exc:  # "source code string cannot contain null bytes"
        return None, PythonError(str(exc), _nul_line(text), 1, False)


def _column(text: str, line: int, offset: int) -> int:
    """SyntaxError.offset counts characters on the line in 3.10+ (1-based)."""
    return max(1, offset)


def _nul_line(text: str) -> int:
    at = text.find("\0")
    return line_col(text, at)[0] if at >= 0 else 1


# ---- the text libcst parses ------------------------------------------------------------------


_NOT_STUBBED = (ast.Slice, ast.Starred, ast.FormattedValue)


_LONE_CR = re.compile(r"\r(?!\n)")


def analysis_text(text: str, tree: ast.Module) -> str:
    """`text` with lone CRs as `\\n` (libcst misplaces positions after a lone CR inside a
    string, and drops a final one) and pathological expressions replaced by same-length stubs
    (see the module doc). Usually `text` itself, at the cost of one pass over the long
    statements."""
    if "\r" in text:
        text = _LONE_CR.sub("\n", text)
    starts = line_starts(text)
    spans = []
    for stmt in _long_statements(tree, text, starts):
        for expr in _own_expressions(stmt):
            if _offset(text, starts, expr.end_lineno, expr.end_col_offset) - _offset(text, starts, expr.lineno, expr.col_offset) >= _GATE_CHARS:
                spans += _stub_spans(expr, text, starts)
    if not spans:
        return text
    out = []
    last = 0
    for start, end in sorted(spans):
        if start < last:  # inside a stub already taken
            continue
        out.append(text[last:start])
        out.append(_stub(text[start:end]))
        last = end
    out.append(text[last:])
    stubbed = "".join(out)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(stubbed)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text  # a stub in a place we did not foresee: parse the text as it is
    return stubbed


def _stub(span: str) -> str:
    inner = re.sub(r"[^\r\n]", " ", span[2:-1])
    return "(_" + inner + ")"


def _offset(text: str, starts: list[int], line: int | None, col_bytes: int | None) -> int:
    """Character offset of an ast position (ast columns count UTF-8 bytes)."""
    line = line or 1
    begin = starts[line - 1] if line - 1 < len(starts) else len(text)
    col_bytes = col_bytes or 0
    prefix = text[begin : begin + col_bytes]
    if prefix.isascii():
        return begin + col_bytes
    return begin + len(prefix.encode("utf-8")[:col_bytes].decode("utf-8", "ignore"))


def _long_statements(tree: ast.Module, text: str, starts: list[int]):
    """Statements (at any depth) whose own text is long enough to hold a pathological
    expression; a short compound statement's body is short too."""
    todo = list(tree.body)
    while todo:
        stmt = todo.pop()
        first = _offset(text, starts, stmt.lineno, stmt.col_offset)
        last = _offset(text, starts, stmt.end_lineno, stmt.end_col_offset)
        if last - first < _GATE_CHARS:
            continue
        yield stmt
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            for inner in getattr(stmt, name, None) or ():
                if isinstance(inner, ast.ExceptHandler) or type(inner).__name__ == "match_case":
                    todo.extend(inner.body)
                elif isinstance(inner, ast.stmt):
                    todo.append(inner)


def _own_expressions(stmt: ast.stmt):
    """The expressions of a statement itself (not of the statements in its body)."""
    for name, value in ast.iter_fields(stmt):
        if name in ("body", "orelse", "finalbody", "handlers", "cases"):
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, ast.expr):
                yield item
            elif isinstance(item, (ast.arguments, ast.withitem, ast.keyword, ast.alias)):
                yield from (n for n in ast.iter_child_nodes(item) if isinstance(n, ast.expr))
                if isinstance(item, ast.arguments):  # defaults and annotations
                    for a in [*item.posonlyargs, *item.args, *item.kwonlyargs, item.vararg, item.kwarg]:
                        if a is not None and a.annotation is not None:
                            yield a.annotation


def _stub_spans(root: ast.expr, text: str, starts: list[int]) -> list[tuple[int, int]]:
    """Post-order over `root`: a subtree that grows past the height or size limits becomes a
    stub, and counts as one node from there up."""
    spans: list[tuple[int, int]] = []
    height: dict[int, int] = {}
    size: dict[int, int] = {}
    stack: list[tuple[ast.AST, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if not done:
            stack.append((node, True))
            if not isinstance(node, ast.JoinedStr):  # f-string insides are not stubbed
                stack.extend((child, False) for child in ast.iter_child_nodes(node))
            continue
        children = [] if isinstance(node, ast.JoinedStr) else list(ast.iter_child_nodes(node))
        h = 1 + max((height.get(id(c), 0) for c in children), default=0)
        s = 1 + sum(size.get(id(c), 0) for c in children)
        if isinstance(node, ast.expr) and not isinstance(node, _NOT_STUBBED) and node.end_lineno is not None:
            start = _offset(text, starts, node.lineno, node.col_offset)
            end = _offset(text, starts, node.end_lineno, node.end_col_offset)
            literal = isinstance(node, (ast.Constant, ast.JoinedStr)) and end - start > MAX_LITERAL_CHARS
            if (h > MAX_EXPRESSION_HEIGHT or s > MAX_EXPRESSION_NODES or literal) and end - start >= 3 \
                    and "custom_gradient" not in text[start:end]:
                spans.append((start, end))
                h, s = 1, 1
        height[id(node)], size[id(node)] = h, s
    return spans


# ---- from the text libcst parsed back to the source ---------------------------------------

# The analysis text of recently parsed modules whose text is not their file's source (libcst
# modules cannot be weakly referenced; a few recent ones are enough for fix rounds and editors).
_ANALYSED: "OrderedDict[int, tuple[object, str]]" = OrderedDict()


def remember(module: object, analysis: str) -> None:
    _ANALYSED[id(module)] = (module, analysis)
    _ANALYSED.move_to_end(id(module))
    while len(_ANALYSED) > 16:
        _ANALYSED.popitem(last=False)


def analysed_text(module: object) -> str | None:
    entry = _ANALYSED.get(id(module))
    return entry[1] if entry is not None and entry[0] is module else None


class Unsafe(ValueError):
    """The change touches text that libcst did not see as it is on disk."""


def splice(source: str, base: str, new: str, analysis: str | None = None) -> tuple[int, int, str]:
    """The change from `base` (libcst's code for the module parsed from `analysis`, itself
    `source` with same-length substitutions) to `new`, as one replacement of
    `source[start:end]`. Raises Unsafe when the changed span holds a stub, a tab libcst saw
    as a space, or characters libcst dropped (form feeds in indentation)."""
    analysis = source if analysis is None else analysis
    start = 0
    limit = min(len(base), len(new))
    while start < limit and base[start] == new[start]:
        start += 1
    end_base, end_new = len(base), len(new)
    while end_base > start and end_new > start and base[end_base - 1] == new[end_new - 1]:
        end_base -= 1
        end_new -= 1
    text = new[start:end_new]
    if base != analysis:  # libcst dropped characters: align base with analysis (a subsequence)
        if len(base) > len(analysis):
            raise Unsafe("libcst changed the text")
        a_start, a_end = _align(analysis, base, start), _align(analysis, base, end_base)
        if a_end - a_start != end_base - start:
            raise Unsafe("the change spans characters libcst does not keep")
        start, end_base = a_start, a_end
    old = source[start:end_base]
    if old != analysis[start:end_base] and _LONE_CR.sub("\n", old) != analysis[start:end_base]:
        raise Unsafe("the change spans text cglint simplified for libcst")
    if "\r" in source and source != analysis:
        # libcst saw lone CRs as LFs: new lines take the break of the line they are written on.
        brk = LINE_BREAK.search(source, end_base)
        if brk is not None and brk.group() == "\r":
            text = _LF.sub("\r", text)
    return start, end_base, text


_LF = re.compile(r"(?<!\r)\n")


def _align(analysis: str, base: str, offset: int) -> int:
    """Offset in `analysis` of `base[offset]`, `base` being `analysis` minus a few characters."""
    i = j = 0
    while j < offset and i < len(analysis):
        if analysis[i] == base[j]:
            j += 1
        i += 1
    # characters libcst dropped right before the position belong before it
    return i
