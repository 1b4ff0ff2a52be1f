"""`cglint --runtime`: after the static pass, check functions numerically and attach verdicts.

Plans from the static model (`plan.py`), runs one child process per module (`runner.py`, which
never imports TensorFlow here), a few modules at a time, and puts each verdict on the
diagnostics of its function and in the run's top-level `runtime` list.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from cglint.diagnostics import FileResult
from cglint.runtime.plan import Planned, plan_file
from cglint.runtime.report import GradientReport
from cglint.runtime.runner import run_module_checks

# What a verdict means for a static finding, in the words the text output uses.
VERDICT_WORDS = {
    "mismatch": "confirmed",
    "error": "confirmed",
    "match": "not confirmed",
    "intentional": "intentional",
    "skipped": "not checked",
}
FAILING = frozenset({"mismatch", "error"})
_SUMMARY_KEYS = ("verdict", "reference", "max_rel_error", "detail")


def run_runtime(
    results: list[FileResult],
    everything: bool = False,
    timeout: float = 120.0,
    progress: Callable[[str], None] | None = None,
    tolerances: dict | None = None,
) -> list[dict]:
    """Checks the flagged functions (every site with `everything`) and returns the top-level
    `runtime` list; each diagnostic of a checked function gets its `runtime` summary.
    `tolerances` (`rtol`, `atol`, `probes` from `[tool.cglint.runtime]`) go to every check."""
    jobs: list[tuple[FileResult, list[Planned]]] = []
    for result in results:
        planned = plan_file(result, everything)
        if planned:
            jobs.append((result, planned))
    total = sum(len(p) for _, p in jobs)
    done = 0
    out: list[dict] = []

    def check(job: tuple[FileResult, list[Planned]]) -> list[tuple[Planned, dict]]:
        result, planned = job
        reachable = [p for p in planned if p.skip is None]
        requests = [{**{k: v for k, v in (tolerances or {}).items() if v is not None}, **p.request} for p in reachable]
        verdicts = run_module_checks(result.path, requests, timeout=timeout) if reachable else []
        by_plan = dict(zip(map(id, reachable), verdicts))
        pairs = []
        for p in planned:
            verdict = by_plan.get(id(p)) or GradientReport.skipped(p.skip or "not checked").to_dict()
            pairs.append((p, verdict))
        return pairs

    workers = max(1, min(len(jobs), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for (result, _), pairs in zip(jobs, pool.map(check, jobs)):
            for planned, verdict in pairs:
                summary = {k: verdict.get(k) for k in _SUMMARY_KEYS}
                for diag in planned.diagnostics:
                    diag.runtime = summary
                out.append({"path": result.path, "function": planned.request["function"], "line": planned.line,
                            **summary, "inputs": verdict.get("inputs"), "seed": verdict.get("seed"),
                            "args": verdict.get("args", [])})
                done += 1
            if progress is not None:
                progress(f"runtime: {done}/{total} functions checked ({result.path})")
    return out


def describe(summary: dict) -> str:
    """`confirmed: d/dx off by 110% vs autodiff`, `not confirmed: matches autodiff to 3e-7`."""
    return f"{VERDICT_WORDS.get(summary['verdict'], summary['verdict'])}: {summary.get('detail') or summary['verdict']}"


def terminal_progress(total_hint: int) -> Callable[[str], None] | None:
    """Progress lines on stderr, only for an interactive terminal and more than a few functions."""
    if not sys.stderr.isatty() or total_hint <= 3:
        return None
    return lambda line: print(line, file=sys.stderr, flush=True)
