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
from cglint.gradcheck.report import GradientReport, next_step
from cglint.gradcheck.symptoms import for_finding
from cglint.runtime.plan import Planned, plan_file
from cglint.runtime.runner import run_module_checks, stop_all

_SUMMARY_KEYS = ("verdict", "reference", "max_rel_error", "detail")


def run_runtime(
    results: list[FileResult],
    everything: bool = False,
    timeout: float = 120.0,
    progress: "ModuleProgress | Callable[[str], None] | None" = None,
    tolerances: dict | None = None,
    memory_limit: int | None = None,
) -> list[dict]:
    """Checks the flagged functions (every site with `everything`) and returns the top-level
    `runtime` list; each diagnostic of a checked function gets its `runtime` summary.
    `tolerances` (`rtol`, `atol`, `probes` from `[tool.cglint.runtime]`) go to every check.
    `progress` is a `ModuleProgress` (see `terminal_progress`) or a callable given one line per
    module checked. `memory_limit` (MiB) caps each module's child (see `run_module_checks`)."""
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
        if not reachable:
            verdicts = []
        elif result.notebook is not None:  # a notebook runs as the module of its code cells
            from cglint.notebook import as_module

            with as_module(result) as (module_path, cwd):
                verdicts = run_module_checks(module_path, requests, timeout=timeout, cwd=cwd,
                                             memory_limit=memory_limit)
        else:
            verdicts = run_module_checks(result.path, requests, timeout=timeout, memory_limit=memory_limit)
        by_plan = dict(zip(map(id, reachable), verdicts))
        pairs = []
        for p in planned:
            verdict = by_plan.get(id(p)) or GradientReport.skipped(p.skip or "not checked").to_dict()
            pairs.append((p, verdict))
        return _attribute_import_failure(pairs)

    def checked(job):
        if display is not None:
            display.begin(job[0].path)
        try:
            return check(job)
        finally:
            if display is not None:
                display.done(job[0].path)

    display = progress if isinstance(progress, ModuleProgress) else None
    if display is not None:
        display.start(len(jobs))
    workers = max(1, min(len(jobs), os.cpu_count() or 1))
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            try:
                outcomes = list(zip(jobs, pool.map(checked, jobs)))
            except BaseException:  # Ctrl-C, SIGTERM, SIGHUP: children end now, not at their timeout
                pool.shutdown(wait=False, cancel_futures=True)
                stop_all()
                raise
    finally:
        if display is not None:
            display.stop()
    for (result, _), pairs in outcomes:
        for planned, verdict in pairs:
            if verdict.get("verdict") == "skipped":  # say what would check it
                verdict = {**verdict, "detail": next_step(verdict.get("detail") or "", "runtime", result.path)}
            summary = {k: verdict.get(k) for k in _SUMMARY_KEYS}
            for diag in planned.diagnostics:  # each finding by its own claim
                diag.runtime = for_finding(diag.code, verdict) or diag.runtime
            entry = {"path": result.path, "line": planned.line,
                     "function": planned.request.get("called_as") or planned.request["function"],
                     **summary, "inputs": verdict.get("inputs"), "seed": verdict.get("seed"),
                     "args": verdict.get("args", [])}
            if verdict.get("modes"):  # eager / tf.function / forward / second-order verdicts
                entry["modes"] = verdict["modes"]
            if verdict.get("claims"):  # a finding's own verdict where the function's hides it
                entry["claims"] = verdict["claims"]
            if verdict.get("sample"):  # the HTML report's plot data (the JSON format leaves it out)
                entry["sample"] = verdict["sample"]
            if result.notebook is not None:  # lines of a notebook are lines of a cell
                cell, entry["line"] = result.notebook.position(planned.line)
                entry = {"path": entry.pop("path"), "cell": cell, **entry}
            out.append(entry)
            done += 1
        if progress is not None and display is None:
            progress(f"runtime: {done}/{total} functions checked ({result.path})")
    return out


def _attribute_import_failure(pairs: list[tuple[Planned, dict]]) -> list[tuple[Planned, dict]]:
    """An import that failed with a traceback through a custom gradient of the module (its
    forward or grad fn, or TensorFlow's custom-gradient machinery running for it) confirms that
    function: `error` with the message, not `skipped: import failed`. The child reports the first
    lines of the functions in the traceback; each goes to the innermost function containing it."""
    failure = next((v for _, v in pairs if v.get("raised_in")), None)
    if failure is None:
        return pairs
    blamed: set[int] = set()
    for line in failure["raised_in"]:
        around = [p for p, _ in pairs if p.line <= line <= max(p.end, p.line)]
        if around:
            blamed.add(id(min(around, key=lambda p: max(p.end, p.line) - p.line)))
    error = {"verdict": "error", "reference": None, "max_rel_error": None,
             "detail": f"{failure['message']} (raised while importing the module)", "args": []}
    return [(p, {**error, "seed": v.get("seed")} if id(p) in blamed else v) for p, v in pairs]


class ModuleProgress:
    """Progress per module on stderr (rich): done/total, the module(s) being checked, elapsed
    time. Only made for an interactive terminal (`terminal_progress`); CI logs and pipes get
    nothing extra. Modules run a few at a time, so every module in flight is named."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.running: list[str] = []

    def start(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        console = Console(file=self.stream, force_terminal=True)
        self.bar = Progress(TextColumn("runtime"), BarColumn(), MofNCompleteColumn(), TextColumn("modules"),
                            TimeElapsedColumn(), TextColumn("{task.fields[module]}"), console=console)
        self.task = self.bar.add_task("runtime", total=total, module="")
        self.bar.start()

    def _show(self) -> None:
        self.bar.update(self.task, module=", ".join(self.running))

    def begin(self, path: str) -> None:
        self.running.append(path)
        self._show()

    def done(self, path: str) -> None:
        if path in self.running:
            self.running.remove(path)
        self.bar.update(self.task, advance=1)
        self._show()

    def stop(self) -> None:
        self.bar.stop()


def terminal_progress(total_hint: int = 0) -> ModuleProgress | None:
    """A progress display when stderr is an interactive terminal, else None (nothing printed)."""
    if not sys.stderr.isatty():
        return None
    return ModuleProgress(sys.stderr)
