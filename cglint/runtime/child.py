"""Child process of the runner: imports one user module and checks its functions.

Usage: python -m cglint.runtime.child REQUEST.json RESULTS.jsonl

Results are appended one JSON object per line and flushed as they are produced, so a crash or
hang part-way through keeps every verdict already reached. The first line records whether
the import worked. Nothing the user's code does can make this process print a traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
import sys
from pathlib import Path

from .lookup import lookup
from cglint.gradcheck.report import GradientReport


def skipped(detail: str, seed: int) -> dict:
    return GradientReport.skipped(detail, seed).to_dict()


def limit_memory(mib: int) -> None:
    """Caps the process's data segment (RLIMIT_DATA: heap and private writable mappings, where
    NumPy arrays and TensorFlow's CPU tensors live) at `mib` MiB; 0 leaves it alone. Not the
    address space (RLIMIT_AS): TensorFlow maps well over a gigabyte of libraries and reserves
    address space per thread, which would fail on a many-core machine long before memory runs
    out. Past the limit an allocation fails inside the module (MemoryError, or TensorFlow's
    ResourceExhaustedError) instead of the machine swapping or the OOM killer choosing."""
    global _OUTER_LIMIT
    import resource

    # A limit set outside cglint (`ulimit -v`, `prlimit`, a container) that is tighter than
    # ours is the one a MemoryError is blamed on (_memory_reason).
    space = resource.getrlimit(resource.RLIMIT_AS)[0]
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if space != resource.RLIM_INFINITY and (mib <= 0 or space < mib << 20):
        _OUTER_LIMIT = f"the address-space limit set outside cglint ({space >> 20} MiB: ulimit -v, prlimit --as)"
    elif soft != resource.RLIM_INFINITY and (mib <= 0 or soft < mib << 20):
        _OUTER_LIMIT = f"the data-segment limit set outside cglint ({soft >> 20} MiB: ulimit -d, prlimit --data)"
    if mib <= 0:
        return
    limit = mib << 20
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if soft == resource.RLIM_INFINITY or limit < soft:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


_OUTER_LIMIT: str | None = None


# What running out of memory looks like from Python and from TensorFlow's allocator.
_OUT_OF_MEMORY = ("MemoryError", "ResourceExhaustedError", "OOM when allocating")


def _memory_reason(detail: str, mib: int) -> str:
    limit = _OUTER_LIMIT or (f"the runtime memory limit ({mib} MiB, `memory-limit` in [tool.cglint.runtime])"
                             if mib > 0 else "memory")
    return f"out of memory: the module exhausted {limit}; {detail}"


def _out_of_memory(result: dict, mib: int) -> dict:
    """A check that ran out of memory says so: `skipped`, never an `error` verdict (the
    gradient was not shown wrong) nor a vague "forward raised"."""
    detail = result.get("detail") or ""
    if result.get("verdict") in ("error", "skipped") and any(m in detail for m in _OUT_OF_MEMORY):
        return {**result, "verdict": "skipped", "detail": _memory_reason(detail, mib)}
    return result


def _reason(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"module called sys.exit({exc.code!r})"
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text if len(text) <= 240 else text[:237] + "..."


_CG_FILE = os.path.join("tensorflow", "python", "ops", "custom_gradient.py")


def _functions_in_traceback(exc: BaseException, path: str) -> list[int]:
    """First lines (`co_firstlineno`) of the module's functions an import-time traceback passes
    through: its own frames (a forward or grad fn that raised), and the functions TensorFlow's
    custom-gradient machinery was running for (`f`, `grad_fn` in custom_gradient.py's frames,
    e.g. for "custom_gradient function expected to return 2 gradients"). The parent maps each
    line to the custom-gradient function whose source contains it."""
    target = os.path.realpath(path)
    lines: list[int] = []
    seen: set[int] = set()
    for e in (exc, exc.__cause__, exc.__context__):
        tb = e.__traceback__ if e is not None else None
        while tb is not None:
            code = tb.tb_frame.f_code
            found = []
            if code.co_filename.endswith(_CG_FILE):
                for value in list(tb.tb_frame.f_locals.values()):
                    fn = getattr(value, "__func__", value)
                    inner = getattr(fn, "__code__", None)
                    if inner is not None:
                        found.append(inner)
            elif code.co_name != "<module>":
                found.append(code)
            for c in found:
                if os.path.realpath(c.co_filename) == target and c.co_firstlineno not in seen:
                    seen.add(c.co_firstlineno)
                    lines.append(c.co_firstlineno)
            tb = tb.tb_next
    return lines


def _message(exc: BaseException) -> str:
    """TensorFlow's message on one line, variable reprs shortened to their names."""
    from cglint.gradcheck.report import first_line

    return first_line(exc, limit=300)


def _dotted(path: str) -> tuple[Path, Path, list[str]]:
    """The file, the directory above its packages, and its dotted name's parts."""
    file = Path(path).resolve()
    root, parts = file.parent, [file.stem]
    while (root / "__init__.py").exists():
        parts.insert(0, root.name)
        root = root.parent
    if file.stem == "__init__":
        parts.pop()
    return file, root, parts


def import_by_path(path: str):
    """Imports a module from its file path. Inside a package (directories with __init__.py)
    it is imported under its dotted name so relative imports work."""
    file, root, parts = _dotted(path)
    _load_shadowed_stdlib(root)
    sys.path.insert(0, str(root))
    if len(parts) > 1 or parts[0] != file.stem:
        return importlib.import_module(".".join(parts))
    # A top-level module named like one already loaded or in the standard library (`inspect.py`,
    # `random.py`) is imported under a name of its own: it must not replace that module for
    # TensorFlow and cglint.
    name = file.stem
    if name in sys.modules or name in getattr(sys, "stdlib_module_names", ()):
        name = f"_cglint_user_{name}"
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def import_statement_by_statement(path: str):
    """The module again, each top-level statement run on its own and one that raises passed over:
    a module whose import-time demo fails (often with the very bug, a float32 gradient for a
    float16 input) still defines its functions, and those can be checked."""
    import ast

    file, root, parts = _dotted(path)
    name = ".".join(parts) if len(parts) > 1 else f"_cglint_user_{file.stem}"
    spec = importlib.util.spec_from_file_location(name, file, submodule_search_locations=None)
    module = importlib.util.module_from_spec(spec)
    if len(parts) > 1:
        module.__package__ = ".".join(parts[:-1])
    sys.modules[name] = module
    tree = ast.parse(file.read_text(encoding="utf-8", errors="replace"), str(file))
    skipped = 0
    for stmt in tree.body:
        try:
            exec(compile(ast.Module([stmt], []), str(file), "exec"), module.__dict__)
        except Exception:  # noqa: BLE001 - the statement that failed the import, or one after it
            skipped += 1
    return module, skipped


def _load_shadowed_stdlib(root: Path) -> None:
    """Standard-library modules that a file in `root` would shadow once `root` leads sys.path
    are imported first, from the standard library, so TensorFlow and the user's own imports
    get the real ones; the user's file is imported under a name of its own (import_by_path)."""
    names = getattr(sys, "stdlib_module_names", ())
    try:
        stems = {p.stem for p in root.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    except OSError:
        return
    for name in sorted(stems & set(names)):
        if name not in sys.modules and not name.startswith("_"):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - a platform module that does not import here
                pass


def _params(fn) -> list[str]:
    from cglint.gradcheck.check import resolve

    forward, _ = resolve(fn)
    try:
        return [p.name for p in inspect.signature(forward).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def _positional(fn) -> list[inspect.Parameter] | None:
    """`fn`'s positional parameters, None when Python cannot tell."""
    try:
        return [p for p in inspect.signature(fn).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return None


def _passed(fn, request: dict) -> int | None:
    """How many positional inputs to pass: parameters with defaults are passed only as far as the
    module's callers do (`request["arity"]`) or a call site's known value needs; None for all."""
    from cglint.gradcheck.check import resolve

    params = _positional(resolve(fn)[0])
    if params is None:
        return None
    required = sum(p.default is p.empty for p in params)
    if required == len(params) or (params and params[0].name in ("self", "cls")):
        return None
    hinted = max((int(k) + 1 for k in request.get("hints") or {}), default=0)
    return max(required, hinted, min(int(request.get("arity") or 0), len(params)))


def check_one(module, source: str, request: dict, seed: int) -> dict:
    from cglint.gradcheck import budget
    from cglint.gradcheck.check import check_gradient, forward_failure, no_inputs_report
    from .spec import SpecError, build_inputs, candidate_specs, complex_variants, first_inputs, parse_spec

    name = request["function"]
    if request.get("registered") or request.get("defun"):
        from .registered import check_defun, check_registered

        return (check_registered if request.get("registered") else check_defun)(module, request, seed)
    if request.get("reach"):
        by = check_by_building if "class" in request["reach"] else check_by_calling
        return by(module, source, request, seed)
    fn, why = lookup(module, name)
    if fn is None:
        return skipped(why, seed)
    params = _params(fn)
    spec_text = request.get("inputs")
    try:
        if spec_text:
            inputs = build_inputs(parse_spec(spec_text), params, module, seed)
        else:
            inputs, failures = None, []
            tried = candidate_specs(source, name, request.get("shapes"),
                                    hints=request.get("hints"), ranks=request.get("ranks"))
            if (passed := _passed(fn, request)) is not None:
                tried = first_inputs(tried, passed)
            if request.get("complex"):  # after the real candidates, complex ones (kept in order)
                tried = list(dict.fromkeys([*tried, *(v for t in tried[:3] for v in complex_variants(t))]))
            for spec_text in tried:
                candidate = build_inputs(parse_spec(spec_text), params, module, seed)
                failures.append(forward_failure(fn, *candidate))
                if failures[-1] is None:
                    inputs = candidate
                    break
            if inputs is None:
                return {**no_inputs_report(failures, seed).to_dict(), "inputs": None}
    except SpecError as e:
        return skipped(f"bad input spec: {e}", seed)
    # The same memory budget as `cglint trace`: half this process's peak (the module and its
    # inputs) + 300 MB; over it, a slice of the batch or `skipped` with the measure.
    inputs, sliced, over = budget.fit_memory(fn, list(inputs), request.get("memory_budget"),
                                             budget.RUNTIME_CHECK_COPIES)
    if over is not None:
        return {**skipped(over, seed), "inputs": spec_text}
    report = check_gradient(fn, *inputs, seed=seed, rtol=request.get("rtol"),
                            atol=request.get("atol"), probes=request.get("probes", 3),
                            intentional=bool(request.get("intentional", False)),
                            order=int(request.get("order", 1)),
                            complex_probe=bool(request.get("complex", False)),
                            half_probe=request.get("half"),
                            own_inputs=bool(spec_text) and any(s.kind == "module" for s in parse_spec(spec_text)))
    out = {**report.to_dict(), "inputs": spec_text}
    if sliced:
        out["detail"] = f"{out.get('detail') or ''} (checked {sliced})".lstrip()
    return out


_TRACE_HINT = ("`cglint trace -- pytest` (or `pytest --cglint`) checks it where your own code builds and "
               "calls it")


_SIZE = 4  # what a constructor's required arguments get; inputs with this many features are tried


def _instances(module, cls) -> list:
    """The module's own instances of `cls` (`layer = Power(3.0)` at module level), else one built
    with the constructor's defaults, else with a small integer for each required argument (a
    layer's `units`, a quantiser's `channels`, a `rank`: sizes are what constructors mostly need)."""
    own = [v for v in list(vars(module).values()) if isinstance(v, cls)]
    if own:
        return own[:4]
    try:
        return [cls()]
    except TypeError as e:
        try:
            required = [p for p in inspect.signature(cls).parameters.values()
                        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            raise e from None
        if not required:
            raise
        try:
            return [cls(*[_SIZE] * len(required))]
        except Exception:
            raise e from None


def _with_size(shapes, cls) -> list | None:
    """The module's shapes, and `(_SIZE,)` when the constructor needs arguments (built with sizes
    of `_SIZE`, the layer expects that many features)."""
    try:
        needs = any(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                    for p in inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        needs = False
    if not needs or shapes is None:
        return shapes
    return [*shapes, [_SIZE]]


def check_by_building(module, source: str, request: dict, seed: int) -> dict:
    """A custom gradient made inside a method (a Keras layer's `call`, a `tf.Module`'s
    `__call__`): builds the class (the module's own instances, or the constructor's defaults) and
    calls the method on candidate inputs with `cglint trace`'s instrumentation active, which
    checks the custom gradient at its first real call, with the real closure and variables."""
    from cglint.trace import instrument

    from .spec import SpecError, build_inputs, candidate_specs, parse_spec

    reach = request["reach"]
    cls = getattr(module, reach["class"], None)
    if not inspect.isclass(cls):
        return skipped(f"not reachable by import: {reach['class']} not found in the module", seed)
    _seed_everything(seed)  # weights the constructor or build initialise randomly: the same every run
    try:
        instances = _instances(module, cls)
    except Exception as e:  # noqa: BLE001 - the user's constructor
        return skipped(f"{reach['class']}() needs constructor arguments ({_reason(e)}); {_TRACE_HINT}", seed)
    qualname = f"{reach['class']}.{reach['method']}"
    tracer = instrument.install(1, {k: request[k] for k in ("rtol", "atol", "probes", "memory_budget")
                                             if request.get(k)})
    events: list[dict] = []
    tracer.sinks.append(events.append)
    tracer.local.busy = False  # paused again below: the child's other checks are not traced
    try:
        failures = []
        for instance, method in _callers(instances, reach):
            for spec_text in candidate_specs(source, qualname, _with_size(request.get("shapes"), cls)):
                try:
                    inputs = build_inputs(parse_spec(spec_text), instrument_params(source, qualname), module, seed)
                except SpecError:
                    continue
                before = len(events)
                try:
                    method(*inputs)
                except Exception as e:  # noqa: BLE001 - wrong shapes for this candidate: try the next
                    failures.append(_reason(e))
                if (got := _reached(events[before:], reach["qualname"], spec_text, seed, reach.get("line"))) is not None:
                    return got
    finally:
        tracer.sinks.remove(events.append)
        tracer.local.busy = True
    return _not_reached(qualname, failures, seed)


def _callers(instances: list, reach: dict):
    """What to call on each instance: a layer through `__call__`, which builds it from the input's
    shape. A method that is itself the custom gradient (`reach["direct"]`) is tried after the
    instance's own call, which builds a Keras layer's weights first and may reach it."""
    for instance in instances:
        if reach["method"] in ("call", "__call__"):
            yield instance, instance
            continue
        if reach.get("direct") and callable(instance):
            yield instance, instance
        yield instance, getattr(instance, reach["method"])


def _reached(events: list[dict], qualname: str, spec_text: str, seed: int, line: int | None = None) -> dict | None:
    """The verdict trace's instrumentation gave the custom gradient `qualname` (a lambda: at
    `line`) in `events`: its check, or the error its forward or grad fn raised."""
    mine = [e for e in events if e.get("event") in ("check", "raised") and e["function"]["qualname"] == qualname
            and (line is None or e["function"].get("firstlineno") == line)]
    raised = [e for e in mine if e["event"] == "raised"]
    if raised:
        return {"verdict": "error", "reference": None, "max_rel_error": None, "seed": seed,
                "detail": raised[0]["message"], "inputs": spec_text}
    return {**mine[0]["report"], "inputs": spec_text} if mine else None


def _not_reached(qualname: str, failures: list[str], seed: int) -> dict:
    why = f"; the last call raised {failures[-1]}" if failures else ""
    return skipped(f"calling {qualname} on the inputs tried never reached the custom gradient{why}; {_TRACE_HINT}",
                   seed)


def check_by_calling(module, source: str, request: dict, seed: int) -> dict:
    """A custom gradient made inside a module-level function: a closure over the function's
    arguments (`def clip(x, limit): @tf.custom_gradient def op(t): ...; return op(x)`), or a
    factory that returns it (`def make_op(scale): ...; return op`). Calls the function on
    candidate inputs, and a callable it returns on candidate inputs for the custom gradient's
    own parameters, with `cglint trace`'s instrumentation active: the custom gradient is checked
    at its first real call, with the real closure."""
    from cglint.trace import instrument

    from .spec import SpecError, build_inputs, candidate_specs, first_inputs, parse_spec, spec_count

    reach = request["reach"]
    outer = getattr(module, reach["function"], None)
    if not callable(outer):
        return skipped(f"not reachable by import: {reach['function']} not found in the module", seed)
    _seed_everything(seed)
    inner = f"{reach['function']}.{reach['site']}"  # where `spec` finds the site's own parameters
    tracer = instrument.install(1, {k: request[k] for k in ("rtol", "atol", "probes", "memory_budget")
                                             if request.get(k)})
    events: list[dict] = []
    tracer.sinks.append(events.append)
    tracer.local.busy = False  # paused again below: the child's other checks are not traced
    failures: list[str] = []

    def attempts(fn, qualname: str, limit: int):
        # Parameters with defaults keep them (`axis=None`, `num_bits=8`: the configuration the
        # function is written for); the others get candidate tensors.
        params = _positional(fn)
        specs = candidate_specs(source, qualname, request.get("shapes"))
        if params is not None:
            specs = first_inputs(specs, sum(p.default is p.empty for p in params))
        for spec_text in specs[:limit]:
            try:
                inputs = build_inputs(parse_spec(spec_text), instrument_params(source, qualname)[:spec_count(spec_text)],
                                      module, seed)
            except SpecError:
                continue
            before, result = len(events), None
            try:
                result = fn(*inputs)
            except Exception as e:  # noqa: BLE001 - wrong inputs for this candidate: try the next
                failures.append(_reason(e))
            yield spec_text, before, result

    def judged(got: dict) -> dict:
        # The function's arguments were made up here (an `expected_gradient` the grad fn asserts
        # on, a flag it branches on): an exception is not evidence against the user's code.
        if got["verdict"] != "error":
            return got
        return skipped(f"raised when {reach['function']} was called on made-up arguments ({got['detail']}); "
                       f"{_TRACE_HINT}", seed)

    try:
        for name in reach.get("applied", []):
            # The module's own applications of a decorator factory: its arguments, not made-up ones.
            if callable(applied := getattr(module, name, None)):
                for spec_text, before, _ in attempts(applied, name, 8):
                    if (got := _reached(events[before:], reach["qualname"], spec_text, seed, reach.get("line"))) is not None:
                        return got
        if reach.get("only_applied"):
            return _not_reached(", ".join(reach["applied"]), failures, seed)
        for spec_text, before, made in attempts(outer, reach["function"], 8):
            if (got := _reached(events[before:], reach["qualname"], spec_text, seed, reach.get("line"))) is not None:
                return judged(got)
            if callable(made) and not hasattr(made, "shape"):  # a factory: call what it made
                for inner_spec, start, _ in attempts(made, inner, 4):
                    if (got := _reached(events[start:], reach["qualname"], inner_spec, seed, reach.get("line"))) is not None:
                        return judged(got)
    finally:
        tracer.sinks.remove(events.append)
        tracer.local.busy = True
    return _not_reached(reach["function"], failures, seed)


def _seed_everything(seed: int) -> None:
    if "keras" in sys.modules:
        sys.modules["keras"].utils.set_random_seed(seed)  # Python, NumPy, TensorFlow and Keras's own
    else:
        import tensorflow as tf

        tf.random.set_seed(seed)


def instrument_params(source: str, qualname: str) -> list[str]:
    from .spec import parameters

    return parameters(source, qualname) or ["x"]


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text())
    out = open(argv[1], "a", encoding="utf-8")

    def emit(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    seed = int(request.get("seed", 0))
    path = request["module_path"]
    mib = int(request.get("memory_limit_mib", 0))
    try:
        limit_memory(mib)
        import tensorflow  # noqa: F401 - paid before the user's import, not inside its timeout story

        source = Path(path).read_text(encoding="utf-8", errors="replace")
        module = import_by_path(path)
    except BaseException as e:  # SystemExit and KeyboardInterrupt included: report, don't die
        reason = _reason(e)
        failure = {"import_failed": _memory_reason(reason, mib) if isinstance(e, MemoryError) or any(
            m in reason for m in _OUT_OF_MEMORY) else reason}
        try:
            raised_in = _functions_in_traceback(e, path)
            if raised_in:
                failure.update(raised_in=raised_in, message=_message(e))
        except BaseException:
            pass
        module = None
        if not failure.get("raised_in") and isinstance(e, Exception) and not isinstance(e, MemoryError) \
                and not any(m in reason for m in _OUT_OF_MEMORY):
            # The failure went through none of the module's custom gradients: its definitions
            # may still be whole. (One that did is that function's error: the session says so.)
            try:
                module, _ = import_statement_by_statement(path)
            except BaseException:
                module = None
        if module is None:
            emit(failure)
            return 0
        failed_import = reason
        partial = f"the module's import raised {reason}; checked with its other statements run"
        emit({"imported": True, "partial": partial})
    else:
        partial = None
        emit({"imported": True})
    for i, req in enumerate(request["functions"]):
        reach = req.get("reach") or {}
        if partial and not hasattr(module, reach.get("class") or reach.get("function") or req["function"].split(".")[0]):
            # What was asked for is not defined once the failing statements are passed over.
            emit({"index": i, "result": skipped(f"import failed: {failed_import}", seed)})
            continue
        try:
            result = check_one(module, source, req, seed)
        except BaseException as e:
            result = skipped(f"the check itself failed: {_reason(e)}", seed)
        if partial:
            result = {**result, "detail": f"{result.get('detail') or ''} ({partial})".lstrip()}
        emit({"index": i, "result": _out_of_memory(result, mib)})
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    code = main(sys.argv[1:])
    # The results are written and flushed: a thread the module left running (a server, a
    # loader) must not keep the child alive until the timeout.
    os._exit(code)
