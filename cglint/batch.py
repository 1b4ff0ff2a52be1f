"""Linting many files for a report: the cache, then a process pool for what is left.

Every file is read and given the text prefilter here, in order. What mentions
`custom_gradient` is looked up in the cache; the rest of the work (quick scan, libcst, rules)
runs in this process, or, when enough files need it to pay for starting workers, in a pool
of `jobs` processes. Results come back in the order of `paths` whatever finished first, so
the output is the same with any `--jobs`.

Only for runs that report (see `cache.usable_for`): results from workers or the cache carry
each fix's description and safety, not its tree edits.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Callable, Sequence

from cglint import engine, files, quickscan
from cglint.cache import Cache, strip
from cglint.diagnostics import FileResult

# Below this many files to parse, one process is faster than starting workers (each must
# import libcst and the rules: ~0.3 s of CPU, paid in parallel).
MIN_FILES_PER_JOB = 8


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def job_count(requested: int | None, files_to_parse: int) -> int:
    """`--jobs N` as given (0 or None: automatic, by the CPUs and the work)."""
    if requested and requested > 0:
        return min(requested, max(files_to_parse, 1))
    return max(1, min(available_cpus(), files_to_parse // MIN_FILES_PER_JOB))


def lint_paths(paths: Sequence[str], codes_for: Callable[[str], list[str]], *,
               cache: Cache | None = None, jobs: int | None = None,
               on_error: Callable[[str, Exception], None] | None = None,
               progress: Callable[[int, int], None] | None = None) -> list[FileResult]:
    """Results in the order of `paths`. A path that cannot be read (OSError) or that cglint
    fails on (engine.InternalError) is handed to `on_error` and left out; without `on_error`
    the exception propagates. `progress(done, total)` is told as files are done."""
    with quickscan.listings():
        return _lint_paths(paths, codes_for, cache, jobs, on_error, progress or (lambda done, total: None))


def _lint_paths(paths: Sequence[str], codes_for: Callable[[str], list[str]], cache: Cache | None,
                jobs: int | None, on_error: Callable[[str, Exception], None] | None,
                progress: Callable[[int, int], None]) -> list[FileResult]:
    results: list[FileResult | None] = [None] * len(paths)
    generation = quickscan.generation()
    todo: list[tuple[int, str, str, list[str]]] = []
    for i, path in enumerate(paths):
        progress(i - len(todo), len(paths))
        notebook = path.endswith(".ipynb")
        if cache is not None and not notebook and cache.quiet(path):
            results[i] = FileResult(path, "", [], parsed=False)  # unchanged, and it had nothing to lint
            continue
        codes = codes_for(path)
        try:
            if notebook:  # linted here (its cells are one module), cached by the file's text
                results[i] = _lint_notebook(path, codes, cache)
                continue
            try:
                read = files.read(path)
                source = read.text
            except files.UndecodableError:
                results[i] = engine.lint_file(path, codes)  # CG000 "cannot read"
                continue
        except (OSError, engine.InternalError) as exc:
            if on_error is None:
                raise
            on_error(path, exc)
            continue
        if files.may_hold_site(source):
            reaches: tuple[bool, dict[str, str]] = (True, {})
        else:
            # An entry means a full lint of this text, valid while the modules it read are
            # unchanged: the answer whatever the prefilter says now (it never hides a finding),
            # without building the project index to ask it.
            hit = cache.get(path, source, codes) if cache is not None else None
            if hit is not None:
                results[i] = hit
                continue
            reaches = quickscan.calls_project_site(source, path)
        if not reaches[0]:
            # Nothing to report, and no code frame to print: the text is not kept. Quiet for
            # good when no project module it imports could make it matter, else for as long as
            # every module the project index read is unchanged.
            results[i] = FileResult(path, "", [], parsed=False)
            if cache is not None:
                cache.remember_quiet(path, read.identity, project=bool(reaches[1]))
            continue
        if cache is not None:
            hit = cache.get(path, source, codes)
            if hit is not None:
                results[i] = hit
                continue
        todo.append((i, path, source, codes))

    n_jobs = job_count(jobs, len(todo))
    if n_jobs > 1:
        done = _in_pool(todo, n_jobs)
    else:
        done = (_lint_one((path, source, codes)) for _, path, source, codes in todo)
    for n, ((i, path, source, codes), result) in enumerate(zip(todo, done), 1):
        progress(len(paths) - len(todo) + n, len(paths))
        if isinstance(result, engine.InternalError):
            if on_error is None:
                raise result
            on_error(path, result)
            continue
        if cache is not None:
            cache.put(path, source, codes, result)
        results[i] = result
    progress(len(paths), len(paths))
    if cache is not None:
        # Files quiet by the project index are kept only if one index decided them all.
        cache.save(quickscan.snapshot() if quickscan.generation() == generation else None)
    return [r for r in results if r is not None]


def _lint_notebook(path: str, codes: list[str], cache: Cache | None) -> FileResult:
    """A notebook's result, from the cache when its text was linted with these codes before.
    A hit rebuilds the cells from the JSON alone (reports map findings to the file's lines
    with them); the text was validated when the entry was written."""
    from cglint import notebook
    from cglint.rules import rules as rule_classes

    if cache is None:
        return engine.lint_file(path, codes)
    try:
        raw = notebook.read_text(path)
    except files.UndecodableError:
        return engine.lint_file(path, codes)  # CG000 "cannot read", as without the cache
    hit = cache.get(path, raw, codes)
    if hit is not None:
        nb = notebook.read(raw, validated=True)
        hit.source, hit.notebook = nb.code, nb
        return hit
    result = engine.lint_notebook_text(raw, path, rule_classes(codes))
    if result.notebook is not None:  # read and validated: a hit can rebuild its cells from JSON
        cache.put(path, raw, codes, result)
    return result


def _lint_one(work: tuple[str, str, list[str]]) -> FileResult | engine.InternalError:
    path, source, codes = work
    try:
        return strip(engine.lint_source(source, path, codes))
    except engine.InternalError as exc:  # reported by the caller; the other files go on
        return exc


def _in_pool(todo, n_jobs: int):
    import multiprocessing

    # Import what workers need before forking, so that each starts with libcst and the rules
    # loaded instead of importing them again.
    from cglint import model  # noqa: F401
    from cglint.rules import ALL_RULES  # noqa: F401

    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    work = [(path, source, codes) for _, path, source, codes in todo]
    chunk = max(1, len(work) // (n_jobs * 4))
    try:
        _can_start_threads(3)  # the pool's handler threads, before any worker is forked
        pool = context.Pool(n_jobs)
    except (OSError, RuntimeError) as exc:
        # A process or thread limit (a container's pids limit, a tight address-space limit).
        # Workers already forked would hold the output pipe open forever, and the pool's
        # worker handler (if it started) would fork them again: stop both, lint here.
        from multiprocessing import pool as pool_module

        for thread in threading.enumerate():
            if getattr(thread, "_target", None) is pool_module.Pool._handle_workers:
                thread._state = pool_module.TERMINATE
                thread.join()
        for child in multiprocessing.active_children():
            child.kill()
            child.join()
        sys.stderr.write(f"cglint: warning: cannot start {n_jobs} worker processes ({exc}); linting in this process\n")
        yield from map(_lint_one, work)
        return
    with pool:
        yield from pool.imap(_lint_one, work, chunksize=chunk)


def _can_start_threads(n: int) -> None:
    """Raises RuntimeError when `n` more threads cannot run at once."""
    release = threading.Event()
    threads = [threading.Thread(target=release.wait, daemon=True) for _ in range(n)]
    try:
        for thread in threads:
            thread.start()
    finally:
        release.set()
        for thread in threads:
            if thread.ident is not None:
                thread.join()
