"""A fuzz campaign of hostile checkouts: generated and mutated programs, configurations, baselines,
paths and stdin buffers, through four channels:

- cli (`--cases`): the CLI in this process (cli.main, as tests/inprocess.py does);
- stdin (`--stdin`): `cglint [--stdin-filename NAME] ... -` in a forked real process (its own
  pipes and process group), buffers of programs, notebooks, bytes, over the size limit;
- flake8 (`--flake8`): `flake8 --select CG -j 1 -- FILES` in a forked real process, on generated
  files, `[tool.cglint]` and `setup.cfg` mutations, odd names, stdin;
- lsp (`--lsp`): one long-lived `cglint-lsp` process and a JSON-RPC client written here:
  sessions of didOpen then edits (in bounds, out of bounds, inside surrogate pairs, several per
  message, whole huge/deep/garbage texts), malformed didChange params, protocol junk (not JSON,
  not UTF-8, nested 100,000 deep, unknown methods, bad requests), notebooks; every message is
  followed by a request that must be answered within LSP_TIMEOUT, the server must stay up with
  no traceback in its log, and each session's last pushed diagnostics must equal a fresh open
  of the same text.

The CLI channel checks the promises of docs/threat-model.md:

- no exception escapes, the exit status is 0, 1 or 2, no traceback is printed;
- nothing outside the case's checkout changes (a sentinel directory next to it, reachable by
  symbolic links and `../` paths from the checkout, is compared byte for byte);
- a file named like an option after `--` is a path (`--exit-zero` never turns a finding's exit
  1 into 0, `--runtime` never runs anything);
- a finding in a file that was not checked is never "All checks passed": when any path could
  not be checked, the exit status is 2;
- each case takes under a CPU budget (a quadratic regex or a walk that never ends shows up);
- no half-written file: no `*.cglint-tmp` left, none pending in `files._PENDING`, and every
  source or notebook that read before the case (decoded; JSON parsed) still reads after it.

    python bench/fuzz_hostile.py --seed 4242 --cases 10000 [--out DIR] [--time-limit SECONDS]
    python bench/fuzz_hostile.py --seed 35 --lsp 1750 --start 100000   # LSP sessions 100000...
    python bench/fuzz_hostile.py --seed 35 --stdin 1500 --flake8 1000

The forked channels and the server add: exit status in the documented set (0/1/2; flake8 0/1),
no traceback, no process left in the case's process group, no file written by stdin mode or
flake8, `--fix` on stdin prints the buffer or a whole text that reads back. A traceback of
flake8's own code with no cglint frame (flake8 opens `# coding: zlib` files with
tokenize.open) is counted apart as upstream.

Writes every failing case's description to --out (default bench/fuzz-failures/) and prints a
table (per kind: cases, failures) for bench/RESULTS-fuzz.md. Exit status 1 when a case failed.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from array import array
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SITE = ("import tensorflow as tf\n\n@tf.custom_gradient\ndef op(x):\n    y = tf.math.tan(x)\n"
        "    def grad(dy):\n        return dy * tf.math.cos(y)\n    return y, grad\n")  # one CG005
CODECS = ["utf-8", "latin-1", "undefined", "punycode", "idna", "unicode_escape", "raw_unicode_escape", "utf-7",
          "bogus-encoding", "utf-16", "cp1252", "rot13", "hex", "base64", "uu", "zlib"]
OPTION_NAMES = ["--runtime", "--exit-zero", "--fix", "--add-noqa", "--output-file=x.py", "-", "--", "-q",
                "--runtime=all", "--config", "--write-baseline", "--select=CG999", "--show-files"]
CPU_BUDGET = 20.0  # seconds of CPU for one case (a small checkout lints in well under one)


def adversarial_line(rng: random.Random, small: bool = False) -> str:
    k = rng.choice([10, 100, 1000] if small else [10, 1000, 20000, 100000])
    return rng.choice([
        lambda: "    doc = \"" + "return " * k + "\"",
        lambda: "EXAMPLE = '''\nfrom " + "." * k + "x\n'''",
        lambda: "# " + "def f(" * k,
        lambda: "x = 1  # noqa:" + "a" * k,
        lambda: "# cglint: noqa" + " " * k + "x",
        lambda: "# cglint: example " + " " * k + "x",
        lambda: "s = '<tf.Variable \\'" + "a " * k + "'",
        lambda: "(" * rng.choice([50, 199, 250, 1000]) + ")" * 5,
        lambda: "f(" + "a=1, " * k + ")",
        lambda: "    " + "\t" * k,
        lambda: "import " + "a." * k + "b",
        lambda: "#" + "\x0c" * k,
        lambda: "a, b = f(" + "x" * k,
    ])()


def program(rng: random.Random, small: bool = False) -> bytes:
    lines = SITE.splitlines()
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        at = rng.randint(0, len(lines))
        if op < 0.5:
            lines.insert(at, adversarial_line(rng, small))
        elif op < 0.7 and lines:
            del lines[min(at, len(lines) - 1)]
        elif op < 0.85:
            lines.insert(at, rng.choice(["\x00", "\ufeff", "\r", "\u2028", "\x85", "é", "\udcff"]))
        else:
            lines.insert(at, lines[min(at, len(lines) - 1)] if lines else "")
    text = rng.choice(["\n", "\r\n", "\r"]).join(lines) + "\n"
    data = text.encode("utf-8", "surrogateescape")
    if rng.random() < 0.3:
        data = f"# -*- coding: {rng.choice(CODECS)} -*-\n".encode() + data
    if rng.random() < 0.1:
        data = b"\xef\xbb\xbf" + data
    if rng.random() < 0.1:
        data = data[: rng.randint(0, len(data))]
    if rng.random() < 0.05:
        data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    return data


def config(rng: random.Random) -> bytes:
    parts = []
    if rng.random() < 0.3:
        parts.append(f"# -*- coding: {rng.choice(CODECS)} -*-")
    parts.append("[tool.cglint]")
    choices = [
        lambda: 'select = ["CG"]',
        lambda: f'select = ["{rng.choice(["CG005", "CG9", "X", "", "*"])}"]',
        lambda: f'exclude = ["{rng.choice(["*", "**/**/**/**a", "[z-a]", "../", "/", "op.py"])}"]',
        lambda: f'baseline = "{rng.choice(["../outside/cglint-baseline.json", "/dev/zero", "b.json", "sub/../../outside/x", "."])}"',
        lambda: "extend-exclude = [" + "[" * rng.choice([10, 500, 2000]) + "]" * rng.choice([10, 500, 2000]) + "]",
        lambda: "[tool.cglint.runtime]\ntimeout = " + rng.choice(["inf", "nan", "-1", "1e400", "0", '"x"']),
        lambda: "tensorflow-aliases = [\"" + rng.choice(["a.b", "..", "a" * 10000, "1x"]) + "\"]",
        lambda: "unknown-key = 1",
    ]
    for _ in range(rng.randint(0, 3)):
        parts.append(rng.choice(choices)())
    data = "\n".join(parts).encode() + b"\n"
    if rng.random() < 0.1:
        data += b"\xff\xfe"
    return data


def baseline(rng: random.Random) -> bytes:
    count = rng.choice(["1", "2", "Infinity", "-Infinity", "NaN", "1e400", "1.5", "true", '"3"', "null", "[]",
                        "9" * 400, "-5"])
    entry = rng.choice([
        f'{{"path": "op.py", "code": "CG005", "line_hash": "x", "count": {count}}}',
        '"not an object"', "[" * 2000 + "]" * 2000, '{"path": 1}',
    ])
    return f'{{"version": 1, "findings": [{entry}]}}'.encode()


def case(rng: random.Random, base: Path) -> tuple[str, list[str], bytes | None, dict]:
    """Builds one case under `base`: returns (kind, argv, stdin bytes or None, expectations)."""
    proj = base / "proj"
    (proj / ".git").mkdir(parents=True)
    outside = base / "outside"
    outside.mkdir()
    (outside / "cglint-baseline.json").write_text('{"version": 1, "findings": []}\n')
    (outside / "bashrc").write_text("export PS1='$ '\n")
    (proj / "op.py").write_text(SITE)
    kind = rng.choice(["program", "config", "paths", "baseline", "stdin", "links"])
    args = ["--no-cache"] if rng.random() < 0.7 else []
    expect: dict = {}
    stdin = None
    if kind == "program":
        for i in range(rng.randint(1, 3)):
            (proj / f"m{i}.py").write_bytes(program(rng))
        args += rng.choice([[], ["--fix"], ["--diff"], ["--add-noqa"], ["--output-format", "sarif"],
                            ["--output-format", "json"], ["--unsafe-fixes", "--fix"], ["--statistics"]])
        args += ["--", "."]
    elif kind == "config":
        (proj / "pyproject.toml").write_bytes(config(rng))
        if rng.random() < 0.3:
            (base / "pyproject.toml").write_bytes(config(rng))
            os.chown(base / "pyproject.toml", 4321, 4321) if os.geteuid() == 0 else None
        args += rng.choice([[], ["--prune-baseline"], ["--write-baseline", "b.json"], ["--show-settings"]])
        args += ["--", "."]
    elif kind == "paths":
        names = []
        for _ in range(rng.randint(1, 3)):
            name = rng.choice(OPTION_NAMES + ["bad\udcff\udcfe.py", "a b.py", "x" * 200 + ".py", "é.py"])
            try:
                (proj / name).write_bytes(b"#!/usr/bin/env python3\nopen('PWNED', 'w')\n")
            except (OSError, ValueError):
                continue
            names.append(name)
        depth = rng.choice([0, 0, 10, 300])
        if depth:
            deep = proj / "/".join(["d"] * depth)
            deep.mkdir(parents=True)
            (deep / "deep.py").write_text(SITE)
        if rng.random() < 0.3:
            (proj / "locked").mkdir()
            (proj / "locked" / "op2.py").write_text(SITE)
            os.chmod(proj / "locked", 0)
        args += rng.choice([[], ["--force-exclude"], ["--output-format", "sarif"], ["--fix"]])
        args += ["--", "op.py", *names, *(["."] if rng.random() < 0.5 else [])]
        expect["finding"] = True  # op.py's CG005, whatever the other names say
    elif kind == "baseline":
        (proj / "b.json").write_bytes(baseline(rng))
        args += ["--baseline", "b.json", *rng.choice([[], ["--prune-baseline"], ["--fix"]]), "--", "."]
    elif kind == "stdin":
        stdin = program(rng)
        if rng.random() < 0.05:
            stdin = SITE.encode() * (11 * 2**20 // len(SITE))
        args += ["-", *rng.choice([[], ["--fix"], ["--diff"], ["--stdin-filename", "x.py"],
                                   ["--stdin-filename", "n.ipynb"]])]
    else:  # links
        for name, target in (("cglint.sarif", outside / "bashrc"), ("cfg.py", outside / "bashrc"),
                             ("b.json", outside / "cglint-baseline.json"), (".cglint_cache", outside)):
            if rng.random() < 0.6:
                (proj / name).symlink_to(target)
        if rng.random() < 0.5:
            (proj / "sub").mkdir()
            (proj / "sub" / "pyproject.toml").write_text('[tool.cglint]\nbaseline = "../b.json"\n')
        args = rng.choice([["--output-file", "cglint.sarif", "--output-format", "sarif"],
                           ["--prune-baseline", "--baseline", "b.json"], ["--fix"], []]) + ["--", "sub" if (proj / "sub").exists() else "."]
    return kind, args, stdin, expect


def snapshot(directory: Path) -> dict[str, str]:
    out = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file() and not path.is_symlink():
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _readable_sources(proj: Path) -> set[str]:
    """The sources and notebooks under `proj` that read as cglint reads them (decoded; a
    notebook's JSON parsed): a write that leaves one of them unreadable was cut short."""
    from cglint import source

    out = set()
    for dirpath, dirnames, filenames in os.walk(proj):
        dirnames[:] = [d for d in dirnames if d not in (".git", ".cglint_cache")]
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not name.endswith((".py", ".ipynb")) or os.path.islink(path):
                continue
            try:
                data = Path(path).read_bytes()
                json.loads(data) if name.endswith(".ipynb") else source.decode(data)
            except (OSError, ValueError, RecursionError):  # UndecodableError is a ValueError
                continue
            out.add(path)
    return out


def run_case(rng: random.Random) -> tuple[str, str | None, list[str]]:
    from cglint import cli

    base = Path(tempfile.mkdtemp(prefix="cglint-fuzz-"))
    here = os.getcwd()
    try:
        kind, args, stdin, expect = case(rng, base)
        before = snapshot(base / "outside")
        readable = _readable_sources(base / "proj")
        out, err = io.StringIO(), io.StringIO()
        stdin_stream = io.TextIOWrapper(io.BytesIO(stdin or b""), encoding="utf-8", errors="surrogateescape")
        os.chdir(base / "proj")
        start = time.process_time()
        old_stdin = sys.stdin
        sys.stdin = stdin_stream
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = cli.main(list(args))
        except SystemExit as exc:  # argparse on a usage error
            code = exc.code if isinstance(exc.code, int) else 2
        except BaseException:  # noqa: BLE001 - the finding
            return kind, "exception: " + traceback.format_exc(limit=3)[-400:], args
        finally:
            sys.stdin = old_stdin
            os.chdir(here)
        spent = time.process_time() - start
        problems = []
        if code not in (0, 1, 2):
            problems.append(f"exit status {code}")
        if "Traceback" in err.getvalue():
            problems.append("traceback on stderr")
        if snapshot(base / "outside") != before:
            problems.append("a file outside the checkout changed")
        if (base / "proj" / "PWNED").exists():
            problems.append("a checked file was run")
        if expect.get("finding") and code == 0:
            problems.append("exit 0 with op.py's finding")
        if "could not be checked" in out.getvalue() + err.getvalue() and code != 2 and "--exit-zero" not in args:
            problems.append("a path not checked, yet exit status %s" % code)
        if spent > CPU_BUDGET:
            problems.append(f"{spent:.1f} s of CPU")
        from cglint import files

        left = [str(p) for p in base.rglob("*.cglint-tmp")] + sorted(files._PENDING)
        if left:
            problems.append(f"a half-written file was left: {left[:3]}")
        broken = sorted(readable - _readable_sources(base / "proj"))
        if broken:
            problems.append(f"a source that read before no longer reads: {broken[:3]}")
        return kind, "; ".join(problems) or None, args
    finally:
        os.chdir(here)
        for dirpath, dirnames, _ in os.walk(base):
            for d in dirnames:
                try:
                    os.chmod(os.path.join(dirpath, d), 0o700)
                except OSError:
                    pass
        shutil.rmtree(base, ignore_errors=True)


# -- forked channels: stdin and flake8 ---------------------------------------------------------
#
# Each case runs in a child forked from this process (cglint and flake8 already imported, so a
# case costs milliseconds, not an interpreter's start): a real process with its own file
# descriptors 0-2 (pipes this process owns), its own process group (so a leftover descendant
# is found), `cli.entry()` or flake8's `main()` as the console scripts call them. This process
# starts no thread, so forking is safe.

FORK_TIMEOUT = 120.0  # seconds of wall clock before a forked case counts as hung (the machine is shared)


def run_forked(target, stdin: bytes, cwd: Path, timeout: float = FORK_TIMEOUT) -> dict:
    """Runs `target()` (which returns an exit status) in a forked child with stdin/stdout/stderr
    on pipes. Returns {code, out, err, hung, leftover}: code is the child's exit status (or
    -signal), leftover whether any process of its group outlived it."""
    fds = [os.pipe() for _ in range(3)]
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 70
        try:
            os.setpgid(0, 0)
            os.dup2(fds[0][0], 0)
            os.dup2(fds[1][1], 1)
            os.dup2(fds[2][1], 2)
            os.closerange(3, 4096)
            os.chdir(cwd)
            sys.stdin = open(0, "r", closefd=False)
            sys.stdout = open(1, "w", closefd=False)
            sys.stderr = open(2, "w", closefd=False, errors="backslashreplace")
            sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
            code = target()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - what escaped the entry point is the finding
            traceback.print_exc()
            code = 70
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except BaseException:  # noqa: BLE001
                pass
            os._exit(code if isinstance(code, int) and 0 <= code < 256 else 71)
    for fd in (fds[0][0], fds[1][1], fds[2][1]):
        os.close(fd)
    write_fd, out_fd, err_fd = fds[0][1], fds[1][0], fds[2][0]
    os.set_blocking(write_fd, False)
    pending = memoryview(stdin)
    buffers = {out_fd: bytearray(), err_fd: bytearray()}
    deadline = time.monotonic() + timeout
    hung = False
    if not pending:
        os.close(write_fd)
        write_fd = -1
    while buffers and (out_fd in buffers or err_fd in buffers):
        left = deadline - time.monotonic()
        if left <= 0:
            hung = True
            break
        readers = [fd for fd in (out_fd, err_fd) if fd in buffers and fd >= 0]
        if not readers:
            break
        writers = [write_fd] if write_fd >= 0 else []
        ready_r, ready_w, _ = select.select(readers, writers, [], min(left, 5.0))
        if ready_w:
            try:
                n = os.write(write_fd, pending[:1 << 16])
                pending = pending[n:]
            except (BrokenPipeError, BlockingIOError) as exc:
                if isinstance(exc, BrokenPipeError):
                    pending = pending[:0]
            if not pending:
                os.close(write_fd)
                write_fd = -1
        for fd in ready_r:
            chunk = os.read(fd, 1 << 20)
            if chunk:
                buffers[fd] += chunk
            else:
                os.close(fd)
                buffers[fd + 1_000_000] = buffers.pop(fd)  # keep the bytes, stop reading
        if out_fd not in buffers and err_fd not in buffers:
            break
    if write_fd >= 0:
        os.close(write_fd)
    out = buffers.get(out_fd, buffers.get(out_fd + 1_000_000, b""))
    err = buffers.get(err_fd, buffers.get(err_fd + 1_000_000, b""))
    for fd in (out_fd, err_fd):
        if fd in buffers:
            os.close(fd)
    if hung:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    leftover = False
    try:
        os.killpg(pid, 0)  # any process left in the child's group
        leftover = True
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return {"code": code, "out": bytes(out), "err": bytes(err), "hung": hung, "leftover": leftover}


def _checkout(base: Path) -> tuple[Path, Path]:
    proj, outside = base / "proj", base / "outside"
    (proj / ".git").mkdir(parents=True)
    outside.mkdir()
    (outside / "bashrc").write_text("export PS1='$ '\n")
    (proj / "op.py").write_text(SITE)
    return proj, outside


def notebook_bytes(rng: random.Random) -> bytes:
    """A notebook: cells of generated programs, or broken JSON of several kinds."""
    cells = [{"cell_type": rng.choice(["code", "code", "markdown", "raw", "bogus"]), "metadata": {},
              "source": program(rng).decode("utf-8", "surrogateescape") if rng.random() < 0.7 else SITE,
              **({"outputs": [], "execution_count": None} if rng.random() < 0.9 else {})}
             for _ in range(rng.randint(0, 4))]
    nb = {"cells": cells, "metadata": {}, "nbformat": rng.choice([4, 4, 4, 3, 5, "4"]), "nbformat_minor": 5}
    text = json.dumps(nb, ensure_ascii=rng.random() < 0.5)
    return rng.choice([
        lambda: text.encode("utf-8", "surrogatepass"),
        lambda: text.encode("utf-8", "surrogatepass")[: rng.randint(0, len(text))],
        lambda: ("[" * rng.choice([100, 1000, 100000]) + "]" * 3).encode(),
        lambda: text.replace('"cells"', '"cells": [], "cells"', 1).encode("utf-8", "surrogatepass"),
        lambda: b"\xff\xfe" + text.encode("utf-16-le", "surrogatepass"),
        lambda: json.dumps({"cells": [{"cell_type": "code", "source": ["%%time\n", "%matplotlib\n" * 50, SITE]}],
                            "nbformat": 4, "nbformat_minor": 2, "metadata": {}}).encode(),
    ])()


STDIN_NAMES = ["x.py", "n.ipynb", "--runtime", "-", "../../outside/bashrc", "dir/", "", "a\nb.py", "é.py",
               "bad\udcff.py", "x" * 5000 + ".py", "/dev/zero", "sub/../x.py", "x.pyi", "x.ipynb.py"]


def stdin_case(rng: random.Random, base: Path) -> tuple[list[str], bytes, Path, Path]:
    proj, outside = _checkout(base)
    if rng.random() < 0.2:
        (proj / "pyproject.toml").write_bytes(config(rng))
    name = rng.choice(STDIN_NAMES) if rng.random() < 0.4 else rng.choice(["x.py", "n.ipynb"])
    data = notebook_bytes(rng) if name.endswith(".ipynb") else program(rng, small=rng.random() < 0.8)
    roll = rng.random()
    if roll < 0.02:
        data = SITE.encode() * (11 * 2**20 // len(SITE))  # over the 10 MB limit
    elif roll < 0.05:
        data = b""
    elif roll < 0.08:
        data = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4096)))
    args = (["--no-cache"] if rng.random() < 0.7 else []) + (["--stdin-filename", name] if rng.random() < 0.9 else [])
    args += rng.choice([[], ["--fix"], ["--diff"], ["--fix", "--unsafe-fixes"], ["--output-format", "json"],
                        ["--output-format", "sarif"], ["--output-format", "github"], ["--statistics"],
                        ["--exit-zero"], ["--fix", "--show-fixes"], ["--add-noqa"], ["--force-exclude"],
                        ["--isolated"], ["--output-format", "junit"], ["--show-settings"]])
    args += ["-"]
    return args, data, proj, outside


def _tree(directory: Path) -> dict[str, str]:
    """Every file under `directory` (cglint's cache excluded) and its hash."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = [d for d in dirnames if d not in (".cglint_cache", ".git")]
        for f in filenames:
            p = os.path.join(dirpath, f)
            try:
                out[p] = hashlib.sha256(Path(p).read_bytes()).hexdigest() if not os.path.islink(p) else "link"
            except OSError:
                out[p] = "unreadable"
    return out


def _common_problems(run: dict, codes: tuple[int, ...]) -> list[str]:
    problems = []
    if run["hung"]:
        problems.append(f"no exit within {FORK_TIMEOUT:.0f} s")
    elif run["code"] not in codes:
        problems.append(f"exit status {run['code']}")
    if b"Traceback (most recent call last)" in run["err"] or b"Traceback (most recent call last)" in run["out"]:
        problems.append("traceback: " + run["err"][-600:].decode("utf-8", "replace"))
    if run["leftover"]:
        problems.append("a process outlived the case")
    return problems


def run_stdin_case(rng: random.Random) -> tuple[str, str | None, list[str]]:
    from cglint import cli

    base = Path(tempfile.mkdtemp(prefix="cglint-fuzz-"))
    try:
        args, data, proj, outside = stdin_case(rng, base)
        before, tree = snapshot(outside), _tree(proj)

        def target() -> int:
            sys.argv = ["cglint", *args]
            cli.entry()  # os._exit(code) after a lint
            return 0

        run = run_forked(target, data, proj)
        problems = _common_problems(run, (0, 1, 2))
        if snapshot(outside) != before:
            problems.append("a file outside the checkout changed")
        if _tree(proj) != tree:
            problems.append("stdin mode wrote into the checkout")
        if "--fix" in args and run["code"] in (0, 1) and not run["hung"]:
            # An editor replaces its buffer with stdout: it must be the buffer, or whole fixed text.
            out = run["out"]
            if data and not out:
                problems.append("--fix printed nothing for a non-empty buffer")
            elif out != data:
                from cglint import source

                try:
                    if "--stdin-filename" in args and args[args.index("--stdin-filename") + 1].endswith(".ipynb"):
                        json.loads(out)
                    else:
                        source.decode(out)
                except (ValueError, source.UndecodableError) as exc:
                    problems.append(f"--fix printed a text that does not read back ({exc})"[:200])
        return "stdin", "; ".join(problems) or None, args
    finally:
        _remove(base)


def flake8_case(rng: random.Random, base: Path) -> tuple[list[str], bytes, Path, Path, bool]:
    proj, outside = _checkout(base)
    if rng.random() < 0.3:
        (proj / "pyproject.toml").write_bytes(config(rng))
    if rng.random() < 0.1:
        (proj / "setup.cfg").write_text("[flake8]\n" + rng.choice(["select = CG\n", "max-line-length = x\n",
                                                                  "per-file-ignores =\n    op.py: CG005\n", "jobs = 2\n"]))
    names = ["op.py"] if rng.random() < 0.8 else []
    for i in range(rng.randint(0, 3)):
        name = rng.choice([f"m{i}.py"] * 6 + ["--exit-zero.py", "bad\udcff.py", "é.py", "a b.py", "-.py"])
        try:
            (proj / name).write_bytes(program(rng, small=True))
        except (OSError, ValueError):
            continue
        names.append(name)
    stdin = b""
    if rng.random() < 0.15:
        stdin, names = program(rng, small=True), ["-"]
    args = ["--select", rng.choice(["CG", "CG", "CG005", "CG0", "E999,CG"]), "-j", "1", "--no-show-source"]
    args += rng.choice([[], [], ["--disable-noqa"], ["--format", "pylint"], ["--show-source"], ["--statistics"],
                        ["--stdin-display-name", "x\udcff.py"], ["--isolated"], ["--exit-zero"]])
    args += ["--", *names] if names else ["--", "."]
    # op.py's CG005 is reported whenever no configuration of the checkout's says otherwise.
    finding = "op.py" in names and not (proj / "pyproject.toml").exists() and not (proj / "setup.cfg").exists()
    return args, stdin, proj, outside, finding


def run_flake8_case(rng: random.Random) -> tuple[str, str | None, list[str]]:
    base = Path(tempfile.mkdtemp(prefix="cglint-fuzz-"))
    try:
        args, stdin, proj, outside, finding = flake8_case(rng, base)
        before, tree = snapshot(outside), _tree(proj)

        def target() -> int:
            from flake8.main import cli as flake8_cli

            sys.argv = ["flake8", *args]
            return flake8_cli.main(args)

        run = run_forked(target, stdin, proj)
        err = run["err"].decode("utf-8", "replace")
        if "Traceback (most recent call last)" in err and "/cglint/" not in err:
            # flake8's own failure before any plugin runs (it opens `# coding: zlib` files with
            # tokenize.open, which raises LookupError): counted apart, not cglint's to fix.
            return "flake8", "upstream: " + err.strip().splitlines()[-1][:200], args
        problems = _common_problems(run, (0, 1))
        if "critical error" in err or "PluginExecutionFailed" in err:
            problems.append("flake8 reports a plugin failure: " + err[-400:])
        if snapshot(outside) != before or _tree(proj) != tree:
            problems.append("flake8 changed a file")
        if finding and not run["hung"] and (b"CG005" not in run["out"] or run["code"] != ("--exit-zero" not in args)):
            problems.append(f"op.py's CG005 not reported (exit {run['code']})")
        return "flake8", "; ".join(problems) or None, args
    finally:
        _remove(base)


def _remove(base: Path) -> None:
    for dirpath, dirnames, _ in os.walk(base):
        for d in dirnames:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(dirpath, d), 0o700)
    shutil.rmtree(base, ignore_errors=True)


# -- the language server channel ----------------------------------------------------------------
#
# One long-lived `cglint lsp` process, a client written here against its stdio pipes
# (non-blocking, no thread: the forked channels need a thread-free process), its stderr in a
# file this process owns. Each case is one message (an edit, a malformed message, a request);
# after each, a request must be answered within LSP_TIMEOUT, the server must still run, and its
# log must hold no traceback. At the end of a document's session, the diagnostics pushed for its
# last version must equal those of the same text opened fresh (one analysis, however the text
# arrived), when the client knows that text.

LSP_TIMEOUT = 60.0  # seconds one message may take to be answered (a 10 MB buffer included)


def frame(message) -> bytes:
    body = message if isinstance(message, bytes) else json.dumps(message).encode("utf-8", "surrogatepass")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class LspServer:
    """A real language-server process and a minimal JSON-RPC client for it."""

    def __init__(self, workdir: Path, log_path: Path, encoding: str = "utf-16", pull: bool = False) -> None:
        self.log_path = log_path
        self.log = open(log_path, "wb")
        exe = Path(sys.executable).parent / "cglint-lsp"
        argv = [str(exe)] if exe.exists() else [sys.executable, "-m", "cglint", "lsp"]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     cwd=workdir, start_new_session=True)
        self.wfd, self.rfd = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        os.set_blocking(self.wfd, False)
        os.set_blocking(self.rfd, False)
        self.pending = bytearray()
        self.inbuf = bytearray()
        self.replies: dict = {}
        self.published: dict[str, dict] = {}
        self.shown: list[str] = []  # window/showMessage texts
        self.next_id = 1
        self.log_seen = 0
        self.eof = False
        reply = self.request("initialize", {
            "processId": os.getpid(), "rootUri": workdir.as_uri(),
            "capabilities": {"general": {"positionEncodings": [encoding]},
                             "textDocument": {"publishDiagnostics": {"versionSupport": True},
                                              "codeAction": {"codeActionLiteralSupport": {"codeActionKind": {
                                                  "valueSet": ["quickfix", "source"]}}},
                                              **({"diagnostic": {}} if pull else {})},
                             "notebookDocument": {"synchronization": {}},
                             "workspace": {"workspaceEdit": {"documentChanges": True},
                                           **({"diagnostics": {"refreshSupport": True}} if pull else {})}},
        }, timeout=120)
        if reply is None or "result" not in reply:
            raise RuntimeError(f"the server did not initialize: {reply}; log: {self.new_log()[-2000:]}")
        self.encoding = reply["result"]["capabilities"].get("positionEncoding", "utf-16")
        self.pull = "diagnosticProvider" in reply["result"]["capabilities"]
        if self.encoding != encoding or self.pull != pull:
            raise RuntimeError(f"the server chose {self.encoding}, pull {self.pull}")
        self.notify("initialized", {})

    def alive(self) -> bool:
        return self.proc.poll() is None and not self.eof

    def send_raw(self, data: bytes) -> None:
        self.pending += data

    def notify(self, method: str, params) -> None:
        self.send_raw(frame({"jsonrpc": "2.0", "method": method, "params": params}))

    def request(self, method: str, params, timeout: float = LSP_TIMEOUT, raw: bytes | None = None):
        """Sends a request (or `raw`, a request with id `self.next_id` already framed) and
        returns its reply, or None when none came within `timeout` or the server ended."""
        rid = self.next_id
        self.next_id += 1
        self.send_raw(raw if raw is not None else frame({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
        self.pump(lambda: rid in self.replies, timeout)
        return self.replies.pop(rid, None)

    def pump(self, done, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not done():
            left = deadline - time.monotonic()
            if left <= 0 or self.eof:
                return False
            writers = [self.wfd] if self.pending else []
            ready_r, ready_w, _ = select.select([self.rfd], writers, [], min(left, 5.0))
            if ready_w:
                try:
                    n = os.write(self.wfd, self.pending[:1 << 16])
                    del self.pending[:n]
                except BlockingIOError:
                    pass
                except BrokenPipeError:
                    self.eof = True
            if ready_r:
                try:
                    chunk = os.read(self.rfd, 1 << 20)
                except BlockingIOError:
                    chunk = None
                if chunk == b"":
                    self.eof = True
                elif chunk:
                    self.inbuf += chunk
                    self._parse()
            if not ready_r and not ready_w and self.proc.poll() is not None:
                self.eof = True
        return True

    def _parse(self) -> None:
        while True:
            end = self.inbuf.find(b"\r\n\r\n")
            if end < 0:
                return
            headers = bytes(self.inbuf[:end]).decode("ascii", "replace")
            length = int(re.search(r"Content-Length:\s*(\d+)", headers, re.I).group(1))
            if len(self.inbuf) < end + 4 + length:
                return
            body = bytes(self.inbuf[end + 4:end + 4 + length])
            del self.inbuf[:end + 4 + length]
            message = json.loads(body)
            if "method" in message and "id" in message:  # a request of the server's: answered plainly
                self.send_raw(frame({"jsonrpc": "2.0", "id": message["id"], "result": None}))
            elif "id" in message:
                self.replies[message["id"]] = message
            elif message.get("method") == "textDocument/publishDiagnostics":
                self.published[message["params"]["uri"]] = message["params"]
            elif message.get("method") == "window/showMessage":
                self.shown.append(message["params"].get("message", ""))

    def new_log(self) -> str:
        self.log.flush()
        with open(self.log_path, "rb") as f:
            f.seek(self.log_seen)
            data = f.read()
        self.log_seen += len(data)
        return data.decode("utf-8", "replace")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.alive():
                self.request("shutdown", None, timeout=30)
                self.notify("exit", None)
                self.pump(lambda: False, 0.5 if self.pending else 0)
        with contextlib.suppress(Exception):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # nothing of the server's group may stay
        self.proc.stdout.close()
        self.log.close()


class Units:
    """A document as a UTF-16 client holds it: code units (one str character per unit, so a
    surrogate pair is two), positions clamped as the LSP spec says."""

    def __init__(self, text: str) -> None:
        data = text.encode("utf-16-le", "surrogatepass")
        self.u = "".join(map(chr, array("H", data)))

    def text(self) -> str:
        return array("H", map(ord, self.u)).tobytes().decode("utf-16-le", "surrogatepass")

    def starts(self) -> list[int]:
        return [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", self.u)]

    def offset(self, line: int, character: int) -> int:
        starts = self.starts()
        if line >= len(starts):
            return len(self.u)
        end = starts[line + 1] if line + 1 < len(starts) else len(self.u)
        content = self.u[starts[line]:end].rstrip("\r\n")
        return starts[line] + min(character, len(content))

    def edit(self, a: tuple[int, int], b: tuple[int, int], new: str) -> None:
        x, y = self.offset(*a), self.offset(*b)
        self.u = self.u[:x] + Units(new).u + self.u[y:]

    def random_position(self, rng: random.Random) -> tuple[int, int]:
        starts = self.starts()
        line = rng.randrange(len(starts))
        end = starts[line + 1] if line + 1 < len(starts) else len(self.u)
        return line, rng.randint(0, len(self.u[starts[line]:end].rstrip("\r\n")))


class Utf8Units:
    """A document as a UTF-8 client holds it: a column counts bytes. Positions this client
    makes fall between characters (inside one the spec says nothing); clamped as the spec says."""

    def __init__(self, text: str) -> None:
        self.u = text  # `u`: what the campaign measures (len) and Units keeps

    def text(self) -> str:
        return self.u

    def _line(self, line: int) -> tuple[int, str] | None:
        starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", self.u)]
        if line >= len(starts):
            return None
        end = starts[line + 1] if line + 1 < len(starts) else len(self.u)
        return starts[line], self.u[starts[line]:end].rstrip("\r\n")

    def offset(self, line: int, character: int) -> int:
        found = self._line(line)
        if found is None:
            return len(self.u)
        start, content = found
        seen = 0
        for i, char in enumerate(content):
            if seen >= character:
                return start + i
            seen += len(char.encode("utf-8", "surrogatepass"))
        return start + len(content)

    def edit(self, a: tuple[int, int], b: tuple[int, int], new: str) -> None:
        x, y = self.offset(*a), self.offset(*b)
        self.u = self.u[:x] + new + self.u[y:]

    def random_position(self, rng: random.Random) -> tuple[int, int]:
        lines = len(re.findall(r"\r\n|\r|\n", self.u)) + 1
        line = rng.randrange(lines)
        _, content = self._line(line)
        return line, len(content[:rng.randint(0, len(content))].encode("utf-8", "surrogatepass"))


TYPED = ["a", "x", "dy", " ", "    ", "(", ")", ":", ",", "=", "#", '"', "'''", "tf.", "return ", "def ", "\n",
         "\r\n", "\r", "\t", "\x0c", "\u2028", "\x85", "\x00", "😀", "𝔘", "é", "\ud83d", "\ude00", "\udcff",
         "  # noqa: CG005", "  # cglint: noqa", "@tf.custom_gradient\n", "lambda dy: dy", "\\", "\ufeff",
         "# -*- coding: undefined -*-\n", "import tensorflow as tf\n", "%matplotlib inline\n"]


def replacement(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.6:
        return "".join(rng.choice(TYPED) for _ in range(rng.randint(0, 3)))
    if roll < 0.8:
        return SITE
    if roll < 0.95:
        return adversarial_line(rng, small=rng.random() < 0.8) + "\n"
    return "(" * rng.choice([100, 1000, 100000])


def whole_text(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.7:
        return program(rng, small=rng.random() < 0.8).decode("utf-8", "surrogateescape")
    if roll < 0.8:
        return SITE * rng.choice([1, 3, 20])
    if roll < 0.81:
        return SITE * (11 * 2**20 // len(SITE))  # over the file limit
    if roll < 0.9:
        return "[" * rng.choice([1000, 100000]) + "\n"
    if roll < 0.95:
        return "".join(chr(rng.choice([rng.randrange(0x20, 0x7f), rng.randrange(0x80, 0xd800),
                                      rng.randrange(0xd800, 0xe000), rng.randrange(0x10000, 0x110000)]))
                       for _ in range(rng.randint(0, 2000)))
    return ""


def malformed_change(rng: random.Random, uri: str, version: int) -> dict:
    """A didChange whose params are not what the spec allows (or sit on its edges)."""
    good_range = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}
    change = rng.choice([
        lambda: {"range": {"start": {"line": -1, "character": -5}, "end": {"line": 0, "character": 0}}, "text": "x"},
        lambda: {"range": {"start": {"line": 2**31, "character": 2**63}, "end": {"line": 2**64, "character": 0}}, "text": "x"},
        lambda: {"range": {"start": {"line": "0", "character": 0}, "end": {"line": 0, "character": 0}}, "text": "x"},
        lambda: {"range": {"start": {"line": 0.5, "character": 1e300}, "end": {"line": 0, "character": 0}}, "text": "x"},
        lambda: {"range": good_range, "text": None},
        lambda: {"range": good_range, "text": 5},
        lambda: {"range": None, "text": "x"},
        lambda: {"range": good_range},
        lambda: {"text": ["a"]},
        lambda: {"range": good_range, "rangeLength": -1, "text": "y"},
        lambda: {"range": {"start": {}, "end": {}}, "text": ""},
        lambda: "not a change",
    ])()
    params = rng.choice([
        lambda: {"textDocument": {"uri": uri, "version": version}, "contentChanges": [change]},
        lambda: {"textDocument": {"uri": uri, "version": rng.choice([None, "1", -1, 2**70, 1.5])},
                 "contentChanges": [{"text": "x = 1\n"}]},
        lambda: {"textDocument": {"uri": uri, "version": version}, "contentChanges": change},
        lambda: {"textDocument": {"uri": uri}, "contentChanges": []},
        lambda: {"textDocument": {"uri": rng.choice([None, 5, "", "file:///never/opened.py"]), "version": version},
                 "contentChanges": [{"text": "x"}]},
        lambda: {"textDocument": {"uri": uri, "version": version}, "contentChanges": [change] * 3},
        lambda: [uri, version],
        lambda: None,
    ])()
    return {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": params}


def protocol_junk(rng: random.Random, rid: int, uri: str) -> tuple[bytes, bool]:
    """A framed message that is not a well-formed notification: (bytes, whether it is a request
    with id `rid` that must get an answer)."""
    pos = {"line": rng.choice([0, 1, 10**6, -1]), "character": rng.choice([0, 3, 10**9, -1])}
    choice = rng.randrange(13)
    if choice == 0:
        return frame(b"{not json"), False
    if choice == 1:
        return frame(b'{"jsonrpc": "2.0", "method": "textDocument/didChange", "params": \xff\xfe}'), False
    if choice == 2:
        return frame(b"[" * rng.choice([1000, 5000, 100000]) + b"]"), False
    if choice == 3:
        return frame(b'{"jsonrpc": "2.0", "method": "x", "params": ' + b"[" * 3000 + b"]" * 3000 + b"}"), False
    if choice == 4:
        return frame({"jsonrpc": "2.0", "id": rid, "method": "cglint/noSuchMethod", "params": {}}), True
    if choice == 5:
        return frame({"jsonrpc": "2.0", "id": rid, "method": "textDocument/hover",
                      "params": {"textDocument": {"uri": uri}, "position": pos}}), True
    if choice == 6:
        return frame({"jsonrpc": "2.0", "id": rid, "method": "textDocument/codeAction",
                      "params": {"textDocument": {"uri": uri}, "range": {"start": pos, "end": pos},
                                 "context": {"diagnostics": rng.choice([[], [{"range": {"start": pos, "end": pos},
                                                                             "message": "m", "code": "CG005"}], "x"]),
                                             "only": rng.choice([None, ["source"], ["quickfix"], [""], ["source.fixAll.cglint"]])}}}), True
    if choice == 7:
        return frame({"jsonrpc": "2.0", "id": rid, "method": "codeAction/resolve",
                      "params": rng.choice([{"title": "t", "data": {"uri": uri, "version": 1, "fix": 10**9}},
                                            {"title": "t", "kind": "source.fixAll.cglint", "data": {"uri": uri, "version": None}},
                                            {"title": "t", "data": [1, 2]}, {"title": 5}, {}])}), True
    if choice == 8:
        return frame({"jsonrpc": "2.0", "id": rid, "method": "textDocument/diagnostic",
                      "params": {"textDocument": {"uri": rng.choice([uri, "file:///x%00y.py", "untitled:1"])},
                                 "previousResultId": rng.choice([None, "1", 5])}}), True
    if choice == 9:
        return frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": rng.choice([rid - 1, "x", None])}}), False
    if choice == 10:
        return b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n" + frame(
            {"jsonrpc": "2.0", "method": "textDocument/didSave", "params": {"textDocument": {"uri": uri}}}), False
    if choice == 11:
        return frame({"jsonrpc": "1.0", "id": rid, "method": "textDocument/hover", "params": {}}), False
    return frame({"jsonrpc": "2.0", "method": "workspace/didChangeWatchedFiles",
                  "params": {"changes": [{"uri": "file:///nowhere/pyproject.toml", "type": rng.choice([1, 2, 3, 99])}]}}), False


def lsp_uri(rng: random.Random, workdir: Path, n: int) -> str:
    roll = rng.random()
    if roll < 0.75:
        return (workdir / f"doc{n}.py").as_uri()
    return rng.choice([f"untitled:Untitled-{n}", f"file:///tmp/%00/odd{n}.py", f"file:///nonexistent/dir/d{n}.py",
                       (workdir / f"é {n}.py").as_uri(), (workdir / f"sub{n}" / "x.ipynb").as_uri(),
                       f"file:///{'a/' * 2000}d{n}.py", f"vscode-notebook-cell:/x.ipynb#W{n}",
                       f"file:{workdir}/rel{n}.py", f"file://host/share/d{n}.py"])


class LspCampaign:
    """The language-server channel: sessions of edits to one document (or one notebook)."""

    def __init__(self, seed: int, workdir: Path, log_path: Path, client: str = "push-utf16") -> None:
        self.seed, self.workdir, self.log_path = seed, workdir, log_path
        self.pull = client.startswith("pull")
        self.encoding = "utf-8" if client.endswith("utf8") else "utf-16"
        self.units = Utf8Units if self.encoding == "utf-8" else Units
        self.server = LspServer(workdir, log_path, self.encoding, self.pull)
        self.totals: dict[str, list[int]] = {}
        self.failures: list[dict] = []
        self.cases = 0
        self.session = 0
        self.spent: dict[str, float] = {}  # wall seconds per kind of case
        self.last = time.monotonic()

    def restart(self) -> None:
        with contextlib.suppress(Exception):
            self.server.close()
        self.server = LspServer(self.workdir, self.log_path.with_suffix(f".{self.session}.log"), self.encoding, self.pull)

    def check(self, kind: str, what: str, answered: bool = True, reply=None) -> bool:
        """One case's verdict: the server answers, lives, and logs no traceback."""
        self.cases += 1
        row = self.totals.setdefault(kind, [0, 0])
        row[0] += 1
        now = time.monotonic()
        self.spent[kind] = self.spent.get(kind, 0.0) + now - self.last
        self.last = now
        problems = []
        if not answered:
            problems.append(f"no answer within {LSP_TIMEOUT:.0f} s" if self.server.alive() else "the server ended")
        if reply is not None and "error" in reply and reply["error"].get("code") == -32603:
            problems.append("internal error: " + str(reply["error"].get("message"))[:300])
        if not self.server.alive():
            problems.append(f"the server ended (exit {self.server.proc.poll()})")
        log = self.server.new_log()
        if "Traceback" in log or "CRITICAL" in log:
            problems.append("traceback in the server's log: " + log[-1500:])
        if problems:
            row[1] += 1
            self.failures.append({"channel": "lsp", "kind": kind, "session": self.session, "case": self.cases,
                                  "what": what[:300], "problem": "; ".join(problems)})
            print(f"lsp case {self.cases} ({kind}, session {self.session}): {'; '.join(problems)[:600]} [{what[:160]}]",
                  file=sys.__stderr__, flush=True)
            if not self.server.alive() or not answered:
                self.restart()
            return False
        return True

    def sync(self, uri: str) -> tuple[bool, dict | None]:
        """A request that waits for the document's lint (what an editor asks after an edit)."""
        reply = self.server.request("textDocument/codeAction", {
            "textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
            "context": {"diagnostics": []}})
        return reply is not None, reply

    def run(self, cases: int, start_session: int = 0) -> None:
        self.session = start_session
        while self.cases < cases:
            rng = random.Random(f"{self.seed}:lsp:{self.session}")
            if rng.random() < 0.08:
                self.notebook_session(rng, cases)
            else:
                self.text_session(rng, cases)
            self.session += 1

    def text_session(self, rng: random.Random, cases: int) -> None:
        server = self.server
        uri = lsp_uri(rng, self.workdir, self.session)
        text = whole_text(rng) if rng.random() < 0.5 else SITE
        doc = self.units(text) if len(text) < 200_000 else None
        known = True  # the client knows the server's text
        version = 1
        server.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": rng.choice(["python"] * 9 + ["plaintext"]), "version": version, "text": text}})
        answered, reply = self.sync(uri)
        if not self.check("open", f"didOpen {uri[:80]} ({len(text)} chars)", answered, reply):
            return
        for _ in range(rng.randint(3, 16)):
            if self.cases >= cases:
                break
            version += 1
            roll = rng.random()
            if roll < 0.45 and doc is not None:
                kind, changes = "edit", []
                for _ in range(rng.choice([1, 1, 1, 2, 5])):
                    a, b = doc.random_position(rng), doc.random_position(rng)
                    a, b = min(a, b), max(a, b)
                    new = replacement(rng)
                    changes.append({"range": {"start": {"line": a[0], "character": a[1]},
                                              "end": {"line": b[0], "character": b[1]}}, "text": new})
                    doc.edit(a, b, new)
                    if len(doc.u) > 200_000:
                        doc, known = None, False
                        break
                what = f"didChange {len(changes)} ranges"
            elif roll < 0.6:
                kind, new = "full", whole_text(rng)
                changes = [{"text": new}]
                doc, known = (self.units(new) if len(new) < 200_000 else None), len(new) < 200_000
                what = f"didChange full text ({len(new)} chars)"
            elif roll < 0.7:
                kind = "out-of-bounds"
                start = {"line": rng.choice([0, 5, 10**6, 2**31 - 1]), "character": rng.choice([0, 7, 10**9, 2**31 - 1])}
                end = {"line": rng.choice([0, 3, 10**6, 2**31 - 1]), "character": rng.choice([0, 2**31 - 1])}
                changes = [{"range": {"start": start, "end": end}, "text": replacement(rng)}]
                if doc is not None and (start["line"], start["character"]) <= (end["line"], end["character"]):
                    doc.edit((start["line"], start["character"]), (end["line"], end["character"]), changes[0]["text"])
                else:
                    known = False  # a reversed range: the spec says nothing
                what = f"didChange {start}-{end}"
            elif roll < 0.8:
                kind = "malformed"
                message = malformed_change(rng, uri, version)
                server.send_raw(frame(message))
                known = False
                answered, reply = self.sync(uri)
                self.check(kind, json.dumps(message)[:300], answered, reply)
                continue
            elif roll < 0.92:
                kind = "protocol"
                rid = server.next_id
                data, is_request = protocol_junk(rng, rid, uri)
                if is_request:
                    reply = server.request("", None, raw=data)
                    if not self.check(kind, data[:300].decode("utf-8", "replace"), reply is not None, reply):
                        return
                else:
                    server.send_raw(data)
                    answered, reply = self.sync(uri)
                    if not self.check(kind, data[:300].decode("utf-8", "replace"), answered, reply):
                        return
                version -= 1
                continue
            else:
                kind = "close-reopen"
                server.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
                if rng.random() < 0.5:
                    server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
                text = doc.text() if doc is not None and known else whole_text(rng)
                doc, known, version = (self.units(text) if len(text) < 200_000 else None), len(text) < 200_000, 1
                server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python",
                                                                        "version": version, "text": text}})
                answered, reply = self.sync(uri)
                if not self.check(kind, f"save, close, open ({len(text)} chars)", answered, reply):
                    return
                continue
            server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                     "contentChanges": changes})
            answered, reply = self.sync(uri)
            if not self.check(kind, what, answered, reply):
                return
        self.compare(rng, uri, doc if known else None, version)
        server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    def compare(self, rng: random.Random, uri: str, doc, version: int) -> None:
        """The diagnostics pushed for the session's last text equal those of that text opened
        fresh under a URI naming the same file (one analysis however the text arrived)."""
        server = self.server
        if doc is None:  # resynchronise first: the client no longer knows the server's text
            version += 1
            text = whole_text(rng)
            if len(text) >= 200_000:
                text = SITE
            server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                     "contentChanges": [{"text": text}]})
        else:
            text = doc.text()
        ref = uri + "#fresh"
        server.published.pop(ref, None)
        if self.pull:  # nothing is pushed: pull both (what a pull client shows)
            got = self._pulled(uri, version)
            server.notify("textDocument/didOpen", {"textDocument": {"uri": ref, "languageId": "python", "version": 1,
                                                                    "text": text}})
            fresh = self._pulled(ref, 1)
        else:
            got = server.pump(lambda: server.published.get(uri, {}).get("version") == version, LSP_TIMEOUT)
            server.notify("textDocument/didOpen", {"textDocument": {"uri": ref, "languageId": "python", "version": 1,
                                                                    "text": text}})
            fresh = server.pump(lambda: server.published.get(ref, {}).get("version") == 1, LSP_TIMEOUT)
        server.notify("textDocument/didClose", {"textDocument": {"uri": ref}})
        self.cases += 1
        row = self.totals.setdefault("compare", [0, 0])
        row[0] += 1
        now = time.monotonic()
        self.spent["compare"] = self.spent.get("compare", 0.0) + now - self.last
        self.last = now
        problem = None
        if not got:
            problem = f"no diagnostics pushed for version {version}"
        elif not fresh:
            problem = "no diagnostics pushed for the fresh open"
        else:
            def key(d):
                return json.dumps(d, sort_keys=True)

            a = sorted(map(key, server.published[uri]["diagnostics"]))
            b = sorted(map(key, server.published[ref]["diagnostics"]))
            if a != b:
                problem = f"diagnostics differ from a fresh open: {sorted(set(a) ^ set(b))[:3]}"
        log = server.new_log()
        if "Traceback" in log:
            problem = (problem + "; " if problem else "") + "traceback in the server's log: " + log[-1500:]
        if problem:
            row[1] += 1
            self.failures.append({"channel": "lsp", "kind": "compare", "session": self.session, "case": self.cases,
                                  "what": f"{uri[:100]} ({len(text)} chars)", "problem": problem[:2000],
                                  "text": text[:5000]})
            print(f"lsp case {self.cases} (compare, session {self.session}): {problem[:600]}", file=sys.__stderr__, flush=True)
        if not server.alive():
            self.restart()

    def _pulled(self, uri: str, version: int) -> bool:
        reply = self.server.request("textDocument/diagnostic", {"textDocument": {"uri": uri}})
        if reply is None or "result" not in reply:
            return False
        self.server.published[uri] = {"uri": uri, "version": version, "diagnostics": reply["result"].get("items", [])}
        return True

    def notebook_session(self, rng: random.Random, cases: int) -> None:
        server = self.server
        nb_uri = (self.workdir / f"nb{self.session}.ipynb").as_uri()
        cells = [f"vscode-notebook-cell:{self.workdir}/nb{self.session}.ipynb#C{i}" for i in range(rng.randint(1, 4))]
        version = 1
        server.notify("notebookDocument/didOpen", {
            "notebookDocument": {"uri": nb_uri, "notebookType": "jupyter-notebook", "version": version,
                                 "cells": [{"kind": rng.choice([2, 2, 1]), "document": c} for c in cells]},
            "cellTextDocuments": [{"uri": c, "languageId": "python", "version": 1,
                                   "text": rng.choice([SITE, "%matplotlib inline\n", whole_text(rng)])} for c in cells]})
        reply = server.request("textDocument/diagnostic", {"textDocument": {"uri": cells[0]}})
        if not self.check("notebook", f"notebookDocument/didOpen {len(cells)} cells", reply is not None, reply):
            return
        for _ in range(rng.randint(2, 8)):
            if self.cases >= cases:
                break
            version += 1
            roll = rng.random()
            cell = rng.choice(cells)
            if roll < 0.5:
                change = {"textContent": [{"document": {"uri": cell, "version": version}, "changes": [
                    {"range": {"start": {"line": rng.randint(0, 12), "character": rng.randint(0, 30)},
                               "end": {"line": rng.randint(0, 12), "character": rng.randint(0, 30)}},
                     "text": replacement(rng)}]}]}
            elif roll < 0.7:
                new = f"vscode-notebook-cell:{self.workdir}/nb{self.session}.ipynb#N{version}"
                cells.append(new)
                change = {"structure": {"array": {"start": rng.choice([0, len(cells) - 1, 10**6]),
                                                  "deleteCount": rng.choice([0, 1, 10**6]),
                                                  "cells": [{"kind": 2, "document": new}]},
                                        "didOpen": [{"uri": new, "languageId": "python", "version": 1,
                                                     "text": whole_text(rng)}]}}
            elif roll < 0.85:
                change = {"cells": {"textContent": [{"document": {"uri": "vscode-notebook-cell:/nowhere#X", "version": 1},
                                                     "changes": [{"text": "x"}]}]}}
            else:
                change = rng.choice([{"cells": None}, {"metadata": {"a": [[[]]]}}, {"cells": {"structure": {
                    "array": {"start": -1, "deleteCount": -1}}}}, "junk"])
            if "textContent" in change or "structure" in change:
                change = {"cells": change}
            message = {"notebookDocument": {"uri": nb_uri, "version": version}, "change": change}
            server.notify("notebookDocument/didChange", message)
            reply = server.request("textDocument/diagnostic", {"textDocument": {"uri": rng.choice(cells)}})
            if not self.check("notebook", json.dumps(message)[:300], reply is not None, reply):
                return
        server.notify("notebookDocument/didClose", {"notebookDocument": {"uri": nb_uri},
                                                    "cellTextDocuments": [{"uri": c} for c in cells]})


def run_lsp(seed: int, cases: int, out: Path | None = None, start_session: int = 0,
            base: Path | None = None, client: str = "push-utf16") -> LspCampaign:
    """The language-server channel for `cases` messages at `seed`, in a fresh directory under
    `base` (tests/robustness/test_channels.py runs it)."""
    base = Path(tempfile.mkdtemp(prefix="cglint-fuzz-lsp-", dir=base))
    workdir = base / "proj"
    (workdir / ".git").mkdir(parents=True)
    (workdir / "pyproject.toml").write_text('[tool.cglint]\nselect = ["CG"]\n')
    campaign = LspCampaign(seed, workdir, base / "server.log", client)
    try:
        campaign.run(cases, start_session)
    finally:
        campaign.server.close()
        if out is not None and campaign.failures:
            out.mkdir(parents=True, exist_ok=True)
            (out / f"lsp-{seed}-{start_session}.json").write_text(json.dumps(campaign.failures, indent=2))
        _remove(base)
    return campaign


# -- the campaign --------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=4242)
    parser.add_argument("--cases", type=int, default=None,
                        help="cases of the in-process CLI channel (default 10000 when no channel count is given)")
    parser.add_argument("--stdin", type=int, default=0, help="cases of the stdin channel (a forked `cglint -`)")
    parser.add_argument("--flake8", type=int, default=0, help="cases of the flake8 channel (a forked `flake8 --select CG`)")
    parser.add_argument("--lsp", type=int, default=0, help="messages of the language-server channel (one server)")
    parser.add_argument("--lsp-client", choices=["push-utf16", "pull-utf8"], default="push-utf16",
                        help="the client the server meets: pushed diagnostics and UTF-16 columns (Neovim, "
                             "most clients) or pulled diagnostics and UTF-8 columns")
    parser.add_argument("--start", type=int, default=0,
                        help="first case index (each case depends on the seed and its index only: "
                             "ranges run in parallel make one campaign)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "fuzz-failures"))
    parser.add_argument("--time-limit", type=float, default=0, metavar="SECONDS",
                        help="stop the CLI channel after this long (wall clock) and report the cases run so far")
    args = parser.parse_args()
    if args.cases is None:
        args.cases = 0 if (args.stdin or args.flake8 or args.lsp) else 10000
    from cglint import reach
    # What a forked case would import again each time (libcst, the rules, flake8 and its
    # checkers): imported once here, so a fork costs the case's work only.
    import cglint.engine, cglint.fix, cglint.notebook, cglint.report, cglint.flake8_plugin  # noqa: E401,F401
    if args.flake8:
        import flake8.main.application, flake8.checker, pycodestyle, pyflakes.checker, mccabe  # noqa: E401,F401

    table: list[tuple[str, str, int, int, float]] = []  # channel, kind, cases, failures, seconds
    failures = 0
    upstream: dict[str, int] = {}  # failures of a third party's own code, on its own input
    started = time.time()
    for channel, count, runner in (("cli", args.cases, run_case), ("stdin", args.stdin, run_stdin_case),
                                   ("flake8", args.flake8, run_flake8_case)):
        if not count:
            continue
        t0 = time.time()
        totals: dict[str, list[int]] = {}
        for i in range(args.start, args.start + count):
            if channel == "cli" and args.time_limit and time.time() - started > args.time_limit:
                break
            rng = random.Random(f"{args.seed}:{i}" if channel == "cli" else f"{args.seed}:{channel}:{i}")
            reach.use(())
            kind, problem, argv = runner(rng)
            row = totals.setdefault(kind, [0, 0])
            row[0] += 1
            if problem and problem.startswith("upstream: "):
                upstream.setdefault(f"{channel}: {problem[10:]}", 0)
                upstream[f"{channel}: {problem[10:]}"] += 1
            elif problem:
                row[1] += 1
                failures += 1
                Path(args.out).mkdir(parents=True, exist_ok=True)
                Path(args.out, f"case-{args.seed}-{channel}-{i}.json").write_text(json.dumps(
                    {"seed": args.seed, "channel": channel, "case": i, "kind": kind, "argv": argv, "problem": problem},
                    indent=2))
                print(f"{channel} case {i} ({kind}): {problem[:800]} [{' '.join(argv)[:120]}]", file=sys.__stderr__, flush=True)
            done = i - args.start + 1
            if done % 500 == 0:
                print(f"{channel}: {done} cases, {failures} failures, {time.time() - started:.0f} s",
                      file=sys.__stderr__, flush=True)
        for kind, (n, f) in sorted(totals.items()):
            table.append((channel, kind, n, f, 0.0))
        table.append((channel, "all", sum(n for n, _ in totals.values()), sum(f for _, f in totals.values()),
                      time.time() - t0))
    if args.lsp:
        t0 = time.time()
        campaign = run_lsp(args.seed, args.lsp, Path(args.out), start_session=args.start, client=args.lsp_client)
        for kind, (n, f) in sorted(campaign.totals.items()):
            table.append((f"lsp ({args.lsp_client})", kind, n, f, 0.0))
            failures += f
        table.append((f"lsp ({args.lsp_client})", "all", campaign.cases, len(campaign.failures), time.time() - t0))
        print(f"lsp: {campaign.session} sessions; wall seconds by kind: "
              + ", ".join(f"{k} {v:.0f}" for k, v in sorted(campaign.spent.items())), file=sys.__stderr__)
    print("| channel | kind | cases | failures | wall (s) |\n| --- | --- | ---: | ---: | ---: |")
    for channel, kind, n, f, seconds in table:
        print(f"| {channel} | {kind} | {n} | {f} | {seconds:.0f} |" if kind == "all" else
              f"| {channel} | {kind} | {n} | {f} | |")
    for what, n in sorted(upstream.items()):
        print(f"upstream (not cglint's, not counted): {n} x {what}")
    total = sum(n for _, kind, n, _, _ in table if kind == "all")
    print(f"| all | | {total} | {failures} | {time.time() - started:.0f} |")
    print(f"seed {args.seed}: {total} cases in {time.time() - started:.0f} s, {failures} failures", file=sys.__stderr__)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
