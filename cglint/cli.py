"""Command line: argument parsing and exit codes. No analysis happens here."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cglint import __version__, reach
from cglint.commands.common import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, fail, warn  # noqa: F401 - the exit codes are the CLI's
from cglint.memory import MIN_ADDRESS_SPACE_MIB, address_space_limit, under_limit


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
    if sys.argv[1:2] and sys.argv[1] in LONG_LIVED:
        raise SystemExit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe (`cglint . | head -1`): nothing more to say
        pass
    os._exit(code)


def _escape_unencodable(exc: UnicodeError):
    """Output error handler: a byte of a name that is not UTF-8 (a surrogate escape) is written
    as that byte, as `ls` shows it; any other character the stream cannot carry (a lone
    surrogate, an accent on an ASCII terminal) as a backslash escape."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    char = exc.object[exc.start]
    if 0xDC80 <= ord(char) <= 0xDCFF:
        return bytes([ord(char) - 0xDC00]), exc.start + 1
    return char.encode("ascii", "backslashreplace").decode("ascii"), exc.start + 1


def _tolerant_output() -> None:
    """stdout and stderr never raise on what cglint prints: under a UTF-8 locale other than
    C.UTF-8 (or PYTHONIOENCODING=...:strict) Python's streams are strict, and a file name that
    is not UTF-8 ended the report with a UnicodeEncodeError."""
    import codecs

    codecs.register_error("cglint.escape", _escape_unencodable)
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="cglint.escape")
            except (OSError, ValueError, AttributeError):  # a stream that cannot change: left as it is
                pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    _tolerant_output()
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


# `cglint COMMAND ...`; without a command, `check`. A path named like a command is reached as
# `./NAME`. Most commands are views of the one parser's options (`fix` is `--fix`), so each option
# keeps working as ruff's users type it; `lsp` and `trace` have their own entry points.
SHOW = {"settings": "--show-settings", "files": "--show-files", "rules": "--list-rules"}
COMMANDS = ("check", "fix", "explain", "show", "lsp", "trace")
LONG_LIVED = ("lsp", "trace")  # they exit as usual (entry): a server, and a command's own exit


def _main(argv: list[str]) -> int:
    command, rest = (argv[0], argv[1:]) if argv[:1] and argv[0] in COMMANDS else ("check", argv)
    if command == "lsp":
        from cglint.lsp import main as lsp_main

        return lsp_main(rest)
    if command == "trace":  # `cglint trace -- COMMAND`
        from cglint.trace.command import main as trace_main

        try:
            return trace_main(rest)
        except KeyboardInterrupt:
            return EXIT_ERROR
    if command == "fix":
        rest = ["--fix", *rest]
    elif command == "explain":
        rest = ["--explain", *rest]
    elif command == "show":
        if not rest or rest[0] not in SHOW:
            return fail(f"cglint show: say what to show: {', '.join(SHOW)} (e.g. `cglint show settings ops.py`)")
        rest = [SHOW[rest[0]], *rest[1:]]
    try:
        return _run(rest)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP (files.guard_signals)
        return fail("interrupted")
    except BrokenPipeError:
        return EXIT_ERROR


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line's arguments (`--runtime=all` as `--runtime-scope all`); a usage error exits 2.
    Only options are rewritten: after `--` every argument is a path, whatever it looks like."""
    end = argv.index("--") if "--" in argv else len(argv)
    argv = [a.replace("--runtime=", "--runtime-scope=", 1) if a.startswith("--runtime=") and i < end else a
            for i, a in enumerate(argv)]
    return build_parser().parse_args(argv)


def _run(argv: list[str] | None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    from cglint import config, files
    from cglint.commands import check, explain, show
    from cglint.commands import stdin as stdin_command

    if args.explain:
        return explain.explain(args.explain)
    if args.list_rules:
        return explain.list_rules()
    if args.add_noqa and (args.fix or args.diff):
        return fail("--add-noqa cannot be combined with --fix or --diff")
    if args.verify and not (args.fix or args.diff):
        return fail("--verify checks fixes: use it with --fix or --diff")

    paths = args.paths or ["."]
    stdin = paths == ["-"]
    if "-" in paths and not stdin:
        return fail("'-' (stdin) cannot be combined with other paths")
    if args.stdin_filename and not stdin:  # as ruff: a stdin filename means the source is on stdin
        for path in args.paths:
            warn(f"ignoring {path} in favour of standard input (--stdin-filename)")
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
        return fail(str(exc))

    if args.show_settings:
        first = next(files.discover(paths, settings.is_excluded, settings.force_exclude), paths[0])
        return show.settings(args.stdin_filename if stdin else first, settings, args)
    if args.show_files:
        return show.files(paths, settings)
    if stdin:
        if args.runtime:  # the check imports the module by path, and stdin has none
            return fail("--runtime needs files on disk, not '-' (stdin)")
        return stdin_command.run(args, settings)

    import importlib.util

    if args.runtime and importlib.util.find_spec("tensorflow") is None:  # children run in this interpreter
        # The pip line is run as printed by tests/test_install_recipes.py.
        import shlex

        return fail("--runtime needs TensorFlow in this environment (cglint installs none, to keep yours); "
                     f"the CPU wheel: {shlex.quote(sys.executable)} -m pip install tensorflow-cpu")
    return check.run(args, settings, paths)


