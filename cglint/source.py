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
import threading
import tokenize
import warnings
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass

LINE_BREAK = re.compile(r"\r\n|\r|\n")

# Beyond these an expression is replaced by a stub in the text libcst parses.
MAX_EXPRESSION_HEIGHT = 100
MAX_EXPRESSION_CHARS = 20_000
MAX_LITERAL_CHARS = 4000
# Each level of nesting takes at least one character: a statement shorter than _GATE_CHARS is
# never deep enough to matter, and a subexpression shorter than _SHORT_CHARS is counted as one
# level (so a stub comes at most _SHORT_CHARS levels late).
_GATE_CHARS = 120
_SHORT_CHARS = 30


# The characters `str.splitlines` breaks at and Python does not.
_OTHER_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def split_lines(text: str, keepends: bool = False) -> list[str]:
    """`str.splitlines` with Python's line breaks only."""
    if not _OTHER_BREAKS.search(text):
        return text.splitlines(keepends)  # the same lines, in C
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
    first, _, rest = data.partition(b"\n")
    # No cookie on the first two lines (nearly every file): UTF-8, as tokenize would say,
    # without its line-by-line reading.
    encoding = "" if b"coding" in first or b"coding" in rest.partition(b"\n")[0] else "utf-8-sig" if bom else "utf-8"
    try:
        if not encoding:
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
    except (ValueError, TypeError, MemoryError, RecursionError) as exc:
        # A codec whose decoder raises plain UnicodeError (`undefined`, `punycode`) or anything
        # else: the file cannot be read as Python would read it, and Python refuses it too.
        raise UndecodableError(f"decoding with the {encoding!r} codec failed ({exc})") from None
    if not isinstance(text, str):  # a codec registered by the environment, returning bytes
        raise UndecodableError(f"the {encoding!r} codec does not decode to text")
    return Decoded(text, "utf-8" if encoding == "utf-8-sig" else encoding, bom)


# Codecs whose encoder gives back every byte its decoder read (the check below is skipped for
# them: nearly every file is UTF-8).
_ROUND_TRIP = frozenset({"utf-8", "utf-8-sig", "ascii", "latin-1", "iso-8859-1", "iso8859-1"})


def round_trips(data: bytes, decoded: Decoded) -> bool:
    """Whether writing the decoded text back gives `data` again, byte for byte. Escape codecs
    (`unicode_escape`, `raw_unicode_escape`, `utf-7`) decode several spellings to one text: a
    fix written back through them would rewrite bytes it did not touch."""
    if decoded.encoding.lower().replace("_", "-") in _ROUND_TRIP:
        return True
    try:
        return encode(decoded.text, decoded) == data
    except (ValueError, TypeError, MemoryError, RecursionError):  # UnicodeError included
        return False


class UnencodableError(UnicodeEncodeError):
    """`encode` could not write the text in the file's codec."""


def encode(text: str, decoded: Decoded) -> bytes:
    """The inverse of `decode` (raises UnicodeEncodeError if the text no longer fits the codec,
    whatever the codec raised: `idna` raises plain UnicodeError for a line over 63 characters)."""
    try:
        out = text.encode(decoded.encoding)
    except UnicodeEncodeError:
        raise
    except (ValueError, TypeError, LookupError, MemoryError, RecursionError) as exc:
        raise UnencodableError(decoded.encoding, text, 0, max(1, len(text)), str(exc)) from None
    if not isinstance(out, bytes):
        raise UnencodableError(decoded.encoding, text, 0, max(1, len(text)), "the codec does not encode to bytes")
    return (codecs.BOM_UTF8 if decoded.bom else b"") + out


# ---- Python's parser -------------------------------------------------------------------------


@dataclass(frozen=True)
class PythonError:
    message: str
    line: int
    column: int  # 1-based
    nesting: bool  # Python gives up on depth: libcst must not be run on this text


_NESTING = ("too many nested parentheses", "too many levels of indentation", "too complex",
            "too many statically nested blocks", "parser stack overflow")


# CPython 3.11 keeps the AST converter's recursion depth in interpreter-wide state: two threads
# building trees at once (the language server's lint and fix workers) can fail with
# "SystemError: AST constructor recursion depth mismatch". One tree at a time, in cglint.
_AST_LOCK = threading.Lock()


# CPython's parser takes time quadratic in the number of parts of an import's dotted name
# (`import a.a.a...`: 40,000 parts, 2 s; 100,000, 17 s). Python compiles a few thousand in a
# blink; beyond MAX_IMPORT_DOTS the statement is refused before Python sees it.
MAX_IMPORT_DOTS = 4000
_IMPORT_START = re.compile(r"(?:^|;)[ \t]*(?:from|import)[ \t\\]", re.MULTILINE)


def _long_import(text: str) -> tuple[int, int] | None:
    """(line, dots) of the first import statement with more than MAX_IMPORT_DOTS dots (its
    backslash-continued lines included), or None. One pass: a statement's lines are not
    scanned again for a later match inside them."""
    if text.count(".") <= MAX_IMPORT_DOTS:
        return None
    scanned = 0
    for m in _IMPORT_START.finditer(text):
        if m.start() < scanned:
            continue
        end, dots = m.end(), 0
        while True:
            newline = text.find("\n", end)
            segment = text[end:newline if newline >= 0 else len(text)]
            dots += segment.count(".")
            if newline < 0 or not segment.rstrip("\r").endswith("\\"):
                break
            end = newline + 1
        scanned = newline if newline >= 0 else len(text)
        if dots > MAX_IMPORT_DOTS:
            return text.count("\n", 0, m.start()) + 1, dots
    return None


def python_ast(text: str, mode: str = "exec", flags: int = 0, filename: str = "<unknown>"):
    """`ast.parse(text)` (warnings silenced: invalid escapes etc. are not ours to print), one
    thread at a time. An import of more than MAX_IMPORT_DOTS dotted parts raises SyntaxError
    ("too complex") without reaching Python's parser."""
    long_import = _long_import(text)
    if long_import is not None:
        line, dots = long_import
        raise SyntaxError(f"import statement too complex: {dots:,} dots (Python's parser takes time growing with "
                          f"their square; cglint parses at most {MAX_IMPORT_DOTS:,})", (filename, line, 1, None))
    with _AST_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compile(text, filename, mode, flags | ast.PyCF_ONLY_AST, dont_inherit=True)


def parse(text: str) -> tuple[ast.Module | None, PythonError | None]:
    """Python's parse of `text`: the tree, or why Python rejects it."""
    try:
        return python_ast(text), None
    except SyntaxError as exc:
        message = exc.msg or "invalid syntax"
        # Python stops at its first error: deep nesting after it (or that only libcst reaches,
        # as after a leading U+FEFF, which libcst skips and Python refuses in a str) must not
        # reach libcst either.
        nesting = any(n in message for n in _NESTING) or _too_deep(text)
        line = exc.lineno or 1
        column = max(1, exc.offset or 1)  # counts characters in 3.10+
        return None, PythonError(message, line, column, nesting)
    except (RecursionError, MemoryError):
        return None, PythonError("nesting too deep (Python's parser gives up)", 1, 1, True)
    except UnicodeEncodeError as exc:  # a lone surrogate: only an editor's buffer can hold one
        line, column = line_col(text, exc.start)
        return None, PythonError(f"lone surrogate U+{ord(text[exc.start]):04X} (half of a UTF-16 pair; "
                                 "no Python file can hold it)", line, column, _too_deep(text))
    except ValueError as exc:  # "source code string cannot contain null bytes"
        return None, PythonError(str(exc), _nul_line(text), 1, _too_deep(text))


# Python's tokenizer refuses more than 200 open brackets ("too many nested parentheses");
# libcst's parser recurses per level and overflows its native stack some way beyond that.
MAX_BRACKET_DEPTH = 200
_BRACKET = re.compile(r"[()\[\]{}]")


def _too_deep(text: str) -> bool:
    """Whether brackets (counted everywhere, strings and comments included: an over-estimate,
    only asked of text Python refuses) ever open deeper than Python allows."""
    if text.count("(") + text.count("[") + text.count("{") <= MAX_BRACKET_DEPTH:
        return False
    depth = 0
    for m in _BRACKET.finditer(text):
        if m.group() in "([{":
            depth += 1
            if depth > MAX_BRACKET_DEPTH:
                return True
        elif depth:
            depth -= 1
    return False


def first_line(stmt: ast.stmt) -> int:
    """The first line of a statement as a reader sees it: its first decorator's, if any."""
    return min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])


def statement_lines(tree: ast.Module, text: str) -> list[tuple[int, int]]:
    """The first and last line of each top-level statement of `text` as libcst groups them:
    statements sharing a line (`a = 1; b = 2`) are one; statements the quick scan blanked out
    of `text` are none."""
    lines = split_lines(text)
    spans: list[list[int]] = []
    for stmt in tree.body:
        first = first_line(stmt)
        last = stmt.end_lineno or stmt.lineno
        if spans and first <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], last)
        else:
            spans.append([first, last])
    return [(first, last) for first, last in spans if any(line.strip() for line in lines[first - 1 : last])]


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
    offsets = _Offsets(text)
    spans: list[tuple[int, int, bool]] = []
    for stmt in _long_statements(tree, offsets):
        for expr in _own_expressions(stmt):
            spans += _stub_spans(expr, text, offsets)
    if not spans:
        return text
    out = []
    last = 0
    literals_only = True
    for start, end, literal in sorted(spans, key=lambda span: (span[0], -span[1])):
        if start < last:  # inside a stub already taken (the outermost one wins)
            continue
        out.append(text[last:start])
        out.append(_stub(text[start:end]))
        literals_only = literals_only and literal
        last = end
    out.append(text[last:])
    stubbed = "".join(out)
    if literals_only:
        # A string or number literal (never in a pattern or an f-string: those are not
        # stubbed) is an expression wherever it stands, and so is `(_ ...)`: no re-parse.
        return stubbed
    try:
        python_ast(stubbed)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text  # a stub in a place we did not foresee: parse the text as it is
    return stubbed


def _stub(span: str) -> str:
    inner = re.sub(r"[^\r\n]", " ", span[2:-1])
    return "(_" + inner + ")"


class _Offsets:
    """Character offsets of ast positions (whose columns count UTF-8 bytes), O(1) on ASCII lines."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = line_starts(text)
        self.encoded: dict[int, bytes | None] = {}

    def __call__(self, line: int | None, col: int | None) -> int:
        line, col = line or 1, col or 0
        if line - 1 >= len(self.starts):
            return len(self.text)
        begin = self.starts[line - 1]
        if line not in self.encoded:
            end = self.starts[line] if line < len(self.starts) else len(self.text)
            segment = self.text[begin:end]
            self.encoded[line] = None if segment.isascii() else segment.encode("utf-8")
        raw = self.encoded[line]
        if raw is None:
            return begin + col
        return begin + len(raw[:col].decode("utf-8", "ignore"))


def _long_statements(tree: ast.Module, offsets: _Offsets):
    """Statements (at any depth) whose own text is long enough to hold a pathological
    expression; a short compound statement's body is short too."""
    todo = list(tree.body)
    while todo:
        stmt = todo.pop()
        # A def's or class's decorators stand before its `lineno`: they count to its length.
        first = min(((d.lineno, d.col_offset) for d in getattr(stmt, "decorator_list", ())),
                    default=(stmt.lineno, stmt.col_offset))
        first = min(first, (stmt.lineno, stmt.col_offset))
        if offsets(stmt.end_lineno, stmt.end_col_offset) - offsets(*first) < _GATE_CHARS:
            continue
        yield stmt
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            for inner in getattr(stmt, name, None) or ():
                if isinstance(inner, ast.stmt):
                    todo.append(inner)
                else:  # except handlers, match cases
                    todo.extend(getattr(inner, "body", ()))


def _own_expressions(stmt: ast.stmt):
    """The expressions of a statement itself (not of the statements in its body)."""
    for name, value in ast.iter_fields(stmt):
        if name in ("body", "orelse", "finalbody", "handlers", "cases"):
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, ast.expr):
                yield item
            elif isinstance(item, ast.AST):  # arguments, withitem, keyword, ...
                yield from (n for n in ast.walk(item) if isinstance(n, ast.expr))


def _stub_spans(root: ast.expr, text: str, offsets: _Offsets) -> list[tuple[int, int, bool]]:
    """Long expressions (over MAX_EXPRESSION_CHARS, literals over MAX_LITERAL_CHARS) become
    stubs whole; below that, a post-order walk stubs a subtree that grows past
    MAX_EXPRESSION_HEIGHT, which then counts as one level. Short subtrees are not walked
    (their height is bounded by their length). Nothing that mentions custom_gradient is stubbed."""
    spans: list[tuple[int, int, bool]] = []  # (start, end, a literal)
    height: dict[int, int] = {}
    where: dict[int, tuple[int, int]] = {}
    stack: list[tuple[ast.AST, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if not done:
            if isinstance(node, ast.expr) and node.end_lineno is not None:
                start, end = offsets(node.lineno, node.col_offset), offsets(node.end_lineno, node.end_col_offset)
                if end - start < _SHORT_CHARS:
                    height[id(node)] = 1
                    continue
                stubbable = not isinstance(node, _NOT_STUBBED) and "custom_gradient" not in text[start:end]
                limit = MAX_LITERAL_CHARS if isinstance(node, (ast.Constant, ast.JoinedStr)) else MAX_EXPRESSION_CHARS
                if stubbable and end - start > limit:
                    spans.append((start, end, isinstance(node, ast.Constant)))
                    height[id(node)] = 1
                    continue
                if stubbable:
                    where[id(node)] = (start, end)
                if isinstance(node, (ast.Constant, ast.JoinedStr)):
                    # One node for Python, but libcst nests implicitly concatenated strings
                    # one level per part ("a" "a" ... 400 times): as deep as they have parts.
                    parts = _string_parts(text[start:end])
                    if parts > MAX_EXPRESSION_HEIGHT and stubbable:
                        spans.append((start, end, isinstance(node, ast.Constant)))
                        parts = 1
                    height[id(node)] = parts
                    continue
            stack.append((node, True))
            stack.extend((child, False) for child in ast.iter_child_nodes(node))
            continue
        h = 1 + max((height.get(id(c), 0) for c in ast.iter_child_nodes(node)), default=0)
        if h > MAX_EXPRESSION_HEIGHT and id(node) in where:
            spans.append((*where[id(node)], False))
            h = 1
        height[id(node)] = h
    return spans


def _string_parts(span: str) -> int:
    """How many string literals an (implicitly concatenated) string expression is made of."""
    if span.count('"') + span.count("'") < 2 * MAX_EXPRESSION_HEIGHT:
        return 1  # each part takes two quotes at least: not enough for a deep chain
    try:
        return sum(1 for t in tokenize.generate_tokens(io.StringIO("(" + span + ")").readline)
                   if t.type == tokenize.STRING or t.type == getattr(tokenize, "FSTRING_START", -1))
    except (tokenize.TokenError, SyntaxError):
        return 1


# ---- form feeds in indentation -------------------------------------------------------------

_FF_INDENT = re.compile(r"[ \t\x0c]*\x0c")


def lift_form_feeds(text: str) -> tuple[str, dict[int, int]]:
    """A form feed in indentation resets Python's column count, so `\\f` + 8 spaces indents
    by 8; libcst's tokenizer compares indentation as text and refuses such a line when it opens
    a nested block ("no matching outer block for dedent"). This gives the text with each such
    line's leading `...\\f` moved, as spaces, to the end of the line before (so every other
    line and every offset outside those two lines stay where they were), and {line: columns
    the line's tokens moved left}. `unlift_columns` moves the findings back."""
    lines = split_lines(text, keepends=True)
    shifts: dict[int, int] = {}
    for i in range(1, len(lines)):
        m = _FF_INDENT.match(lines[i])
        if m is None or not lines[i][m.end():].strip(" \t\r\n"):
            continue
        prev = lines[i - 1]
        body = prev.rstrip("\r\n")
        if body.endswith("\\") or body == prev:  # a continuation line: the break must stay
            continue
        lines[i - 1] = body + " " * m.end() + prev[len(body):]
        lines[i] = lines[i][m.end():]
        shifts[i + 1] = m.end()
    return "".join(lines), shifts


def unlift_columns(diagnostics: list, before: str, after: str) -> None:
    """Columns of findings on lines `lift_form_feeds(before)` moved, put back where they are
    in `before` (a no-op unless `after` is that lifted text)."""
    lifted, shifts = lift_form_feeds(before)
    if lifted != after:
        return
    for d in diagnostics:
        if d.line in shifts:
            d.column += shifts[d.line]
        if d.end_line in shifts:
            d.end_column += shifts[d.end_line]


# ---- from the text libcst parsed back to the source ---------------------------------------

# The source and analysis text of recently parsed modules whose `code` may not be their source
# (libcst modules cannot be weakly referenced; a few recent ones cover fix rounds and editors).
_ANALYSED: "OrderedDict[int, tuple[object, str, str]]" = OrderedDict()


def remember(module: object, source: str, analysis: str) -> None:
    _ANALYSED[id(module)] = (module, source, analysis)
    _ANALYSED.move_to_end(id(module))
    while len(_ANALYSED) > 16:
        _ANALYSED.popitem(last=False)


def registered(module: object) -> tuple[str, str] | None:
    """(source, analysis text) of a module the engine parsed from a text that is not exactly
    what libcst gives back; None when `module.code` is the source."""
    entry = _ANALYSED.get(id(module))
    return (entry[1], entry[2]) if entry is not None and entry[0] is module else None


class Unsafe(ValueError):
    """The change touches text that libcst did not see as it is on disk."""


def splice(source: str, base: str, new: str, analysis: str | None = None) -> tuple[int, int, str]:
    """The change from `base` (libcst's code for the module parsed from `analysis`, itself
    `source` with same-length substitutions) to `new`, as one replacement of
    `source[start:end]`. Raises Unsafe when the changed span holds a stub, a tab libcst saw
    as a space, or characters libcst dropped (form feeds in indentation)."""
    analysis = source if analysis is None else analysis
    start, tail = common_ends(base, new)
    end_base, end_new = len(base) - tail, len(new) - tail
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
    if "\t" in source and source != analysis and text:
        text = _tabbed_indentation(source, analysis, start, text)
    return start, end_base, text


_INDENT = re.compile(r"[ \t\x0c]*")


def _tabbed_indentation(source: str, analysis: str, start: int, text: str) -> str:
    """Lines a fix writes are indented as libcst saw their block; where libcst was given the
    block's indenting tabs as spaces (cglint.engine), they get the block's own indentation back,
    or the fix would mix the two ("unindent does not match"). Raises Unsafe when one indentation
    libcst saw stands for two different ones on disk."""
    back: dict[str, str | None] = {}
    for src_line, ana_line in zip(split_lines(source), split_lines(analysis)):
        a, b = _INDENT.match(src_line).group(), _INDENT.match(ana_line).group()
        if b and src_line[len(a):].strip():  # indentation as libcst saw it -> as it is on disk
            back[b] = a if back.get(b, a) == a else None
    if all(a == b for b, a in back.items()):
        return text
    parts = LINE_BREAK.split(text)
    breaks = LINE_BREAK.findall(text)
    at_line_start = start == 0 or source[start - 1] in "\r\n"
    for i, part in enumerate(parts):
        if i == 0 and not at_line_start:
            continue
        indent = _INDENT.match(part).group()
        key = max((k for k in back if indent.startswith(k)), key=len, default=None)
        if key is None:
            continue
        if back[key] is None:
            raise Unsafe("the fix writes into a block indented differently on disk than libcst saw it")
        parts[i] = back[key] + part[len(key):]
    return "".join(p + b for p, b in zip(parts, breaks + [""]))


_LF = re.compile(r"(?<!\r)\n")


def common_ends(a: str, b: str) -> tuple[int, int]:
    """How many characters `a` and `b` share at the start and, after that, at the end: binary
    searches of slice comparisons (done in C), not a character loop over a whole module."""
    def longest(same, limit: int) -> int:  # the largest k <= limit with same(k); same is monotone
        low, high = 0, limit
        while low < high:
            mid = (low + high + 1) // 2
            if same(mid):
                low = mid
            else:
                high = mid - 1
        return low

    limit = min(len(a), len(b))
    prefix = longest(lambda k: a[:k] == b[:k], limit)
    return prefix, longest(lambda k: a[len(a) - k:] == b[len(b) - k:], limit - prefix)


def _align(analysis: str, base: str, offset: int) -> int:
    """Offset in `analysis` of `base[offset]`, `base` being `analysis` minus a few characters."""
    i = j = 0
    while j < offset and i < len(analysis):
        if analysis[i] == base[j]:
            j += 1
        i += 1
    # characters libcst dropped right before the position belong before it
    return i
