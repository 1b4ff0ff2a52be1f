"""Command line: argument parsing and exit codes. No analysis happens here."""

from __future__ import annotations

import argparse
import sys

from cglint import __version__

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _codes(value: str) -> list[str]:
    return [c.strip() for c in value.split(",") if c.strip()]


def build_parser() -> argparse.ArgumentParser:
    from cglint.report import FORMATTERS

    p = argparse.ArgumentParser(
        prog="cglint",
        description="Lint TensorFlow custom gradients (tf.custom_gradient).",
        epilog="Exit status: 0 clean, 1 findings, 2 usage or internal error.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or directories (default: .); '-' reads stdin")
    p.add_argument("--select", type=_codes, metavar="CODES", help="comma-separated codes or prefixes to check")
    p.add_argument("--ignore", type=_codes, metavar="CODES", help="comma-separated codes or prefixes to skip")
    p.add_argument("--output-format", choices=sorted(FORMATTERS), default="text")
    p.add_argument("--stdin-filename", metavar="PATH", help="the path to report for source read from stdin")
    # `--runtime` takes no separate value (a path may follow it); `--runtime=all` is spelled
    # with `=` and rewritten to `--runtime-scope all` before parsing.
    p.add_argument("--runtime", action="store_const", const="flagged",
                   help="also check the flagged functions numerically against TensorFlow autodiff; "
                        "--runtime=all checks every custom-gradient function")
    p.add_argument("--runtime-scope", dest="runtime", choices=["flagged", "all"], help=argparse.SUPPRESS)
    p.add_argument("--runtime-timeout", type=float, default=120.0, metavar="SECONDS",
                   help="per-module time limit for --runtime (default: 120)")
    p.add_argument("--explain", metavar="CODE", help="print a rule's documentation and exit")
    p.add_argument("--list-rules", action="store_true", help="list every rule: code, name, summary")
    p.add_argument("--version", action="version", version=f"cglint {__version__}")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        return _run(argv)
    except KeyboardInterrupt:
        return EXIT_ERROR
    except BrokenPipeError:
        return EXIT_ERROR


def _fail(message: str) -> int:
    print(f"cglint: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def _run(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    argv = [a.replace("--runtime=", "--runtime-scope=", 1) if a.startswith("--runtime=") else a for a in argv]
    args = build_parser().parse_args(argv)
    from cglint import engine, files
    from cglint.report import FORMATTERS
    from cglint.rules import RULES_BY_CODE, UnknownCodeError, select_rules

    if args.explain:
        rule = RULES_BY_CODE.get(args.explain.strip().upper())
        if rule is None:
            return _fail(f"unknown rule code: {args.explain!r} (see --list-rules)")
        sys.stdout.write(rule.documentation())
        return EXIT_CLEAN
    if args.list_rules:
        for rule in RULES_BY_CODE.values():
            print(f"{rule.code}  {rule.name:<30} {rule.summary}")
        return EXIT_CLEAN

    try:
        rules = select_rules(args.select, args.ignore)
    except UnknownCodeError as exc:
        return _fail(str(exc))

    paths = args.paths or ["."]
    results = []
    try:
        if paths == ["-"]:
            source = sys.stdin.buffer.read().decode("utf-8-sig", errors="replace")
            results.append(engine.lint_source(source, args.stdin_filename or "<stdin>", rules))
        elif "-" in paths:
            return _fail("'-' (stdin) cannot be combined with other paths")
        else:
            for path in files.discover(paths):
                results.append(engine.lint_file(path, rules))
    except FileNotFoundError as exc:
        return _fail(f"no such file or directory: {exc.args[0]}")
    except OSError as exc:
        return _fail(f"{exc.filename}: {exc.strerror}")
    except engine.InternalError as exc:
        return _fail(f"internal error, please report: {exc}")

    runtime = None
    if args.runtime:
        from cglint.runtime.session import FAILING, run_runtime, terminal_progress

        sites = sum(len(r.model.sites) for r in results if r.model is not None)
        runtime = run_runtime(results, everything=args.runtime == "all", timeout=args.runtime_timeout,
                              progress=terminal_progress(sites))
    sys.stdout.write(FORMATTERS[args.output_format](results, runtime))
    failed = runtime is not None and any(r["verdict"] in FAILING for r in runtime)
    return EXIT_FINDINGS if failed or any(r.diagnostics for r in results) else EXIT_CLEAN
