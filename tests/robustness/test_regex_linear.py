"""Every regular expression of the package runs in linear time on adversarial text.

The patterns are found in the source (every `re.<function>(pattern, ...)` call, by its syntax),
so a pattern added later is tested without a change here; a call whose pattern cannot be
evaluated statically must be listed in DYNAMIC with the test that covers it.

For each pattern, inputs are generated from the pattern itself (re's own parser): for every
prefix of the pattern, a short text that matches that prefix, followed by a long run of one
character and a character that ends any match, and the prefix's text repeated. The inputs
that cost the most are doubled from 50 characters up, failing at once where the cost grows
quadratically; the costliest is then timed at N and 10 N (CPU time, best of three, enough
repetitions for each measure to take 10 ms or more, three tries on a loaded machine): linear
matching grows about 10 times, a quadratic one 100 times; the test allows 20 (a loaded machine
measured a linear pattern at 12.9).

Each pattern is timed the way cglint uses it: with the anchored methods it is called with
(`match`, `fullmatch`) where it is only ever used anchored, else as `finditer` over the whole
text (what `search`, `sub`, `findall` cost at worst).
"""

from __future__ import annotations

import ast
import importlib
import re
import time
from pathlib import Path

import pytest

try:
    from re import _parser as sre_parse  # Python 3.11+
    from re import _constants as sre
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as sre
    import sre_parse

PACKAGE = Path(__file__).resolve().parents[2] / "cglint"
RE_FUNCTIONS = {"compile", "match", "fullmatch", "search", "finditer", "findall", "sub", "subn", "split"}
ANCHORED = {"match", "fullmatch"}

# Calls whose pattern is built at run time, and where its linearity is proven instead.
DYNAMIC = {
    ("config.py", "self._source"): "gitignore globs: at most two unbounded wildcards per regex, more are run as "
                                   "a state set (tests/test_config.py: test_glob_*_linear)",
    ("config.py", "t[1]"): "one character class of a glob, matched against one character",
    ("cg013_missing_decorator.py", "f'\\\\b{re.escape(name)}\\\\b'"): "a word, escaped, between word boundaries: a literal",
}

GROWTH_LIMIT = 20.0
SIZE = 10_000  # N; 10 N = 100,000 characters (a quadratic pattern is 100 times slower at either size)


def _sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent)
        module = ".".join(rel.with_suffix("").parts)
        if module.endswith(".__init__"):
            module = module[: -len(".__init__")]
        yield path, module


def _uses(tree: ast.AST) -> dict[str, set[str]]:
    """For each name bound to a compiled pattern, the methods called on it."""
    uses: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target = node.func.value
            name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else None
            if name:
                uses.setdefault(name, set()).add(node.func.attr)
    return uses


def collect():
    """(id, compiled pattern, how it is used) for every re call of the package."""
    found, unresolved = [], []
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path, _ in _sources()}
    uses: dict[str, set[str]] = {}  # by name across the package: a pattern may be used elsewhere
    for tree in trees.values():
        for name, methods in _uses(tree).items():
            uses.setdefault(name, set()).update(methods)
    for path, module_name in _sources():
        tree = trees[path]
        module = None
        assigned = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                for target in node.targets:
                    if isinstance(target, (ast.Name, ast.Attribute)):
                        assigned[id(node.value)] = target.id if isinstance(target, ast.Name) else target.attr
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
                    and node.func.attr in RE_FUNCTIONS and node.args):
                continue
            arg = node.args[0]
            flags_node = next((k.value for k in node.keywords if k.arg == "flags"), None)
            if flags_node is None and node.func.attr == "compile" and len(node.args) > 1:
                flags_node = node.args[1]
            try:
                try:  # literals: without importing the module (some import TensorFlow)
                    namespace = {"re": re}
                    pattern = eval(compile(ast.Expression(arg), str(path), "eval"), namespace)
                    flags = eval(compile(ast.Expression(flags_node), str(path), "eval"), namespace) if flags_node else 0
                except NameError:  # built from the module's names (noqa's `_CODES`)
                    if module is None:
                        module = importlib.import_module(module_name)
                    namespace = vars(module)
                    pattern = eval(compile(ast.Expression(arg), str(path), "eval"), namespace)
                    flags = eval(compile(ast.Expression(flags_node), str(path), "eval"), namespace) if flags_node else 0
            except Exception:
                unresolved.append((path.name, ast.unparse(arg)))
                continue
            if isinstance(pattern, re.Pattern):
                compiled = pattern
            else:
                compiled = re.compile(pattern, flags)
            if node.func.attr == "compile":
                name = assigned.get(id(node))
                methods = uses.get(name, {"finditer"}) if name else {"finditer"}
            else:
                methods = {node.func.attr}
            how = "+".join(sorted(methods)) if methods and methods <= ANCHORED else "finditer"
            found.append((f"{path.relative_to(PACKAGE.parent)}:{node.lineno}", compiled, how))
    return found, unresolved


PATTERNS, UNRESOLVED = collect()


def test_every_pattern_is_found_or_accounted_for():
    assert len(PATTERNS) >= 50  # the package has about 60; a broken scan finds none
    assert sorted(set(UNRESOLVED)) == sorted(DYNAMIC), "a pattern built at run time: prove it linear, list it in DYNAMIC"


# ---- inputs -------------------------------------------------------------------------------

_CATEGORY_CHAR = {
    sre.CATEGORY_DIGIT: "0", sre.CATEGORY_NOT_DIGIT: "a", sre.CATEGORY_SPACE: " ", sre.CATEGORY_NOT_SPACE: "a",
    sre.CATEGORY_WORD: "a", sre.CATEGORY_NOT_WORD: " ", sre.CATEGORY_LINEBREAK: "\n", sre.CATEGORY_NOT_LINEBREAK: "a",
}


def _one(items) -> str:
    """A short text matching the parsed `items` (the first way re's parser offers)."""
    out = []
    for op, av in items:
        if op is sre.LITERAL:
            out.append(chr(av))
        elif op is sre.NOT_LITERAL:
            out.append("a" if av != ord("a") else "b")
        elif op is sre.ANY:
            out.append("a")
        elif op is sre.IN:
            out.append(_in_char(av))
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", None)):
            lo, hi, sub = av
            out.append(_one(sub) * max(lo, 1 if hi else 0))
        elif op is sre.SUBPATTERN:
            out.append(_one(av[-1]))
        elif op is getattr(sre, "ATOMIC_GROUP", None):
            out.append(_one(av))
        elif op is sre.BRANCH:
            out.append(_one(av[1][0]))
        elif op is sre.GROUPREF_EXISTS:
            out.append(_one(av[1]))
        # AT (anchors), ASSERT, ASSERT_NOT, GROUPREF: nothing of their own
    return "".join(out)


def _in_char(av) -> str:
    negate = any(op is sre.NEGATE for op, _ in av)
    if negate:
        excluded = "".join(_in_char([x]) for x in av if x[0] is not sre.NEGATE)
        return next(c for c in "a0 _.x\t" if c not in excluded)
    op, value = av[0]
    if op is sre.LITERAL:
        return chr(value)
    if op is sre.RANGE:
        return chr(value[0])
    if op is sre.CATEGORY:
        return _CATEGORY_CHAR.get(value, "a")
    return "a"


def _alphabet(pattern: re.Pattern) -> list[str]:
    source = pattern.pattern if isinstance(pattern.pattern, str) else pattern.pattern.decode("latin-1")
    chars = {c for c in source if c.isprintable() or c in "\t\n\r\x0c"} | set(" \t\n\r.,:=#()[]{}'\"\\a0_-x\x0c")
    return sorted(chars)


def inputs(pattern: re.Pattern) -> list[tuple[str, str, str]]:
    """Adversarial inputs for `pattern`, each (head, unit, tail): the text of size n is
    head + unit * (n // len(unit)) + tail."""
    parsed = sre_parse.parse(pattern.pattern if isinstance(pattern.pattern, str) else pattern.pattern.decode("latin-1"),
                             pattern.flags & ~re.ASCII & ~re.LOCALE if isinstance(pattern.pattern, str) else 0)
    items = list(parsed)
    prefixes = {_one(items[:k]) for k in range(len(items) + 1)}
    # Alternatives at the top (`a|b`): each one's prefixes too.
    for op, av in items:
        if op is sre.BRANCH:
            for alt in av[1]:
                prefixes |= {_one(list(alt)[:k]) for k in range(len(alt) + 1)}
    full = _one(items)
    out = set()
    for prefix in prefixes:
        for c in _alphabet(pattern):
            out.add((prefix, c, "\x00"))
            out.add((prefix, c, ""))
        if prefix:
            out |= {("", prefix, "\x00"), ("", prefix + " ", ""), ("", prefix + "\n", "")}
    if full:
        out |= {("", full, ""), ("", full + "\n", "")}
    return sorted(out)


def text_of(case: tuple[str, str, str], n: int) -> str:
    head, unit, tail = case
    return head + unit * max(1, n // len(unit)) + tail


def _encode(pattern: re.Pattern, text: str):
    return text.encode("latin-1", "replace") if isinstance(pattern.pattern, bytes) else text


def _run(pattern: re.Pattern, text, how: str) -> None:
    if how != "finditer":  # only ever used anchored: as it is used
        for method in how.split("+"):
            getattr(pattern, method)(text)
    else:
        for _ in pattern.finditer(text):
            pass


def cpu(pattern, text, how: str, repeat: int) -> float:
    """Best of three: CPU seconds for `repeat` runs."""
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        for _ in range(repeat):
            _run(pattern, text, how)
        best = min(best, time.process_time() - start)
    return best


def _costs(pattern: re.Pattern, n: int, how: str) -> list[tuple[float, tuple[str, str, str]]]:
    """Every generated input at size `n`, costliest first."""
    out = []
    for case in inputs(pattern):
        data = _encode(pattern, text_of(case, n))
        start = time.process_time()
        _run(pattern, data, how)
        out.append((time.process_time() - start, case))
    return sorted(out, key=lambda c: -c[0])


def _escalate(pattern: re.Pattern, case, how: str, where: str) -> None:
    """The input doubled from a small size up to SIZE, failing where two doublings cost far
    more than four times as much (a quadratic pattern: 16 times): it fails in a fraction of a
    second instead of running for minutes at the full size."""
    costs, size = {}, 50
    while size <= SIZE:
        costs[size] = cost = cpu(pattern, _encode(pattern, text_of(case, size)), how, 1)
        before = costs.get(size // 4)
        if before is not None and cost > 0.003 and cost > 9 * before:
            pytest.fail(f"{where} ({pattern.pattern!r}, used as {how}): {size // 4} -> {size} characters took "
                        f"{before:.4f} -> {cost:.4f} s on {case!r}")
        size *= 2


def _ratio(pattern: re.Pattern, case, how: str) -> tuple[float, float, float]:
    """CPU time at SIZE and at 10 SIZE (each the best of three, measured in turn so that both
    see the same load; each best of six), and their ratio."""
    small = _encode(pattern, text_of(case, SIZE))
    large = _encode(pattern, text_of(case, 10 * SIZE))
    repeat = max(1, min(5000, int(0.01 / max(cpu(pattern, small, how, 1), 1e-6))))  # ~10 ms or more each
    t_small = t_large = float("inf")
    for _ in range(2):
        t_small = min(t_small, cpu(pattern, small, how, repeat))
        t_large = min(t_large, cpu(pattern, large, how, repeat))
    return t_small, t_large, t_large / max(t_small, 1e-9)


@pytest.mark.parametrize("where, pattern, how", PATTERNS, ids=[p[0] for p in PATTERNS])
def test_pattern_is_linear(where, pattern, how):
    ranked = [case for _, case in _costs(pattern, 400, how)]
    for case in ranked[:3]:
        _escalate(pattern, case, how, where)
    case = ranked[0]
    # A loaded machine (other processes on the same cores) can slow one measure: a pattern
    # passes when one of three tries is within the limit; a quadratic one is 100 times every time.
    for _ in range(3):
        t_small, t_large, ratio = _ratio(pattern, case, how)
        if ratio <= GROWTH_LIMIT:
            return
    pytest.fail(f"{where} ({pattern.pattern!r}, used as {how}): {SIZE} -> {10 * SIZE} characters took "
                f"{t_small:.4f} -> {t_large:.4f} s (x{ratio:.1f}) on {case!r}")


def test_the_test_catches_a_quadratic_pattern():
    """The method on the two patterns the round-4 audit found quadratic (their old text)."""
    old_import = re.compile(r"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+\(?([\w., \t]*)|import[ \t]+([\w., \t]+))",
                            re.MULTILINE)
    worst = _costs(old_import, 200, "finditer")[0][1]
    with pytest.raises(pytest.fail.Exception, match="characters took"):
        _escalate(old_import, worst, "finditer", "the old quickscan._IMPORT")
