"""`cglint check` (the default command): lint the files, apply fixes or `# noqa`, the baseline,
the runtime check, and the report."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from cglint.commands.common import (EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, fail, note, plural, terminal_progress, warn, why,
                                   with_unused_noqa)
from cglint.commands.fix import diff, fix_one, list_fixes, recorded_by_baseline, unsafe_hint, write_root


def run(args, settings, paths: list[str]) -> int:
    """Lint (or fix) every file under `paths` and report; the exit status."""
    from cglint import engine, files

    fixing = args.fix or args.diff
    exempt = recorded_by_baseline(args, settings) if fixing else None
    if isinstance(exempt, int):
        return exempt
    results = []
    fixed = 0
    would_change = 0
    diffs: list[str] = []
    noqa_added = 0
    failed_paths = 0  # unreadable paths and internal errors: reported, the run goes on, exit 2
    shown: list[tuple[str, list[tuple[str, str]]]] = []  # --show-fixes: (path, [(code, name)])
    found = files.discover(paths, settings.is_excluded, settings.force_exclude)
    from cglint import cache as caching

    if caching.usable_for(fixing=fixing, runtime=bool(args.runtime), add_noqa=args.add_noqa,
                          output_format=args.output_format,
                          unused_noqa=args.report_unused_noqa or "CG100" in settings.codes):
        from cglint import batch

        progress = terminal_progress(args)

        def failed(path: str, exc: Exception) -> None:
            nonlocal failed_paths
            if progress is not None:
                progress.clear()
            if isinstance(exc, engine.OutOfMemory):
                fail(f"{path}: {exc}")
            elif isinstance(exc, engine.InternalError):
                fail(f"internal error, please report: {exc}")
            else:
                fail(str(exc) if isinstance(exc, files.ReadError) else f"{path}: {getattr(exc, 'strerror', None) or exc}")
            failed_paths += 1

        store = None if args.no_cache else caching.Cache(
            caching.directory_for(settings.root, args.cache_dir), caching.settings_key(settings),
            named=bool(args.cache_dir or os.environ.get(caching.ENV_VAR)))
        if store is not None and store.problem():
            warn(store.problem())
            store = None
        try:
            results = batch.lint_paths(list(found), settings.codes_for, cache=store, jobs=args.jobs,
                                       on_error=failed, progress=progress)
        finally:
            if progress is not None:
                progress.clear()
        found = iter(())
    for path in found:
        try:
            rules = with_unused_noqa(settings.codes_for(path), args)
            if path.endswith(".ipynb"):  # the notebook code takes rule classes
                from cglint.rules import rules as rule_classes

                rules = rule_classes(rules)
            if fixing:
                outcome = fix_one(path, rules, args, exempt, write_root(path, paths, settings))
                if outcome.not_written:
                    fail(f"{path}: {outcome.not_written}")
                    failed_paths += 1
                fixed += len(outcome.applied)
                shown.append((path, [(a.code, a.name) for a in outcome.applied]))
                if outcome.changed:
                    would_change += 1
                    if args.diff:
                        diffs.append(diff(path, outcome.source, outcome.new_source))
                results.append(outcome.result)
            else:
                result = engine.lint_file(path, rules)
                if args.add_noqa and result.diagnostics:
                    noqa_added += add_noqa(path, result, write_root(path, paths, settings))
                results.append(result)
        except OSError as exc:
            fail(str(exc) if isinstance(exc, files.ReadError) else f"{path}: {exc.strerror or exc}")
            failed_paths += 1
        except engine.OutOfMemory as exc:
            fail(f"{path}: {exc}")
            failed_paths += 1
        except engine.InternalError as exc:
            fail(f"internal error, please report: {exc}")
            failed_paths += 1

    for result in results:
        for warning in result.warnings:
            warn(f"{result.path}:{warning}" if warning[:1].isdigit() or warning.startswith("cell ")
                  else f"{result.path}: {warning}")

    if args.add_noqa:
        note(args, f"Added {plural(noqa_added, 'noqa directive')}.")
        return EXIT_ERROR if failed_paths else EXIT_CLEAN
    listed = False
    if args.show_fixes and fixing:
        listed = list_fixes(shown, would=args.diff, to_stdout=not args.diff and args.output_format == "text"
                             and not args.output_file and not args.statistics)
    if args.diff:
        sys.stdout.write("".join(diffs))
        if not fixed:
            note(args, "No problems would be fixed" + unsafe_hint(results, args) + ".")
        elif not listed:  # --show-fixes has said it, with the count
            note(args, f"Would fix {plural(fixed, 'problem')} in {plural(would_change, 'file')}"
                  + unsafe_hint(results, args) + ".")
        status = EXIT_FINDINGS if would_change and not args.exit_zero else EXIT_CLEAN
    else:
        status = report(args, settings, results, fixed, failed_paths)
        if args.exit_non_zero_on_fix and would_change and status == EXIT_CLEAN:
            status = EXIT_FINDINGS
    return EXIT_ERROR if failed_paths else status


def add_noqa(path: str, result, root: str) -> int:
    from cglint import files, fix, noqa

    if result.notebook is not None:  # comments go on the cells' lines; the JSON around them stays
        from cglint import notebook

        try:
            new_raw, changed, places = notebook.add_noqa(path, result)
        except notebook.NotebookError as exc:
            warn(f"{path}: cannot add `# noqa` to the notebook: {exc}")
            return 0
        for place in places:
            warn(f"{path}:{place}: cannot add `# noqa` here (the line ends inside a string or continues)")
        if new_raw is not None:
            fix.write_atomic(path, new_raw.encode("utf-8"), root=root)
        return changed

    new, changed, skipped = noqa.add_noqa(result.source, result.diagnostics)
    for line in skipped:
        warn(f"{path}:{line}: cannot add `# noqa` here (the line ends inside a string or continues)")
    if changed:
        if fix.check_source(new, path) is not None:
            warn(f"{path}: adding `# noqa` would break the file; left unchanged")
            return 0
        read = files.read(path)
        if read.text != result.source:
            raise files.ReadError(path, "changed on disk since cglint read it; not written")
        fix.write_back(read, new, root)
    return changed


def apply_baseline(args, settings, results) -> int | None:
    """--write-baseline (returns the exit status), or hide what the baseline records (None:
    go on reporting)."""
    from cglint.baseline import Baseline, BaselineError

    if args.write_baseline:
        baseline = Baseline.from_results(args.write_baseline, results)
        try:
            baseline.write(settings.root)
        except OSError as exc:
            return fail(f"{args.write_baseline}: cannot write: {why(exc)}")
        total = sum(baseline.counts.values())
        print(f"Wrote {plural(total, 'finding')} to the baseline {args.write_baseline}.", file=sys.stderr)
        return EXIT_CLEAN
    where = None if args.no_baseline else (args.baseline or settings.baseline)
    if where is None:
        if args.prune_baseline:
            return fail("--prune-baseline needs a baseline (--baseline FILE or [tool.cglint] baseline)")
        return None
    try:
        baseline = Baseline.load(where)
    except BaselineError as exc:
        return fail(str(exc))
    outcome = baseline.filter(results)
    said = f"{plural(outcome.hidden, 'finding')} hidden by the baseline {where}"
    if outcome.stale_count:
        if args.prune_baseline:
            try:
                baseline.pruned(outcome.stale).write(settings.root, named=bool(args.baseline))
            except OSError as exc:
                return fail(f"{where}: cannot write: {why(exc)}")
            said += f"; pruned {plural(outcome.stale_count, 'stale entry').replace('entrys', 'entries')}"
        else:
            said += (f"; {plural(outcome.stale_count, 'stale entry').replace('entrys', 'entries')} (fixed or gone: "
                     f"--prune-baseline drops them)")
    note(args, said + ".")
    return None


def report(args, settings, results, fixed: int, errors: int = 0) -> int:
    from cglint.report import Context, render, statistics

    done = apply_baseline(args, settings, results)
    if done is not None:
        return done

    runtime = None
    if args.runtime:
        from cglint.runtime.session import run_runtime, terminal_progress

        timeout = args.runtime_timeout if args.runtime_timeout is not None else settings.runtime.timeout
        sites = sum(len(r.model.sites) for r in results if r.model is not None)
        tolerances = {"rtol": settings.runtime.rtol, "atol": settings.runtime.atol, "probes": settings.runtime.probes}
        order = args.runtime_order or settings.runtime.order
        if order > 1:
            tolerances["order"] = order
        runtime = run_runtime(results, everything=args.runtime == "all", timeout=timeout,
                              progress=terminal_progress(sites), tolerances=tolerances,
                              memory_limit=settings.runtime.memory_limit)
    from cglint.report import style

    color = not args.output_file and style.wanted(args.color, sys.stdout)
    context = Context(root=sarif_root(settings), fixed=fixed, unsafe_fixes=args.unsafe_fixes, runtime=runtime,
                      errors=errors, quiet=args.quiet, color=color)
    if args.statistics:
        text = statistics.render(results, "json" if args.output_format == "json" else "text", context)
    else:
        text = render(args.output_format, results, context)
    if args.output_file:
        from cglint import fix as fixmod

        try:
            fixmod.write_atomic(args.output_file, text, root=settings.root)
        except OSError as exc:
            return fail(f"{args.output_file}: cannot write: {why(exc)}")
    else:
        sys.stdout.write(text)
    remaining = sum(len(r.diagnostics) for r in results)
    if fixed and (args.output_format not in ("text", "concise") or args.statistics or args.output_file):
        note(args, f"Fixed {plural(fixed, 'problem')} ({remaining} remaining).")
    failed = False
    if runtime is not None:
        from cglint.gradcheck.report import FAILING

        failed = any(r["verdict"] in FAILING for r in runtime)
    return EXIT_FINDINGS if (remaining or failed) and not args.exit_zero else EXIT_CLEAN


def sarif_root(settings):
    """SARIF URIs are relative to the repository: the enclosing git work tree, else the
    configuration's root (the cwd without one)."""
    here = Path.cwd().resolve()
    for directory in (here, *here.parents):
        if (directory / ".git").exists():
            return directory
    return settings.root
