#!/usr/bin/env python3
"""How soon a language server is usable: time from starting it to the `initialize` answer, and
to the first diagnostics of an opened file, for `cglint lsp` and `ruff server` in the same run.

    python bench/lsp_startup.py [--runs 10] [--file fixtures/seed/original.py]

Each run starts a fresh server process (as an editor does on `:edit`), sends `initialize` with a
client that takes pushed diagnostics (both servers then push), `initialized`, and `didOpen` of
the file; it times the `initialize` response and the first `textDocument/publishDiagnostics`
for the file. Prints the median (and min/max) of each per server. ruff is skipped when it is not
installed (`pip install ruff`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _send(proc, message: dict) -> None:
    body = json.dumps(message).encode()
    proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    proc.stdin.flush()


def _receive(proc) -> dict:
    length = None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise EOFError("the server closed its output")
        line = line.strip()
        if not line:
            break
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    return json.loads(proc.stdout.read(length))


def one_run(cmd: list[str], path: Path) -> tuple[float, float]:
    """(seconds to the initialize answer, seconds to the first diagnostics) from the start."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            cwd=path.parent, env=env)
    try:
        uri = path.resolve().as_uri()
        _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "processId": os.getpid(), "rootUri": path.parent.resolve().as_uri(),
            "capabilities": {"textDocument": {"publishDiagnostics": {}, "synchronization": {"didSave": True}}},
            "workspaceFolders": [{"uri": path.parent.resolve().as_uri(), "name": "bench"}]}})
        while (msg := _receive(proc)).get("id") != 1:
            pass
        initialized = time.perf_counter() - start
        _send(proc, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
        _send(proc, {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": path.read_text()}}})
        while True:
            msg = _receive(proc)
            if msg.get("method") == "textDocument/publishDiagnostics" and msg["params"]["uri"] == uri:
                first = time.perf_counter() - start
                break
            if "id" in msg and "method" in msg:  # a request from the server: answer it empty
                _send(proc, {"jsonrpc": "2.0", "id": msg["id"], "result": None})
        _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        while _receive(proc).get("id") != 2:
            pass
        _send(proc, {"jsonrpc": "2.0", "method": "exit"})
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return initialized, first


def servers() -> dict[str, list[str]]:
    found = {"cglint lsp": [sys.executable, "-m", "cglint", "lsp"]}
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff:
        found["ruff server"] = [ruff, "server"]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--file", type=Path, default=ROOT / "fixtures" / "seed" / "original.py")
    args = parser.parse_args(argv)
    print(f"{args.runs} fresh server processes each; file: {args.file.relative_to(ROOT) if args.file.is_absolute() and ROOT in args.file.parents else args.file}")
    print(f"{'server':<12} {'initialize (ms)':>28} {'first diagnostics (ms)':>28}")
    for name, cmd in servers().items():
        times = [one_run(cmd, args.file.resolve()) for _ in range(args.runs)]
        init = [t[0] * 1000 for t in times]
        diag = [t[1] * 1000 for t in times]

        def cell(xs):
            return f"{statistics.median(xs):7.0f} ({min(xs):.0f}-{max(xs):.0f})"

        print(f"{name:<12} {'median ' + cell(init):>28} {'median ' + cell(diag):>28}")
    if "ruff server" not in servers():
        print("ruff server: not installed (pip install ruff)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
