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
    p.add_argument("--include", action="append", default=[], metavar="PACKAGE",
                   help="also check the custom gradients of an installed package (an import name: keras, "
                        "keras.src.layers) or a directory; TensorFlow's, Keras's and tf_keras's are "
                        "left alone otherwise (repeatable)")
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
        # directories absolute: the command may change its working directory
        env["CGLINT_TRACE_INCLUDE"] = os.pathsep.join(
            str(Path(e).resolve()) if os.sep in e or Path(e).is_dir() else e for e in args.include)
        rt = settings.runtime  # [tool.cglint.runtime] rtol, atol, probes reach every check
        env["CGLINT_TRACE_TOLERANCES"] = json.dumps({"rtol": rt.rtol, "atol": rt.atol, "probes": rt.probes,
                                                     "order": args.runtime_order or rt.order})
        rc, received = _run(command, env)
        if isinstance(rc, str):
            return _fail(rc)
        from cglint.trace import report as trace_report

        try:
            from cglint.trace.notebooks import remap

            functions = trace_report.group(remap(trace_report.read_events(events_dir), command))
            results, runtime = trace_report.build(functions, settings)
        except Exception as exc:  # the command wrote the events: whatever they hold, one line
            return _fail(f"cannot read what the traced command recorded: {type(exc).__name__}: {exc}"[:300])
    finally:
        shutil.rmtree(events_dir, ignore_errors=True)
    status = _render(args, settings, results, runtime, command, rc)
    if status is not None:
        return status
    if rc != 0:
        return rc
    if received:  # the command handled the signal cglint passed on and exited 0
        return 128 + received
    return 1 if trace_report.failing(runtime) else 0


_FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP")


def _run(command: list[str], env: dict) -> tuple[int | str, int]:
    """Runs the command in the foreground and waits for it, so that the report still comes:
    (its exit status, 128 + N for a signal; or why it could not start), and the last signal
    cglint received meanwhile (0: none). SIGINT, SIGTERM and SIGHUP sent to cglint are passed on
    to the command, then cglint goes on waiting. A Ctrl-C typed at the terminal reaches the
    command by itself (same process group): it is not passed on a second time."""
    received = 0
    proc: subprocess.Popen | None = None

    def forward(signum, frame):
        nonlocal received
        received = signum
        if proc is None or proc.poll() is not None:
            return
        if signum == signal.SIGINT and _terminal_sent_it():
            return
        try:
            proc.send_signal(signum)
        except OSError:
            pass

    previous = {}
    for name in _FORWARDED:
        if hasattr(signal, name):
            previous[name] = signal.signal(getattr(signal, name), forward)
    try:
        try:
            proc = subprocess.Popen(command, env=env)
        except FileNotFoundError:
            return f"command not found: {command[0]}", received
        except OSError as exc:  # a script without `#!` (ENOEXEC), a directory, no permission
            reason = (exc.strerror or type(exc).__name__).lower()
            return f"{command[0]}: cannot execute: {reason}", received
        except (ValueError, TypeError) as exc:  # a NUL in an argument
            return f"{command[0]}: cannot execute: {exc}", received
        while True:
            try:
                rc = proc.wait()
                break
            except KeyboardInterrupt:  # a handler installed by someone else; keep waiting
                continue
    finally:
        for name, handler in previous.items():
            signal.signal(getattr(signal, name), handler)
    return (128 - rc if rc < 0 else rc), received


def _terminal_sent_it() -> bool:
    """Whether cglint is in the foreground process group of its terminal, where a Ctrl-C
    reaches every process of the group (the command included)."""
    for stream in (sys.stdin, sys.stderr, sys.stdout):
        try:
            fd = stream.fileno()
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgrp()
        except (OSError, ValueError, AttributeError):
            continue
    return False


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
