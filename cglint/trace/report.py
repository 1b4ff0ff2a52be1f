"""Turns the tracer's events into the run's report: one verdict per custom-gradient function,
mapped back to file, def line and qualified name, merged with the static findings of those files
(each finding inside a checked function carries its verdict, as `--runtime` does).

Events (see `cglint.trace.instrument`): `check` (a numeric check: `how` is `eager` — at a real
eager call, which may also cover signatures first seen under tf.function — or `exit` — after the
command, on random inputs of a recorded signature), `symbolic` (a first call under tf.function)
and `raised` (TensorFlow's custom-gradient machinery raised for the function while the program
ran).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from cglint.gradcheck.report import FAILING
from cglint.gradcheck.symptoms import for_finding

_RANK = {"error": 4, "mismatch": 3, "intentional": 2, "match": 1, "skipped": 0}
_SUMMARY_KEYS = ("verdict", "reference", "max_rel_error", "detail")
# Carried from the worst check to the `runtime` entry for the HTML report (seed, modes, plot data).
_REPORT_EXTRAS = ("seed", "modes", "sample", "claims")


# The traced command writes the events; a file larger than this is not read (a runaway loop).
MAX_EVENTS_BYTES = 256 * 1024 * 1024


def read_events(directory: str) -> list[dict]:
    """The events the traced command's processes wrote. The command could write anything there
    (its environment names the directory): a line that is not an event of the expected shape is
    dropped, like a line cut short by a crash."""
    from cglint import files

    events = []
    for path in sorted(Path(directory).glob("events-*.jsonl")):
        try:
            data, _ = files.read_bytes(str(path), MAX_EVENTS_BYTES, what="an events file")
        except (OSError, ValueError):
            continue
        for line in data.decode("utf-8", errors="replace").splitlines():
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):  # a line cut short, or nested beyond reason
                continue
            if valid_event(event):
                events.append(event)
    return events


def _str(value, optional: bool = False) -> bool:
    return isinstance(value, str) or (optional and value is None)


def _strings(value) -> bool:
    return value is None or (isinstance(value, list) and all(isinstance(v, str) for v in value))


def valid_event(e) -> bool:
    """Whether `e` has the shape the report reads (see instrument.py, which writes them)."""
    if not isinstance(e, dict):
        return False
    k = e.get("function")
    if not (isinstance(k, dict) and _str(k.get("path", "")) and _str(k.get("qualname", ""))
            and type(k.get("firstlineno", 0)) is int and _str(e.get("event"), True)
            and _str(e.get("context"), True)):
        return False
    kind = e.get("event")
    if kind == "check":
        r = e.get("report")
        return (isinstance(r, dict) and _str(r.get("verdict"), True) and _str(r.get("reference"), True)
                and _str(r.get("detail"), True) and _str(r.get("sliced"), True)
                and (r.get("max_rel_error") is None or type(r.get("max_rel_error")) in (int, float))
                and isinstance(r.get("args", []), list) and all(isinstance(a, dict) for a in r.get("args", []))
                and _str(e.get("how")) and _str(e.get("signature"))
                and _strings(e.get("covers")) and _strings(e.get("variant")) and _str(e.get("inputs"), True))
    if kind == "symbolic":
        return _str(e.get("signature"))
    if kind == "raised":
        return _str(e.get("message")) and _str(e.get("where"), True) and _str(e.get("at"), True)
    return True


@dataclass
class Function:
    path: str
    firstlineno: int
    qualname: str
    checks: list[dict] = field(default_factory=list)
    symbolic: list[dict] = field(default_factory=list)
    raised: list[dict] = field(default_factory=list)
    contexts: list[str] = field(default_factory=list)


def group(events: list[dict]) -> list[Function]:
    """Events per function, in first-seen order (processes merged)."""
    by_key: dict[tuple, Function] = {}
    for e in events:
        k = e.get("function") or {}
        key = (os.path.realpath(k.get("path", "")), k.get("firstlineno", 0), k.get("qualname", ""))
        fn = by_key.get(key)
        if fn is None:
            fn = by_key[key] = Function(k.get("path", ""), k.get("firstlineno", 0), k.get("qualname", ""))
        {"check": fn.checks, "symbolic": fn.symbolic, "raised": fn.raised}.get(e.get("event"), []).append(e)
        ctx = e.get("context")
        if ctx and ctx not in fn.contexts:
            fn.contexts.append(ctx)
    return _merge_autograph_copies(list(by_key.values()))


def _merge_autograph_copies(functions: list[Function]) -> list[Function]:
    """An autograph-converted copy maps back to the user's line under the qualname autograph's
    factory leaves (`call.<locals>.op` for `Layer.call.<locals>.op`): one function with the
    entry of the full name."""
    order = {id(f): i for i, f in enumerate(functions)}  # first seen, a merged one by its first copy
    out: list[Function] = []
    for fn in sorted(functions, key=lambda f: -len(f.qualname)):
        same = next((o for o in out if os.path.realpath(o.path) == os.path.realpath(fn.path)
                     and o.firstlineno == fn.firstlineno and o.qualname.endswith("." + fn.qualname)), None)
        if same is None:
            out.append(fn)
            continue
        order[id(same)] = min(order[id(same)], order[id(fn)])
        same.checks += fn.checks
        same.symbolic += fn.symbolic
        same.raised += fn.raised
        same.contexts += [c for c in fn.contexts if c not in same.contexts]
    return sorted(out, key=lambda f: order[id(f)])


def how_checked(check: dict, others: list[dict] = ()) -> str:
    """How `check` ran; where the function's checks closed over other values (a layer used twice
    with other settings), the values that set this one apart."""
    text = _how_checked(check)
    if check["report"].get("sliced"):
        sliced = check["report"]["sliced"]
        # A slice for memory carries its own measure; one for the inputs' size says so here.
        text += f", {sliced}" if sliced.endswith(")") else f", {sliced} (the inputs exceed the check's budget)"
    variants = {tuple(c.get("variant") or ()) for c in others}
    if len(variants) > 1:
        common = set.intersection(*map(set, variants))
        own = [p for p in check.get("variant") or () if p not in common]
        if own:
            text += f", where {', '.join(own)}"
    return text


def _how_checked(check: dict) -> str:
    if check["report"].get("verdict") == "skipped":
        when = "after the command" if check["how"] == "exit" else "at its first eager call"
        return f"called with {check['signature']}; not checked {when}"
    if check["how"] == "exit":
        seen = ", ".join(check.get("covers") or [check["signature"]])
        return (f"first called under tf.function with {seen}; checked after the command "
                f"on random inputs {check.get('inputs') or ''}").rstrip()
    if check.get("covers"):
        return (f"first called under tf.function with {', '.join(check['covers'])}; checked at a later "
                f"eager call with {check['signature']}")
    return f"checked at its first eager call with {check['signature']}"


def verdict_of(fn: Function) -> dict:
    """The function's verdict: an error TensorFlow raised while the program ran wins (it is a
    confirmation, whatever a check on other inputs said), else the worst check."""
    contract = [r for r in fn.raised if r.get("where") != "forward"]
    ran = any(c["report"].get("verdict") != "skipped" for c in fn.checks)
    if contract or (fn.raised and not ran):
        r = (contract or fn.raised)[0]
        at = r.get("at")
        where = f" at {_display_path(at, Path.cwd())}" if at else ""
        detail = r["message"] if contract else f"the forward raised at every call the command made: {r['message']}"
        seen = "seen" if r.get("where") == "override" else "raised"  # an override map TensorFlow ignored
        return {"verdict": "error", "reference": None, "max_rel_error": None,
                "detail": detail, "checked": f"{seen} while the command ran{where}"}
    if fn.checks:
        worst = max(fn.checks, key=lambda c: _RANK.get(c["report"].get("verdict"), 0))
        summary = {k: worst["report"].get(k) for k in _SUMMARY_KEYS}
        extra = {k: worst["report"][k] for k in _REPORT_EXTRAS if worst["report"].get(k) is not None}
        return {**summary, "checked": how_checked(worst, fn.checks), "args": worst["report"].get("args", []),
                **extra}
    sig = fn.symbolic[0]["signature"] if fn.symbolic else "?"
    return {"verdict": "skipped", "reference": None, "max_rel_error": None,
            "detail": f"first called under tf.function with {sig}, and the process ended before "
                      "cglint's exit check could run (os._exit or a crash)", "checked": "not checked"}


def _display_path(path: str, cwd: Path) -> str:
    try:
        return Path(os.path.abspath(path)).relative_to(cwd).as_posix()
    except ValueError:
        return path


def build(functions: list[Function], settings=None, cwd: Path | None = None):
    """Returns (file results with verdicts attached to their findings, the `runtime` list)."""
    from cglint import engine

    cwd = Path(os.path.abspath(cwd or Path.cwd()))
    results = {}
    runtime = []
    for fn in functions:
        display = _display_path(fn.path, cwd)
        result = results.get(display)
        if result is None and os.path.isfile(fn.path):
            try:
                rules = settings.rules_for(display) if settings is not None else None
                result = engine.lint_file(display if os.path.exists(display) else fn.path,
                                          *([rules] if rules is not None else []))
            except Exception:
                result = None
            if result is not None:
                results[display] = result
        verdict = verdict_of(fn)
        if verdict.get("verdict") == "skipped":  # say what would check it
            from cglint.gradcheck.report import next_step

            verdict = {**verdict, "detail": next_step(verdict.get("detail") or "", "trace", display)}
        line, name = fn.firstlineno, fn.qualname
        site_span = _site_span(result, fn.firstlineno) if result is not None else None
        if site_span is not None:
            start, end, line, wrapper_line = site_span
            book = getattr(result, "notebook", None)  # a notebook's findings count lines in cells
            for d in result.diagnostics:  # each finding by its own claim
                at = book.module_line(d) if book is not None else d.line
                if start <= at <= end or at == wrapper_line:
                    d.runtime = for_finding(d.code, verdict) or d.runtime
        cell = None
        if result is not None and getattr(result, "notebook", None) is not None:  # as --runtime says it
            cell, line = result.notebook.position(line)
        runtime.append({"path": display, **({"cell": cell} if cell is not None else {}), "function": name, "line": line,
                        **{k: verdict.get(k) for k in _SUMMARY_KEYS}, "checked": verdict["checked"],
                        "tests": fn.contexts, "args": verdict.get("args", []),
                        **{k: verdict[k] for k in _REPORT_EXTRAS if k in verdict}})
    return list(results.values()), runtime


def _site_span(result, firstlineno: int):
    """(first line, last line, def line, wrapper line) of the custom-gradient site whose code
    starts at `firstlineno` (Python counts a decorated def from its first decorator)."""
    model = getattr(result, "model", None)
    if model is None or not model.sites:
        return None
    best = None
    for site in model.sites:
        start, end, def_line, wrapper_line = site.lines
        if start == firstlineno or def_line == firstlineno:
            return start, end, def_line, wrapper_line
        if start <= firstlineno <= end and (best is None or end - start < best[1] - best[0]):
            best = (start, end, def_line, wrapper_line)
    return best


def failing(runtime: list[dict]) -> bool:
    return any(r["verdict"] in FAILING for r in runtime)


def summary_line(runtime: list[dict], exit_status: int | None = None) -> str:
    status = f" (the command exited with status {exit_status})" if exit_status is not None else ""
    if not runtime:
        return f"cglint trace: no custom gradient was called; nothing was checked{status}."
    counts: dict[str, int] = {}
    for r in runtime:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    parts = ", ".join(f"{n} {v}" for v, n in sorted(counts.items(), key=lambda kv: -_RANK.get(kv[0], 0)))
    n = len(runtime)
    return f"cglint trace: {n} custom gradient{'s' if n != 1 else ''} checked: {parts}{status}."
