"""`cglint trace [OPTIONS] -- COMMAND [ARGS...]`: runs COMMAND with every TensorFlow custom
gradient it calls checked against autodiff at its first real calls, then reports.

The command runs with its own stdin, stdout and stderr; cglint's text report goes to stderr (or
`--output-file`). A machine-readable report needs `--output-file`: the command and TensorFlow
(oneDNN and absl lines) write to both standard streams, so neither can carry only the report. Exit status: the command's own when it failed (128 + N for a signal),
otherwise 1 if a custom gradient is `mismatch` or `error`, else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

EXIT_ERROR = 2
_BOOT = Path(__file__).resolve().parent / "boot"
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def build_parser() -> argparse.ArgumentParser:
    from cglint.usage import Parser
    from cglint.report import FORMAT_NAMES

    p = Parser(
        prog="cglint trace",
        usage="cglint trace [OPTIONS] -- COMMAND [ARGS ...]",
        description="Run COMMAND and check every TensorFlow custom gradient it calls against autodiff, "
                    "with the real inputs and variables of its first calls.",
        epilog="Exit status: the command's own when it failed; else 1 on a mismatch or error verdict, else 0.",
    )
    p.add_argument("--calls", type=int, default=1, metavar="N",
                   help="eager calls checked per function and input signature (default: 1)")
    p.add_argument("--runtime-order", type=int, choices=(1, 2), default=None, metavar="N",
                   help="2: also check second derivatives and forward-mode JVPs (default: order in "
                        "[tool.cglint.runtime], else 1)")
    p.add_argument("--output-format", choices=FORMAT_NAMES, default="text")
    p.add_argument("--output-file", metavar="PATH", help="write the report to PATH instead of stderr")
    p.add_argument("--config", metavar="FILE", help="pyproject.toml (or cglint.toml) for the static rules")
    p.add_argument("--isolated", action="store_true", help="ignore configuration files")
    p.add_argument("command", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return p


def _fail(message: str) -> int:
    print(f"cglint trace: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def main(argv: list[str]) -> int:
    if "--" in argv:
        i = argv.index("--")
        own, command = argv[:i], argv[i + 1:]
    else:
        own, command = argv, None
    args = build_parser().parse_args(own)
    if command is None:
        command, args.command = args.command, []
    if args.command:
        return _fail(f"unexpected arguments before '--': {' '.join(args.command)}")
    if not command:
        return _fail("no command given: cglint trace -- COMMAND [ARGS ...]")
    if args.calls < 1:
        return _fail(f"--calls must be at least 1, got {args.calls}")
    if args.output_format != "text" and not args.output_file:
        return _fail(f"--output-format {args.output_format} needs --output-file PATH: the command and TensorFlow "
                     "also write to stdout and stderr")
    from cglint import config

    try:
        settings = config.Settings(root=Path.cwd().resolve()) if args.isolated else config.load(None, args.config)
        settings.rules  # noqa: B018 - validates the selection before the command runs
    except config.ConfigError as exc:
        return _fail(str(exc))

    events_dir = tempfile.mkdtemp(prefix="cglint-trace-")
    try:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_BOOT), env.get("PYTHONPATH")) if p)
        env["CGLINT_TRACE_DIR"] = events_dir
        env["CGLINT_TRACE_PKG"] = str(_PACKAGE_ROOT)
        env["CGLINT_TRACE_CALLS"] = str(args.calls)
        rt = settings.runtime  # [tool.cglint.runtime] rtol, atol, probes reach every check
        env["CGLINT_TRACE_TOLERANCES"] = json.dumps({"rtol": rt.rtol, "atol": rt.atol, "probes": rt.probes,
                                                     "order": args.runtime_order or rt.order})
        rc = _run(command, env)
        if rc is None:
            return _fail(f"command not found: {command[0]}")
        from cglint.trace import report as trace_report

        functions = trace_report.group(trace_report.read_events(events_dir))
        results, runtime = trace_report.build(functions, settings)
    finally:
        shutil.rmtree(events_dir, ignore_errors=True)
    status = _render(args, settings, results, runtime, command, rc)
    if status is not None:
        return status
    if rc != 0:
        return rc
    return 1 if trace_report.failing(runtime) else 0


def _run(command: list[str], env: dict) -> int | None:
    """Runs the command in the foreground; Ctrl-C goes to it (same process group), and this
    process waits for it to finish so the report still comes."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        try:
            proc = subprocess.Popen(command, env=env)
        except (FileNotFoundError, PermissionError, NotADirectoryError):
            return None
        rc = proc.wait()
    finally:
        signal.signal(signal.SIGINT, previous)
    return 128 - rc if rc < 0 else rc


def _render(args, settings, results, runtime, command, rc) -> int | None:
    from cglint import files, fix as fixmod
    from cglint.report import Context, render
    from cglint.trace import report as trace_report

    root = settings.root
    if args.output_format == "text":
        text = ""
        if runtime:
            text = render("text", results, Context(root=root, runtime=runtime))
        text += trace_report.summary_line(runtime, rc) + "\n"
    else:
        text = render(args.output_format, results, Context(root=root, runtime=runtime))
        if args.output_format == "json":  # what ran and how it ended, next to the verdicts
            obj = json.loads(text)
            obj["trace"] = {"command": command, "exit_status": rc}
            text = json.dumps(obj, indent=2) + "\n"
    if args.output_file:
        try:
            fixmod.write_atomic(args.output_file, text, root=root)  # never out of the project through a link
        except OSError as exc:
            return _fail(f"{args.output_file}: cannot write: {files.why(exc)}")
    else:
        sys.stderr.write(text)
        sys.stderr.flush()
    return None
