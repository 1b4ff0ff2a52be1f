"""Command line: argument parsing and exit codes. No analysis happens here."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from cglint import __version__, reach
from cglint.memory import MIN_ADDRESS_SPACE_MIB, address_space_limit, under_limit

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _positive_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {value!r}")
    return seconds


def _jobs(value: str) -> int:
    try:
        jobs = int(value)
    except ValueError:
        jobs = -1
    if jobs < 0:
        raise argparse.ArgumentTypeError(f"expected a number of processes (0: automatic), got {value!r}")
    return jobs


def _codes(value: str) -> list[str]:
    return [c.strip() for c in value.split(",") if c.strip()]


def _globs(value: str) -> list[str]:
    return [g.strip() for g in value.split(",") if g.strip()]


def build_parser() -> argparse.ArgumentParser:
    from cglint.report import FORMAT_NAMES
    from cglint.usage import Parser

    p = Parser(
        prog="cglint",
        description="Lint TensorFlow custom gradients (tf.custom_gradient).",
        epilog="Subcommands: `cglint trace -- COMMAND` checks the custom gradients a command calls "
               "(cglint trace --help); `cglint lsp` is the language server. "
               "Exit status: 0 clean, 1 findings, 2 usage, configuration or internal error.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or directories (default: .); '-' reads stdin")
    sel = p.add_argument_group("rule selection (on top of [tool.cglint] in pyproject.toml)")
    sel.add_argument("--select", type=_codes, metavar="CODES", help="codes or prefixes to check (replaces the configured selection)")
    sel.add_argument("--extend-select", type=_codes, metavar="CODES", help="codes or prefixes to check as well")
    sel.add_argument("--ignore", type=_codes, metavar="CODES", help="codes or prefixes to skip")
    files_ = p.add_argument_group("files")
    files_.add_argument("--exclude", type=_globs, metavar="GLOBS", help="gitignore-style globs to skip (replaces the defaults)")
    files_.add_argument("--extend-exclude", type=_globs, metavar="GLOBS", help="globs to skip as well as the defaults")
    files_.add_argument("--force-exclude", action="store_true",
                        help="apply exclusions to paths named on the command line too (for pre-commit)")
    files_.add_argument("--config", metavar="FILE", help="read this pyproject.toml (or cglint.toml) instead of searching")
    files_.add_argument("--isolated", action="store_true", help="ignore configuration files")
    files_.add_argument("--stdin-filename", metavar="PATH", help="the path to report for source read from stdin")
    fix = p.add_argument_group("fixes and suppressions")
    fix.add_argument("--fix", action="store_true", help="apply safe fixes in place")
    fix.add_argument("--unsafe-fixes", action="store_true", help="apply (or offer) unsafe fixes as well")
    fix.add_argument("--verify", action="store_true",
                     help="with --fix or --diff: apply unsafe fixes only where the fixed function then matches "
                          "TensorFlow's autodiff (runs the module, as --runtime does; needs TensorFlow)")
    fix.add_argument("--diff", action="store_true", help="print the fixes as a unified diff and write nothing")
    fix.add_argument("--show-fixes", action="store_true", help="with --fix or --diff: list the fixes per file and rule")
    fix.add_argument("--add-noqa", action="store_true", help="add `# noqa: CODE` comments for every current finding")
    fix.add_argument("--report-unused-noqa", action="store_true",
                     help="report `# noqa` codes that suppress nothing (CG100; --fix removes them)")
    speed = p.add_argument_group("cache and parallelism")
    speed.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    speed.add_argument("--cache-dir", metavar="DIR",
                       help="where to keep the cache (default: $CGLINT_CACHE_DIR, else .cglint_cache in the project root)")
    speed.add_argument("--jobs", "-j", type=_jobs, default=0, metavar="N",
                       help="processes to lint with (default 0: automatic, by the CPUs and the number of files to parse)")
    out = p.add_argument_group("output")
    out.add_argument("--output-format", choices=FORMAT_NAMES, default="text")
    out.add_argument("--output-file", metavar="PATH", help="write the report to PATH (atomically) instead of stdout")
    out.add_argument("--statistics", action="store_true", help="print the number of findings per rule instead")
    out.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    out.add_argument("--exit-non-zero-on-fix", action="store_true",
                     help="with --fix: exit 1 when a file was changed, even if no finding remains")
    out.add_argument("-q", "--quiet", action="store_true", help="print the findings and nothing else (no summary)")
    out.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                     help="colour the text and concise reports (default auto: on a terminal, "
                          "unless NO_COLOR is set; FORCE_COLOR forces it)")
    out.add_argument("--show-files", action="store_true", help="list the files that would be checked and exit")
    out.add_argument("--show-settings", action="store_true",
                     help="print the settings in effect for the first file and exit")
    base = p.add_argument_group("baseline (adopting cglint on existing code)")
    base.add_argument("--write-baseline", metavar="FILE", help="record every current finding in FILE and exit 0")
    base.add_argument("--baseline", metavar="FILE",
                      help="report only findings not recorded in FILE (default: [tool.cglint] baseline)")
    base.add_argument("--no-baseline", action="store_true", help="ignore the configured baseline")
    base.add_argument("--prune-baseline", action="store_true",
                      help="with a baseline: rewrite it without its stale entries (those matching no finding)")
    rt = p.add_argument_group("runtime check (needs TensorFlow, any distribution, in this environment)")
    # `--runtime` takes no separate value (a path may follow it); `--runtime=all` is spelled
    # with `=` and rewritten to `--runtime-scope all` before parsing.
    rt.add_argument("--runtime", action="store_const", const="flagged",
                    help="also check the flagged functions numerically against TensorFlow autodiff; "
                         "--runtime=all checks every custom-gradient function")
    rt.add_argument("--runtime-scope", dest="runtime", choices=["flagged", "all"], help=argparse.SUPPRESS)
    rt.add_argument("--runtime-order", type=int, choices=[1, 2], metavar="{1,2}",
                    help="2: also compare second derivatives and forward-mode JVPs with autodiff "
                         "(default: [tool.cglint.runtime] order, else 1)")
    rt.add_argument("--runtime-timeout", type=_positive_seconds, metavar="SECONDS",
                    help="per-module time limit for --runtime (default: [tool.cglint.runtime] timeout, else 120)")
    p.add_argument("--explain", metavar="RULE", help="print a rule's documentation (by code or name; `runtime`: runtime verdicts) and exit")
    p.add_argument("--list-rules", action="store_true", help="list every rule: code, name, summary")
    p.add_argument("--version", action="version", version=f"cglint {__version__}")
    return p


def entry() -> None:
    """The `cglint` command (and `python -m cglint`): `main()`, then, after a lint, out without
    the interpreter's teardown. A large module leaves millions of objects, and freeing them one
    by one at exit is slow (3 s after a 72,000-line module: 15 s instead of 12); mypy leaves the
    same way. Output is flushed first, and nothing else is pending by then: the cache is written
    and a `--jobs` pool closed before `main` returns. The language server and `trace` (which
    runs a command) exit as usual."""
    if sys.argv[1:2] != ["lsp"]:
        from cglint import files

        files.guard_signals()  # SIGTERM/SIGHUP end the run as Ctrl-C does, temporary files removed
    code = main()
    if sys.argv[1:2] in (["lsp"], ["trace"]):
        raise SystemExit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe (`cglint . | head -1`): nothing more to say
        pass
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    limit = address_space_limit()
    if limit is not None and limit < MIN_ADDRESS_SPACE_MIB and "--version" not in argv:
        print(f"cglint: error: cglint needs about {MIN_ADDRESS_SPACE_MIB} MiB of address space; the limit set "
              f"outside cglint (ulimit -v, prlimit --as) is {limit} MiB", file=sys.stderr)
        return EXIT_ERROR
    try:
        return _main(argv)
    except MemoryError:  # a limit set outside cglint, met anywhere: one line, never a traceback
        print(f"cglint: error: out of memory{under_limit()}", file=sys.stderr)
        return EXIT_ERROR


def _main(argv: list[str]) -> int:
    if argv[:1] == ["lsp"]:  # a subcommand; a path named `lsp` is reachable as `./lsp`
        from cglint.lsp import main as lsp_main

        return lsp_main(argv[1:])
    if argv[:1] == ["check"]:  # ruff's habit: `cglint check .` is `cglint .` (a path named `check` is `./check`)
        argv = argv[1:]
    if argv[:1] == ["trace"]:  # `cglint trace -- COMMAND`; a path named `trace` is `./trace`
        from cglint.trace.command import main as trace_main

        try:
            return trace_main(argv[1:])
        except KeyboardInterrupt:
            return EXIT_ERROR
    try:
        return _run(argv)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP (files.guard_signals)
        return _fail("interrupted")
    except BrokenPipeError:
        return EXIT_ERROR


def _fail(message: str) -> int:
    from cglint.escape import printable  # file names and messages may come from the tree

    print(f"cglint: error: {printable(message)}", file=sys.stderr)
    return EXIT_ERROR


def _warn(message: str) -> None:
    from cglint.escape import printable

    print(f"cglint: warning: {printable(message)}", file=sys.stderr)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line's arguments (`--runtime=all` as `--runtime-scope all`); a usage error exits 2.
    Only options are rewritten: after `--` every argument is a path, whatever it looks like."""
    end = argv.index("--") if "--" in argv else len(argv)
    argv = [a.replace("--runtime=", "--runtime-scope=", 1) if a.startswith("--runtime=") and i < end else a
            for i, a in enumerate(argv)]
    return build_parser().parse_args(argv)


def _run(argv: list[str] | None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    from cglint import config, engine, files

    if args.explain:
        from cglint.rules import CODES, OPT_IN, rules

        wanted = args.explain.strip()
        if wanted.lower() == "runtime":  # a topic, not a rule: the verdicts and "off by N%"
            from cglint.gradcheck.report import EXPLAIN

            sys.stdout.write(EXPLAIN)
            return EXIT_CLEAN
        # by code, or by the name every report shows next to it (`output-derivative`)
        found = [r for r in rules([*CODES, *OPT_IN]) if wanted.upper() == r.code or wanted.lower() == r.name]
        if not found:
            return _fail(f"unknown rule code or name: {args.explain!r} (see --list-rules; `--explain runtime` "
                         "explains runtime verdicts)")
        sys.stdout.write(found[0].documentation())
        return EXIT_CLEAN
    if args.list_rules:
        from cglint.rules import RULES_BY_CODE

        from cglint.rules.cg100_unused_noqa import UnusedNoqa

        for rule in [*RULES_BY_CODE.values(), UnusedNoqa]:
            print(f"{rule.code}  {rule.name:<30} {rule.summary}")
        return EXIT_CLEAN
    if args.add_noqa and (args.fix or args.diff):
        return _fail("--add-noqa cannot be combined with --fix or --diff")
    if args.verify and not (args.fix or args.diff):
        return _fail("--verify checks fixes: use it with --fix or --diff")

    paths = args.paths or ["."]
    stdin = paths == ["-"]
    if "-" in paths and not stdin:
        return _fail("'-' (stdin) cannot be combined with other paths")
    if args.stdin_filename and not stdin:  # as ruff: a stdin filename means the source is on stdin
        for path in args.paths:
            _warn(f"ignoring {path} in favour of standard input (--stdin-filename)")
        stdin = True
    try:
        if args.isolated:
            settings = config.Settings(root=Path.cwd().resolve())
        else:
            start = args.stdin_filename if stdin and args.stdin_filename else (None if stdin else paths[0])
            settings = config.load(start if start and os.path.exists(start) else None, args.config)
        settings = settings.with_overrides(
            select=args.select, ignore=args.ignore, extend_select=args.extend_select, exclude=args.exclude,
            extend_exclude=args.extend_exclude, force_exclude=args.force_exclude or None,
        )
        settings.codes  # noqa: B018 - validates the selection before any file is read
        reach.use(settings.tensorflow_aliases)  # this run's configuration, for every file
    except config.ConfigError as exc:
        return _fail(str(exc))

    if args.show_settings:
        first = next(files.discover(paths, settings.is_excluded, settings.force_exclude), paths[0])
        return _show_settings(args.stdin_filename if stdin else first, settings, args)
    if args.show_files:
        for path in sorted(files.discover(paths, settings.is_excluded, settings.force_exclude)):
            print(path)
        return EXIT_CLEAN
    if stdin:
        if args.runtime:  # the check imports the module by path, and stdin has none
            return _fail("--runtime needs files on disk, not '-' (stdin)")
        return _run_stdin(args, settings)

    import importlib.util

    if args.runtime and importlib.util.find_spec("tensorflow") is None:  # children run in this interpreter
        # The pip line is run as printed by tests/test_install_recipes.py.
        import shlex

        return _fail("--runtime needs TensorFlow in this environment (cglint installs none, to keep yours); "
                     f"the CPU wheel: {shlex.quote(sys.executable)} -m pip install tensorflow-cpu")
    fixing = args.fix or args.diff
    exempt = _recorded_by_baseline(args, settings) if fixing else None
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

        def failed(path: str, exc: Exception) -> None:
            nonlocal failed_paths
            if isinstance(exc, engine.OutOfMemory):
                _fail(f"{path}: {exc}")
            elif isinstance(exc, engine.InternalError):
                _fail(f"internal error, please report: {exc}")
            else:
                _fail(str(exc) if isinstance(exc, files.ReadError) else f"{path}: {getattr(exc, 'strerror', None) or exc}")
            failed_paths += 1

        store = None if args.no_cache else caching.Cache(
            caching.directory_for(settings.root, args.cache_dir), caching.settings_key(settings),
            named=bool(args.cache_dir or os.environ.get(caching.ENV_VAR)))
        if store is not None and store.problem():
            _warn(store.problem())
            store = None
        results = batch.lint_paths(list(found), settings.codes_for, cache=store, jobs=args.jobs,
                                   on_error=failed)
        found = iter(())
    for path in found:
        try:
            rules = _with_unused_noqa(settings.codes_for(path), args)
            if path.endswith(".ipynb"):  # the notebook code takes rule classes
                from cglint.rules import rules as rule_classes

                rules = rule_classes(rules)
            if fixing:
                outcome = _fix_one(path, rules, args, exempt, _write_root(path, paths, settings))
                if outcome.not_written:
                    _fail(f"{path}: {outcome.not_written}")
                    failed_paths += 1
                fixed += len(outcome.applied)
                shown.append((path, [(a.code, a.name) for a in outcome.applied]))
                if outcome.changed:
                    would_change += 1
                    if args.diff:
                        diffs.append(_diff(path, outcome.source, outcome.new_source))
                results.append(outcome.result)
            else:
                result = engine.lint_file(path, rules)
                if args.add_noqa and result.diagnostics:
                    noqa_added += _add_noqa(path, result, _write_root(path, paths, settings))
                results.append(result)
        except OSError as exc:
            _fail(str(exc) if isinstance(exc, files.ReadError) else f"{path}: {exc.strerror or exc}")
            failed_paths += 1
        except engine.OutOfMemory as exc:
            _fail(f"{path}: {exc}")
            failed_paths += 1
        except engine.InternalError as exc:
            _fail(f"internal error, please report: {exc}")
            failed_paths += 1

    for result in results:
        for warning in result.warnings:
            _warn(f"{result.path}:{warning}" if warning[:1].isdigit() or warning.startswith("cell ")
                  else f"{result.path}: {warning}")

    if args.add_noqa:
        _note(args, f"Added {_plural(noqa_added, 'noqa directive')}.")
        return EXIT_ERROR if failed_paths else EXIT_CLEAN
    listed = False
    if args.show_fixes and fixing:
        listed = _show_fixes(shown, would=args.diff, to_stdout=not args.diff and args.output_format == "text"
                             and not args.output_file and not args.statistics)
    if args.diff:
        sys.stdout.write("".join(diffs))
        if not fixed:
            _note(args, "No problems would be fixed" + _unsafe_hint(results, args) + ".")
        elif not listed:  # --show-fixes has said it, with the count
            _note(args, f"Would fix {_plural(fixed, 'problem')} in {_plural(would_change, 'file')}"
                  + _unsafe_hint(results, args) + ".")
        status = EXIT_FINDINGS if would_change and not args.exit_zero else EXIT_CLEAN
    else:
        status = _report(args, settings, results, fixed, failed_paths)
        if args.exit_non_zero_on_fix and would_change and status == EXIT_CLEAN:
            status = EXIT_FINDINGS
    return EXIT_ERROR if failed_paths else status


def _note(args, message: str) -> None:
    """A line about the run (not a finding) on stderr; -q leaves it out."""
    if not args.quiet:
        print(message, file=sys.stderr)


def _unsafe_hint(results, args) -> str:
    """` (N fixes available with `--unsafe-fixes`)` when only unsafe fixes are left."""
    if args.unsafe_fixes:
        return ""
    hidden = sum(1 for r in results for d in r.diagnostics if d.is_fixable(True) and not d.is_fixable(False))
    return f" ({hidden} fix{'es' if hidden != 1 else ''} available with `--unsafe-fixes`)" if hidden else ""


def _show_settings(path: str, settings, args) -> int:
    """--show-settings: what applies to `path` after the configuration and the command line."""
    def show(value) -> str:
        if isinstance(value, (tuple, list)):
            return "[" + ", ".join(f'"{v}"' for v in value) + "]"
        return "none" if value is None else f'"{value}"' if isinstance(value, (str, Path)) else str(value).lower()

    rows = {
        "config_file": settings.config_file, "root": settings.root, "select": settings.codes_for(path),
        "exclude": settings.exclude, "extend_exclude": settings.extend_exclude,
        "force_exclude": settings.force_exclude, "baseline": None if args.no_baseline else (args.baseline or settings.baseline),
        "tensorflow_aliases": settings.tensorflow_aliases,
    }
    print(f'Resolved settings for: "{path}"\n')
    for key, value in rows.items():
        print(f"{key} = {show(value)}")
    for pattern, codes in sorted(settings.per_file_ignores.items()):
        print(f'per_file_ignores."{pattern}" = {show(codes)}')
    for key, value in dataclasses.asdict(settings.runtime).items():
        print(f"runtime.{key} = {show(value)}")
    return EXIT_CLEAN


def _with_unused_noqa(rules, args):
    """--report-unused-noqa: CG100 joins the rules (the engine runs it after the others), as
    `--extend-select CG100` makes it join them."""
    if not args.report_unused_noqa or "CG100" in rules:
        return rules
    from cglint.rules.cg100_unused_noqa import UnusedNoqa

    return [*rules, UnusedNoqa]


def _show_fixes(shown, would: bool, to_stdout: bool) -> bool:
    """Print --show-fixes's list; whether there was anything to list."""
    from cglint.report import show_fixes

    text = show_fixes.render(shown, would=would)
    (sys.stdout if to_stdout else sys.stderr).write(text)
    return bool(text)


def _write_root(path: str, paths: list[str], settings) -> str:
    """What a write to `path` must stay inside: the directory named on the command line that
    it was found in, else the project root (symbolic links in the tree never lead out of it)."""
    from cglint import files

    for named in paths:
        if os.path.isdir(named) and files.inside(os.path.abspath(path), os.path.abspath(named)):
            return named
    return str(settings.root)


def _recorded_by_baseline(args, settings):
    """With --fix/--diff and a baseline: what `fix_source` must leave alone (the findings the
    report will hide are not rewritten either); an exit status if the baseline is unreadable."""
    where = None if args.no_baseline or args.write_baseline else (args.baseline or settings.baseline)
    if where is None:
        return None
    from cglint.baseline import Baseline, BaselineError

    try:
        return Baseline.load(where).recorded
    except BaselineError as exc:
        return _fail(str(exc))


def _fix_one(path: str, rules, args, exempt=None, root: str | None = None):
    from cglint import fix

    if args.verify and not path.endswith(".ipynb"):
        from cglint import verify

        checked = verify.fix_and_verify(path, rules, exempt, timeout=args.runtime_timeout or 120.0,
                                        write=not args.diff, root=root)
        for v in checked.verdicts:
            if v.kept:
                _note(args, f"{path}:{v.line}: {v.function}: unsafe fixes verified against autodiff ({v.verdict}: {v.detail})")
            else:
                _warn(f"{path}:{v.line}: {v.function}: unsafe fixes not applied: the fixed function is "
                      f"{v.verdict} against autodiff ({v.detail})")
        outcome = checked.outcome
    else:
        outcome = fix.fix_file(path, rules, unsafe=args.unsafe_fixes, write=not args.diff, exempt=exempt,
                               root=root)
    for dropped in outcome.dropped:
        _warn(f"{path}:{dropped.line}: {dropped.code} fix not applied: {dropped.reason}")  # `cell 3:4` in a notebook
    if not outcome.converged:
        _warn(f"{path}: fixes did not settle after {fix.MAX_ROUNDS} rounds; run --fix again and report this")
    return outcome


def _diff(path: str, old: str, new: str) -> str:
    if path.endswith(".ipynb"):  # the changed cells, not the notebook's JSON
        from cglint import notebook

        return notebook.diff(path, old, new)
    import difflib

    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=f"a/{path}", tofile=f"b/{path}")
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    return text


def _add_noqa(path: str, result, root: str) -> int:
    from cglint import files, fix, noqa

    if result.notebook is not None:  # comments go on the cells' lines; the JSON around them stays
        from cglint import notebook

        try:
            new_raw, changed, places = notebook.add_noqa(path, result)
        except notebook.NotebookError as exc:
            _warn(f"{path}: cannot add `# noqa` to the notebook: {exc}")
            return 0
        for place in places:
            _warn(f"{path}:{place}: cannot add `# noqa` here (the line ends inside a string or continues)")
        if new_raw is not None:
            fix.write_atomic(path, new_raw.encode("utf-8"), root=root)
        return changed

    new, changed, skipped = noqa.add_noqa(result.source, result.diagnostics)
    for line in skipped:
        _warn(f"{path}:{line}: cannot add `# noqa` here (the line ends inside a string or continues)")
    if changed:
        if fix.check_source(new, path) is not None:
            _warn(f"{path}: adding `# noqa` would break the file; left unchanged")
            return 0
        read = files.read(path)
        if read.text != result.source:
            raise files.ReadError(path, "changed on disk since cglint read it; not written")
        fix.write_back(read, new, root)
    return changed


def _apply_baseline(args, settings, results) -> int | None:
    """--write-baseline (returns the exit status), or hide what the baseline records (None:
    go on reporting)."""
    from cglint.baseline import Baseline, BaselineError

    if args.write_baseline:
        baseline = Baseline.from_results(args.write_baseline, results)
        try:
            baseline.write(settings.root)
        except OSError as exc:
            return _fail(f"{args.write_baseline}: cannot write: {_why(exc)}")
        total = sum(baseline.counts.values())
        print(f"Wrote {_plural(total, 'finding')} to the baseline {args.write_baseline}.", file=sys.stderr)
        return EXIT_CLEAN
    where = None if args.no_baseline else (args.baseline or settings.baseline)
    if where is None:
        if args.prune_baseline:
            return _fail("--prune-baseline needs a baseline (--baseline FILE or [tool.cglint] baseline)")
        return None
    try:
        baseline = Baseline.load(where)
    except BaselineError as exc:
        return _fail(str(exc))
    outcome = baseline.filter(results)
    note = f"{_plural(outcome.hidden, 'finding')} hidden by the baseline {where}"
    if outcome.stale_count:
        if args.prune_baseline:
            try:
                baseline.pruned(outcome.stale).write(settings.root, named=bool(args.baseline))
            except OSError as exc:
                return _fail(f"{where}: cannot write: {_why(exc)}")
            note += f"; pruned {_plural(outcome.stale_count, 'stale entry').replace('entrys', 'entries')}"
        else:
            note += (f"; {_plural(outcome.stale_count, 'stale entry').replace('entrys', 'entries')} (fixed or gone: "
                     f"--prune-baseline drops them)")
    _note(args, note + ".")
    return None


def _report(args, settings, results, fixed: int, errors: int = 0) -> int:
    from cglint.report import Context, render, statistics

    done = _apply_baseline(args, settings, results)
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
    context = Context(root=_sarif_root(settings), fixed=fixed, unsafe_fixes=args.unsafe_fixes, runtime=runtime,
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
            return _fail(f"{args.output_file}: cannot write: {_why(exc)}")
    else:
        sys.stdout.write(text)
    remaining = sum(len(r.diagnostics) for r in results)
    if fixed and (args.output_format not in ("text", "concise") or args.statistics or args.output_file):
        _note(args, f"Fixed {_plural(fixed, 'problem')} ({remaining} remaining).")
    failed = False
    if runtime is not None:
        from cglint.gradcheck.report import FAILING

        failed = any(r["verdict"] in FAILING for r in runtime)
    return EXIT_FINDINGS if (remaining or failed) and not args.exit_zero else EXIT_CLEAN


def _why(exc: OSError) -> str:
    from cglint import files

    return files.why(exc)


def _sarif_root(settings):
    """SARIF URIs are relative to the repository: the enclosing git work tree, else the
    configuration's root (the cwd without one)."""
    here = Path.cwd().resolve()
    for directory in (here, *here.parents):
        if (directory / ".git").exists():
            return directory
    return settings.root


def _echo(data: bytes) -> None:
    """Bytes to stdout as they are (an in-process caller's text stdout gets them decoded)."""
    sys.stdout.flush()
    if hasattr(sys.stdout, "buffer"):
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        sys.stdout.write(data.decode("utf-8", "surrogateescape"))


def _read_stdin(limit: int) -> bytes:
    """At most `limit` + 1 bytes of stdin (more says "over the limit"; the rest is not read)."""
    stream = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else None
    if stream is None:  # an in-process caller's text stdin
        return sys.stdin.read(limit + 1).encode("utf-8", "surrogateescape")[: limit + 1]
    chunks, total = [], 0
    while total <= limit:
        chunk = stream.read(min(1 << 20, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _echo_rest() -> None:
    """--fix over a buffer too large to lint: the rest of stdin to stdout, as it comes."""
    stream = getattr(sys.stdin, "buffer", None)
    while stream is not None:
        chunk = stream.read(1 << 20)
        if not chunk:
            break
        _echo(chunk)


def rules_for_stdin(args, settings, name: str):
    return _with_unused_noqa(settings.codes_for(name) if args.stdin_filename else settings.codes, args)


class _Unfixed(Exception):
    """The buffer's fixes are not applied (said on stderr); the buffer is echoed as it came."""


def _run_stdin(args, settings) -> int:
    """`cglint - --stdin-filename ops.py`: lint (or, with --fix, fix) an editor buffer. Fixed
    source goes to stdout, the report to stderr, as ruff does."""
    from cglint import engine, files, fix, notebook, source as pysource
    from cglint.report import Context, render

    # Decoded as files are (BOM, coding cookie, strict UTF-8), and written back the same way:
    # an editor replaces its buffer with what --fix prints.
    raw = _read_stdin(files.MAX_FILE_BYTES)
    name = args.stdin_filename or "<stdin>"
    if len(raw) > files.MAX_FILE_BYTES:  # as for a file: reported, never parsed; --fix gives it back
        result = engine.unreadable(name, rules_for_stdin(args, settings, name),
                                   f"more than {files.MAX_FILE_BYTES // 2**20} MB, cglint's limit for one file")
        if not (args.fix or args.diff):
            return _report(args, settings, [result], 0)
        if args.fix:
            _echo(raw)
            _echo_rest()
        sys.stderr.write(render(args.output_format, [result], Context(unsafe_fixes=args.unsafe_fixes)))
        return EXIT_FINDINGS if result.diagnostics and not args.exit_zero else EXIT_CLEAN
    if args.stdin_filename and settings.force_exclude and settings.is_excluded(name, False, True):
        if args.fix:
            _echo(raw)
        return EXIT_CLEAN
    rules = _with_unused_noqa(settings.codes_for(name) if args.stdin_filename else settings.codes, args)
    nb = notebook.is_notebook(name)  # the buffer is a notebook's JSON
    if nb:
        from cglint.rules import rules as rule_classes

        rules = rule_classes(rules)
    try:
        decoded = pysource.decode(raw)
    except pysource.UndecodableError as exc:  # nothing cglint can fix: the buffer as it came
        result = engine.unreadable(name, rules, str(exc))
        if not (args.fix or args.diff):
            return _report(args, settings, [result], 0)
        if args.fix:
            _echo(raw)
            sys.stderr.write(render(args.output_format, [result], Context(unsafe_fixes=args.unsafe_fixes)))
        return EXIT_FINDINGS if result.diagnostics and not args.exit_zero else EXIT_CLEAN
    source = decoded.text
    try:
        if args.fix or args.diff:
            exempt = _recorded_by_baseline(args, settings)
            if isinstance(exempt, int):
                return exempt
            fixer = fix.fix_notebook_text if nb else fix.fix_source
            outcome = fixer(source, name, rules, unsafe=args.unsafe_fixes, exempt=exempt)
            if args.show_fixes:
                _show_fixes([(name, [(a.code, a.name) for a in outcome.applied])], would=args.diff, to_stdout=False)
            if args.diff:
                sys.stdout.write(_diff(name, source, outcome.new_source) if outcome.changed else "")
                return EXIT_FINDINGS if outcome.changed and not args.exit_zero else EXIT_CLEAN
            out, result, fixed = raw, outcome.result, len(outcome.applied)
            if outcome.changed:
                try:
                    if not pysource.round_trips(raw, decoded):
                        _warn(f"{name}: {fix.cannot_round_trip(decoded.encoding)}")
                        raise _Unfixed
                    out = pysource.encode(outcome.new_source, decoded)
                except UnicodeEncodeError:
                    _warn(f"{name}: the fixed text does not fit the buffer's {decoded.encoding} encoding; not fixed")
                    result, fixed = (engine.lint_notebook_text if nb else engine.lint_source)(source, name, rules), 0
                except _Unfixed:
                    result, fixed = (engine.lint_notebook_text if nb else engine.lint_source)(source, name, rules), 0
            _echo(out)
            sys.stderr.write(render(args.output_format, [result], Context(fixed=fixed, unsafe_fixes=args.unsafe_fixes)))
            return EXIT_FINDINGS if result.diagnostics and not args.exit_zero else EXIT_CLEAN
        result = engine.lint_notebook_text(source, name, rules) if nb else engine.lint_source(source, name, rules)
    except engine.InternalError as exc:
        return _fail(f"{name}: {exc}" if isinstance(exc, engine.OutOfMemory) else f"internal error, please report: {exc}")
    for warning in result.warnings:
        _warn(f"{name}:{warning}" if warning[:1].isdigit() else f"{name}: {warning}")
    return _report(args, settings, [result], 0)
