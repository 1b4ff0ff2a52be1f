#!/usr/bin/env python3
"""Mutation benchmark: inject the bugs real reports show into correct custom-gradient code and
count how many cglint finds (a script, not a test).

    python bench/mutation.py [--ecosystem] [--runtime] [--trace] [--python PY] [--kinds K ...] [--limit N] [--json OUT]

Corpus: the fixtures' correct custom-gradient modules (every `*_good.py`, the seed's
`correct.py`, the realistic corpus `fixtures/realistic/`, and the runtime fixtures cglint
finds nothing in: the others hold deliberate bugs for the runtime check, listed apart), and with `--ecosystem` the
modules of the ecosystem check's projects (scripts/ecosystem_check.py; its download cache,
outside the repository) in which cglint finds nothing, the baseline's accepted bugs excluded.
Each custom-gradient function is mutated once per kind that applies to it:

  output_derivative   the grad fn reads the forward's output where it read its input
  upstream_ones       the upstream gradient replaced by `tf.ones_like(upstream)`
  upstream_dropped    the upstream gradient replaced by ones, the grad fn's parameter unused
  var_reordered       the variable gradients' literal list reversed (two or more)
  var_flattened       `(input_grads, [dw, ...])` returned flat: `(input_grads, dw, ...)`
  var_callable        the variable gradients returned as `lambda: [...]`
  variables_removed   the grad fn's `variables` parameter removed
  tf_function_forward `@tf.function` under `@tf.custom_gradient`
  tf_function_grad    `@tf.function` on the grad fn
  numpy_in_grad       the first input gradient computed through `.numpy()`
  keyword_call        a call of the function with its inputs by keyword
  int_positional      a call of the function passing a Python int positionally
  dtype_changed       the first input gradient cast to float16
  sign_flipped        the first input gradient negated
  factor_dropped      a constant factor of a product dropped from the first input gradient (or
                      from a name the grad fn binds that it reads)

A mutant is found when cglint reports a finding on it that it does not report on the original.
With `--runtime`, each mutant is also run with TensorFlow (`cglint --runtime=all`): a mutant
whose gradients still match autodiff is harmless and not counted (except for kinds whose harm
is not in the values: `tf_function_grad` retraces on every call), and the column "found with
--runtime" also counts a mutant whose gradients TensorFlow shows to differ from autodiff where the
original's matched (what `cglint --runtime` reports to its user). `--python` runs those checks
in another environment (one with the ecosystem's projects installed, e.g. the trace-suites venv
of bench/trace_suites.py), with this checkout's cglint first on its path. The table gives, per
kind, the mutants, those TensorFlow showed harmless, those counted, those found and the recall;
and the findings on the unmutated code (which should be none).

With `--trace`, each mutant of an ecosystem module is also checked where the project's own tests
call it: the project's files (with what its source checkout adds, tests and a C extension built
in place: `bench/trace_suites.py --setup --checkout ...`) are copied with the mutant in place,
at most 3 of its test files that import the module or call the function the site is written in
are chosen (and, in them, the tests that name that function), and `cglint trace -- python -m
pytest FILES` runs them with that copy first on the path (`--python`, or the project's own venv),
on the mutant and once on the unmutated copy. A mutant is found with trace when trace reports a
`mismatch` or `error` in the module that the unmutated copy does not (or fails another way there);
one whose tests never reach the site is a miss with that reason. Reports are read from files.
"""

from __future__ import annotations

import argparse
import ast
import collections
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import libcst as cst

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from cglint import engine  # noqa: E402
from cglint.model import GradientSite, ModuleModel  # noqa: E402
import trace_suites  # noqa: E402

Mutant = tuple[str, str]  # (kind, mutated source)


# ---- corpus ----------------------------------------------------------------------------------

def fixture_corpus() -> list[Path]:
    files = sorted(ROOT.glob("fixtures/rules/*_good.py")) + [ROOT / "fixtures" / "seed" / "correct.py"]
    files += sorted(ROOT.glob("fixtures/runtime/*.py")) + sorted(ROOT.glob("fixtures/realistic/*.py"))
    return files


def ecosystem_corpus() -> list[Path]:
    sys.path.insert(0, str(ROOT / "scripts"))
    import ecosystem_check

    src = ecosystem_check.cache_dir(None) / "src"
    accepted = {line.split(":")[0] for line in (ROOT / "scripts" / "ecosystem_baseline.txt").read_text().splitlines()
                if line and not line.startswith("#")}
    out = []
    for path in sorted(src.rglob("*.py")) if src.is_dir() else []:
        rel = path.relative_to(src).as_posix()
        if "custom_gradient" in path.read_text(errors="replace") and not any(rel.endswith(a.split("/", 1)[-1])
                                                                             for a in accepted):
            out.append(path)
    return out


# ---- mutations -------------------------------------------------------------------------------

def _replace_names(node: cst.CSTNode, old: str, new: Callable[[], cst.BaseExpression]) -> cst.CSTNode:
    class Swap(cst.CSTTransformer):
        def visit_Param(self, _):  # parameters keep their names
            return False

        def visit_Attribute(self, n):  # `x.shape` reads x, `obj.x` does not
            n.value.visit(self)
            return False

        def leave_Name(self, original, updated):
            return new() if original.value == old else updated

    return node.visit(Swap())


def _function_body(fn) -> cst.CSTNode:
    return fn.body


def mutants(module: cst.Module, model: ModuleModel, site: GradientSite) -> Iterator[Mutant]:
    code = module.code

    def replaced(old: cst.CSTNode, new: cst.CSTNode) -> str:
        return module.deep_replace(old, new).code  # type: ignore[union-attr]

    tf = next((k for k, v in model.imports.items() if v == "tensorflow"), None)
    grads = [g for g in site.grad_fns]
    if not grads:
        return
    g = grads[0]
    body = _function_body(g.node)
    x = site.inputs[0] if site.inputs else None
    y = site.outputs[0] if site.outputs and isinstance(site.outputs[0], cst.Name) else None
    if x and y is not None and y.value != x and g.reads(x):
        new_body = _replace_names(body, x, lambda: cst.Name(y.value))
        yield "output_derivative", replaced(body, new_body)
    if g.upstream_params and tf:
        dy = g.upstream_params[0]
        if g.reads(dy):
            ones = lambda: cst.parse_expression(f"{tf}.ones_like({dy})")  # noqa: E731
            yield "upstream_ones", replaced(body, _replace_names(body, dy, ones))
            yield "upstream_dropped", replaced(body, _replace_names(body, dy, lambda: cst.Integer("1")))
    pairs = [r for r in g.returns if r.pair is not None and isinstance(r.pair[1], (cst.List, cst.Tuple))]
    if pairs and site.variables:
        ret = pairs[0]
        inputs, var = ret.pair  # type: ignore[misc]
        elements = [e.value for e in var.elements]  # type: ignore[union-attr]
        if len(elements) >= 2:
            yield "var_reordered", replaced(var, var.with_changes(elements=list(reversed(var.elements))))
        if ret.value is not None:
            flat = cst.Tuple([cst.Element(inputs)] + [cst.Element(e) for e in elements])
            yield "var_flattened", replaced(ret.value, flat)
            yield "var_callable", replaced(ret.value, cst.Tuple([cst.Element(inputs), cst.Element(
                cst.Lambda(cst.Parameters(), var))]))
    if g.variables_param == "variables" and site.variables and isinstance(g.node, cst.FunctionDef):
        params = g.node.params
        kept = [p for p in params.params if p.name.value != "variables"]
        kwonly = [p for p in params.kwonly_params if p.name.value != "variables"]
        star = params.star_arg if kwonly or not params.kwonly_params else cst.MaybeSentinel.DEFAULT
        yield "variables_removed", replaced(params, params.with_changes(params=kept, kwonly_params=kwonly,
                                                                        star_arg=star))
    if tf and isinstance(site.forward, cst.FunctionDef) and isinstance(site.wrapper, cst.Decorator):
        fn = site.forward
        at = list(fn.decorators).index(site.wrapper) + 1
        decorators = list(fn.decorators)
        decorators.insert(at, cst.Decorator(cst.parse_expression(f"{tf}.function")))
        yield "tf_function_forward", replaced(fn, fn.with_changes(decorators=decorators))
    if tf and isinstance(g.node, cst.FunctionDef):
        yield "tf_function_grad", replaced(g.node, g.node.with_changes(
            decorators=[cst.Decorator(cst.parse_expression(f"{tf}.function")), *g.node.decorators]))
    first = _first_gradient(g, site)
    if first is not None and tf:
        wrapped = cst.parse_expression(f"{tf}.constant(({cst.Module([]).code_for_node(first)}).numpy())")
        yield "numpy_in_grad", replaced(first, wrapped)
        cast = cst.parse_expression(f"{tf}.cast({cst.Module([]).code_for_node(first)}, {tf}.float16)")
        yield "dtype_changed", replaced(first, cast)
    calls = model.calls_reaching(site)
    call = next((c for c, _ in calls if c.args and all(a.keyword is None and not a.star for a in c.args)
                 and len(c.args) <= len(site.inputs)), None)
    if call is not None:
        keyword = call.with_changes(args=[a.with_changes(keyword=cst.Name(name), equal=cst.AssignEqual())
                                          for a, name in zip(call.args, site.inputs)])
        yield "keyword_call", replaced(call, keyword)
        if len(site.inputs) > len(call.args) or site.has_varargs:
            extra = [*call.args[:-1], call.args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                     cst.Arg(cst.Integer("3"))]
            yield "int_positional", replaced(call, call.with_changes(args=extra))
    del code


def value_mutants(module: cst.Module, site: GradientSite) -> Iterator[Mutant]:
    """Wrong values in a right formula: a sign error, a dropped constant (SELU's scale)."""
    first = _first_gradient(site.grad_fns[0], site) if site.grad_fns else None
    if first is None:
        return
    yield "sign_flipped", module.deep_replace(first, cst.UnaryOperation(cst.Minus(), _parenthesised(first))).code
    scope = site.grad_fns[0].scope
    exprs = [first] + [b for n in site.model.reads_in(first) for b in scope.bindings.get(n.value, [])
                       if isinstance(b, cst.BaseExpression)]
    for expr in exprs:
        product = next((p for p in _products(expr) if _constant(p.left) or _constant(p.right)), None)
        if product is not None:
            kept = product.right if _constant(product.left) else product.left
            yield "factor_dropped", module.deep_replace(product, _parenthesised(kept)).code
            return


def _parenthesised(expr: cst.BaseExpression) -> cst.BaseExpression:
    return expr if expr.lpar else expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _products(expr: cst.CSTNode) -> list[cst.BinaryOperation]:
    found: list[cst.BinaryOperation] = []

    class Find(cst.CSTVisitor):
        def visit_BinaryOperation(self, node):
            if isinstance(node.operator, cst.Multiply):
                found.append(node)

    expr.visit(Find())
    return found


def _constant(expr: cst.BaseExpression) -> bool:
    """A number other than 0 and 1 (`2.0`, `-0.5`), or a module constant (`SCALE`)."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return _constant(expr.expression) or isinstance(expr.expression, (cst.Integer, cst.Float))
    if isinstance(expr, (cst.Integer, cst.Float)):
        return float(expr.evaluated_value) not in (0.0, 1.0)
    return isinstance(expr, cst.Name) and expr.value.isupper() and len(expr.value) > 1


def _first_gradient(g, site: GradientSite) -> cst.BaseExpression | None:
    one_input = len(site.inputs) == 1 and not site.has_varargs
    # A literal pair is (input grads, var grads) with variables, else two inputs' gradients.
    pair_first = one_input or (not site.variables and len(site.inputs) == 2 and not site.has_varargs)
    for r in g.returns:
        if r.pair is not None and not isinstance(r.pair[0], (cst.Tuple, cst.List)) and pair_first:
            return r.pair[0] if not (isinstance(r.pair[0], cst.Name) and r.pair[0].value == "None") else None
        # A whole return value is the first input gradient only for a one-input forward (for
        # others it is every gradient at once: `tuple(...)`, `grads[:n]`).
        if (r.elements is None and r.value is not None and not isinstance(r.value, (cst.Name, cst.Tuple))
                and one_input):
            return r.value
        if r.elements and len(r.elements) == 1:
            return r.elements[0]
    return None


# ---- judging ---------------------------------------------------------------------------------

# Kinds whose harm is not in the gradients' values, which is all the runtime check compares:
# `tf.function` made inside the forward retraces on every call (12-20x slower in TensorFlow
# 2.21, CG001), with the same values.
NOT_IN_VALUES = frozenset({"tf_function_grad"})

def findings(source: str, path: str) -> collections.Counter:
    result = engine.lint_source(source, path)
    return collections.Counter(d.code for d in result.diagnostics)


def runtime_verdicts(source: str, name: str, workdir: Path, python: str) -> dict[str, str] | None:
    """Each custom gradient's verdict from `cglint --runtime=all` on `source`; None when TensorFlow
    could not judge every one (the module does not import here, a function was skipped)."""
    workdir.mkdir(parents=True, exist_ok=True)  # a /tmp cleaner may have taken it meanwhile
    target = workdir / name
    target.write_text(source)
    report = workdir / "runtime.json"
    report.unlink(missing_ok=True)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    subprocess.run([python, "-m", "cglint", "--isolated", "--no-cache", "--runtime=all", "--exit-zero",
                    "--output-format", "json", "--output-file", str(report), name], cwd=workdir,
                   capture_output=True, env=env, timeout=600)
    try:
        records = json.loads(report.read_text()).get("runtime") or []
    except (OSError, ValueError):
        return None
    verdicts = {f"{r['function']}:{r.get('line')}": r["verdict"] for r in records}
    if not verdicts or "skipped" in verdicts.values():
        return None
    return verdicts


def runtime_found(original: dict[str, str] | None, mutant: dict[str, str] | None) -> bool:
    """TensorFlow shows the mutant's gradients wrong where the original's were right."""
    if not original or not mutant:
        return False
    return any(original.get(k) == "match" and v in ("mismatch", "error") for k, v in mutant.items())


# ---- the project's own tests under `cglint trace` (--trace) ------------------------------------

FAILING = ("mismatch", "error")
TEST_FILE = re.compile(r"(test_.*|.*_test)\.py")


def ecosystem_src() -> Path:
    import ecosystem_check  # scripts/, on the path once ecosystem_corpus() ran

    return ecosystem_check.cache_dir(None) / "src"


def _contains(tree: cst.CSTNode, target: cst.CSTNode) -> bool:
    class Find(cst.CSTVisitor):
        found = False

        def on_visit(self, node):
            self.found = self.found or node is target
            return not self.found

    finder = Find()
    tree.visit(finder)
    return finder.found


def top_level_name(module: cst.Module, site: GradientSite) -> str | None:
    """The module-level function or class the site is written in: what the tests call."""
    target = site.forward if isinstance(site.forward, cst.CSTNode) else site.grad_fns[0].node
    for stmt in module.body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and _contains(stmt, target):
            return stmt.name.value
    return None


def project_tree(project: str, dest: Path, rel: str, mutated: str) -> None:
    """The ecosystem project's files (hard links: nothing of the cache is written), its checkout's
    files the wheel lacks (tests, a C extension built in place), and `mutated` at `rel`."""
    shutil.copytree(ecosystem_src() / project, dest, copy_function=os.link)
    checkout = trace_suites.CHECKOUTS_DIR / project
    for top, dirs, files in os.walk(checkout):
        dirs[:] = [d for d in dirs if d not in (".git", "__pycache__")]
        for name in files:
            at = Path(top, name).relative_to(checkout)
            at = Path(*at.parts[1:]) if at.parts[0] == "src" and len(at.parts) > 1 else at  # a src/ layout
            if not (dest / at).exists():
                (dest / at).parent.mkdir(parents=True, exist_ok=True)
                os.link(Path(top, name), dest / at)
    (dest / rel).unlink()  # a link into the cache: replaced, never written through
    (dest / rel).write_text(mutated)


def project_tests(tree: Path, rel: str, name: str | None, limit: int = 3) -> tuple[list[str], list[str]]:
    """At most `limit` test files of the project that exercise `name` of module `rel`: first one
    named after the module, then those that call `name` most, then those importing the module;
    and the tests in them that mention `name` (for `-k`; none: the whole files)."""
    parts = rel[:-3].split("/")
    dotted, module = ".".join(parts), parts[-1]
    called = re.compile(rf"\b{re.escape(name)}\b") if name else None
    ranked = []
    for path in tree.rglob("*.py"):
        if not TEST_FILE.fullmatch(path.name) or path.as_posix().endswith(rel):
            continue
        text = path.read_text(errors="replace")
        # named after the module and next to it (`foo_test.py`) or in a tests/ tree (`test_foo.py`)
        named = path.stem in (f"{module}_test", f"test_{module}") and (
            path.parent == tree / Path(rel).parent or "tests" in path.relative_to(tree).parts)
        calls = len(called.findall(text)) if called else 0
        imports = dotted in text or (".".join(parts[:-1]) in text and re.search(rf"\b{module}\b", text) is not None)
        if named or imports:
            ranked.append(((named, bool(calls), calls), path))
    files = [p for _, p in sorted(ranked, key=lambda r: r[0], reverse=True)[:limit]]
    tests: list[str] = []
    for path in files if called else []:
        try:
            nodes = ast.walk(ast.parse(path.read_text(errors="replace")))
        except SyntaxError:
            continue
        text = path.read_text(errors="replace").splitlines()
        tests += [n.name for n in nodes if isinstance(n, ast.FunctionDef) and n.name.startswith("test")
                  and called.search("\n".join(text[n.lineno - 1:n.end_lineno]))]
    return [p.relative_to(tree).as_posix() for p in files], sorted(set(tests))


# A pytest plugin for absl-based test files (TFP's, tf-models'): their flags parsed with their
# defaults, as `absltest.main()` would, so tests that read one (TFP's seeds) run under pytest.
ABSL_PLUGIN = """
def pytest_configure(config):
    try:
        from absl import flags
    except ImportError:
        return
    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
"""


def trace_run(tree: Path, files: list[str], tests: list[str], python: str, timeout: int) -> list[dict] | None:
    """`cglint trace -- python -m pytest FILES` in `tree` (first on the path): the report's verdicts,
    read from its file; None when no report was written. Pytest's options go by environment:
    absl-based tests parse the command line as their flags."""
    report = tree.parent / f"{tree.name}.trace.json"
    report.unlink(missing_ok=True)
    plugins = tree.parent / "plugins"
    plugins.mkdir(exist_ok=True)
    (plugins / "absl_flags_parsed.py").write_text(ABSL_PLUGIN)
    # one test file that cannot be imported here must not stop the others
    opts = ["-q", "-p", "no:cacheprovider", "-p", "absl_flags_parsed", "--continue-on-collection-errors"]
    opts += ["-k", " or ".join(tests)] if tests else []
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTEST_ADDOPTS": shlex.join(opts),
           "PYTHONPATH": os.pathsep.join([str(tree), str(ROOT), str(plugins)])}
    subprocess.run([python, "-m", "cglint", "trace", "--isolated", "--output-format", "json", "--output-file",
                    str(report), "--", "timeout", str(timeout), python, "-m", "pytest", *files],
                   cwd=tree, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=env, timeout=timeout + 600)
    try:
        return json.loads(report.read_text()).get("runtime") or []
    except (OSError, ValueError):
        return None


def _in_module(records: list[dict] | None, rel: str) -> dict[str, str]:
    """`function:line` -> "verdict: detail" for the verdicts in module `rel`."""
    return {f"{r.get('function')}:{r.get('line')}": f"{r.get('verdict')}: {(r.get('detail') or '')[:240]}"
            for r in records or [] if Path(r.get("path") or "").as_posix().endswith(rel)}


def _failing(verdict: str | None) -> bool:
    return (verdict or "").split(":")[0] in FAILING


def _new_failure(mutant: str, original: str | None) -> bool:
    """The mutant's verdict fails where the original's did not, or fails another way (an `error`
    where the original was a `mismatch`, or the reverse): a report the original does not give."""
    return _failing(mutant) and (not _failing(original) or mutant.split(":")[0] != original.split(":")[0])


class Tracer:
    """Each mutant of an ecosystem module traced under the project's own tests, against the same
    tests on the unmutated project (run once per module and test selection)."""

    def __init__(self, work: Path, python: str, timeout: int):
        self.work, self.python, self.timeout = work, python, timeout
        self.originals: dict[tuple, list[dict] | None] = {}
        self.false: list[str] = []

    def judge(self, path: Path, module: cst.Module, site: GradientSite, source: str, mutated: str) -> dict:
        rel_all = path.relative_to(ecosystem_src()).as_posix()
        project, rel = rel_all.split("/", 1)
        python = trace_suites.project_python(project, self.python)
        name = top_level_name(module, site)
        copy = self.work / "trace" / "project"
        shutil.rmtree(copy.parent, ignore_errors=True)
        copy.parent.mkdir(parents=True)
        project_tree(project, copy, rel, source)
        files, tests = project_tests(copy, rel, name)
        out = {"tests": files, "selected": len(tests), "calls": name}
        if not files:
            return {**out, "found": False, "reason": f"no test file of the project imports {rel} or calls {name}"}
        key = (rel, tuple(files), tuple(tests))
        if key not in self.originals:
            self.originals[key] = trace_run(copy, files, tests, python, self.timeout)
            self.false += [f"{rel_all} {k}: {v}" for k, v in _in_module(self.originals[key], rel).items()
                           if _failing(v)]
        original = _in_module(self.originals[key], rel)
        shutil.rmtree(copy)
        project_tree(project, copy, rel, mutated)
        verdicts = _in_module(trace_run(copy, files, tests, python, self.timeout), rel)
        reached = any(k.split(":")[0].rsplit(".", 1)[-1] == site.name for k in {**original, **verdicts})
        found = any(_new_failure(v, original.get(k)) for k, v in verdicts.items())
        out.update(original=original, mutant=verdicts, reached=reached, found=found)
        if not found:
            out["reason"] = (f"the tests ({', '.join(files)}) never reach {site.name}" if not reached else
                             f"reached; original {original}, mutant {verdicts}")
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ecosystem", action="store_true", help="add the ecosystem check's downloaded projects")
    ap.add_argument("--runtime", action="store_true", help="run each mutant with TensorFlow (slow)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter that runs --runtime's checks")
    ap.add_argument("--trace", action="store_true",
                    help="also run each ecosystem mutant's project tests under `cglint trace` (slow; --python's)")
    ap.add_argument("--trace-timeout", type=int, default=600, help="seconds per traced test run (default 600)")
    ap.add_argument("--kinds", nargs="+", help="only these mutation kinds")
    ap.add_argument("--limit", type=int, default=0, help="at most this many mutants per kind")
    ap.add_argument("--json", help="write every mutant's outcome here")
    args = ap.parse_args()
    corpus = [(p, "fixtures") for p in fixture_corpus()]
    if args.ecosystem:
        corpus += [(p, "ecosystem") for p in ecosystem_corpus()]
    rows: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    false_findings: list[str] = []
    runtime_fixtures: list[str] = []
    runtime_disagrees: list[str] = []
    outcomes = []
    sites = 0
    with tempfile.TemporaryDirectory(prefix="mutation-bench-") as tmp:
        work = Path(tmp)
        tracer = Tracer(work, args.python, args.trace_timeout) if args.trace else None
        for path, origin in corpus:
            source = path.read_text(errors="replace")
            result = engine.lint_source(source, path.name)
            if result.model is None or not result.model.sites:
                continue
            if result.diagnostics:
                # Correct code only: a module with findings is either a bug (the baseline's, a
                # runtime fixture's deliberate one) or a false finding, which the last line counts.
                if origin == "fixtures" and path.parent.name == "runtime":
                    runtime_fixtures.append(f"{path.relative_to(ROOT)}: {sorted(d.code for d in result.diagnostics)}")
                    continue
                false_findings += [f"{path.relative_to(ROOT) if origin == 'fixtures' else path}:{d.line} {d.code}"
                                   for d in result.diagnostics]
                continue
            module, model = result.module, result.model
            todo = [(site, kind, mutated) for site in model.sites
                    for kind, mutated in [*mutants(module, model, site), *value_mutants(module, site)]
                    # a mutation that changed nothing (`x.shape` is left alone) is not a bug
                    if mutated != source and (not args.kinds or kind in args.kinds)]
            sites += len(model.sites)
            # TensorFlow's verdicts on the original, run only for a module that has mutants to judge.
            original = runtime_verdicts(source, path.name, work, args.python) if args.runtime and todo else None
            if original and any(v != "match" for v in original.values()):
                # Not judged: the runtime disagrees with the original itself (a bug in correct-looking
                # code, or a false runtime verdict: listed so someone looks).
                runtime_disagrees.append(f"{path}: {original}")
                continue
            for site, kind, mutated in todo:
                row = rows[kind]
                if args.limit and row["mutants"] >= args.limit:
                    continue
                row["mutants"] += 1
                verdicts = (runtime_verdicts(mutated, path.name, work, args.python)
                            if original and kind not in NOT_IN_VALUES else None)
                if verdicts and all(v == "match" for v in verdicts.values()):
                    row["harmless"] += 1
                    outcomes.append({"file": str(path), "site": site.name, "kind": kind, "harmless": True})
                    continue
                row["counted"] += 1
                new = findings(mutated, path.name) - findings(source, path.name)
                row["found"] += bool(new)
                by_runtime = runtime_found(original, verdicts)
                row["found_runtime"] += bool(new) or by_runtime
                traced = tracer.judge(path, module, site, source, mutated) if tracer and origin == "ecosystem" else None
                row["traced"] += traced is not None
                row["found_trace"] += bool(traced and traced["found"])
                row["found_all"] += bool(new) or by_runtime or bool(traced and traced["found"])
                outcomes.append({"file": str(path), "site": site.name, "kind": kind, "found": sorted(new),
                                 "runtime": verdicts, "found_by_runtime": by_runtime, "trace": traced})
    print(f"Corpus: {len(corpus)} modules, {sites} custom-gradient functions in correct modules "
          f"({'with' if args.runtime else 'without'} TensorFlow's check of each mutant)\n")
    extra = " found with --runtime | recall with --runtime |" if args.runtime else ""
    extra += " traced (ecosystem) | found with trace | found, all | recall, all |" if args.trace else ""
    print("| mutation | mutants | harmless (TensorFlow) | counted | found | recall |" + extra)
    print("| --- | ---: | ---: | ---: | ---: | ---: |" + " ---: | ---: |" * bool(args.runtime)
          + " ---: | ---: | ---: | ---: |" * bool(args.trace))
    for kind in sorted(rows):
        r = rows[kind]
        recall = f"{r['found'] / r['counted']:.2f}" if r["counted"] else "-"
        line = f"| {kind} | {r['mutants']} | {r['harmless']} | {r['counted']} | {r['found']} | {recall} |"
        if args.runtime:
            both = f"{r['found_runtime'] / r['counted']:.2f}" if r["counted"] else "-"
            line += f" {r['found_runtime']} | {both} |"
        if args.trace:
            every = f"{r['found_all'] / r['counted']:.2f}" if r["counted"] else "-"
            line += f" {r['traced']} | {r['found_trace']} | {r['found_all']} | {every} |"
        print(line)
    print(f"\nFindings on the unmutated modules: {len(false_findings)}")
    for f in false_findings:
        print(f"  {f}")
    print(f"Runtime fixtures left out (their findings are the bugs they were written to show): {runtime_fixtures}")
    if args.runtime:
        print(f"Originals whose runtime verdicts are not all `match` (left out): {len(runtime_disagrees)}")
        for line in runtime_disagrees:
            print(f"  {line}")
    if args.trace:
        print(f"Trace verdicts `mismatch`/`error` in the unmutated modules under their tests: {len(tracer.false)}")
        for line in tracer.false:
            print(f"  {line}")
        missed = [o for o in outcomes if o.get("trace") and not (o["found"] or o["found_by_runtime"] or o["trace"]["found"])]
        print(f"Missed by all three: {len(missed)}")
        for o in missed:
            print(f"  {o['file']} {o['site']} ({o['kind']}): {o['trace']['reason']}")
    if args.json:
        Path(args.json).write_text(json.dumps(outcomes, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
