#!/usr/bin/env python3
"""Linting one file of a large project whose modules import one another (a script, not a test).

    python bench/project_lint.py [--files 1000] [--runs 10]

Generates a project under /tmp: packages of 20 modules each; in every package a `params.py`
with module-level variables, a `derivatives.py` with derivative helpers, and op modules whose
custom-gradient forwards read those variables and whose grad fns call those helpers (imported
relatively and through the package's `__init__` re-exports). One op module is linted the ways
an editor or pre-commit does, each `--runs` times, median:

  engine, in process      engine.lint_file: parse, model, the imported modules read and hashed
                          (the process's project index warm, as in the language server)
  cglint FILE, warm       a fresh process, the cache filled by a previous run (nothing changed)
  cglint FILE, cold       a fresh process, --no-cache
  ruff check FILE         the peer, in the same run; `cglint --version` and `python -c pass`
                          show what a fresh interpreter costs before any linting

Children run with bytecode, as an installed cglint has it. Wall and CPU time (user + system) are
both given: on a machine shared with other jobs the wall time mostly measures waiting.

Target: warm under 100 ms. The findings (one CG004 on the linted file, which needs the
variables of its sibling module) are checked on every run.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PARAMS = '''import tensorflow as tf

kernel = tf.Variable(2.0, name="kernel")
scale = tf.Variable(0.5, name="scale")
'''
DERIVATIVES = '''import tensorflow as tf


def dtanh(a):
    return 1.0 - tf.tanh(a) ** 2


def dsigmoid(a):
    s = tf.sigmoid(a)
    return s * (1.0 - s)
'''
INIT = "from .params import kernel, scale\nfrom .derivatives import dtanh, dsigmoid\n"
OP = '''import tensorflow as tf

from . import kernel
from .derivatives import dtanh


@tf.custom_gradient
def op_{n}(x):
    z = kernel * x
    y = tf.tanh(z)

    def grad(dy{variables}):
        return dy * kernel * dtanh(z){var_grads}

    return y, grad


def loss_{n}(x):
    return tf.reduce_sum(op_{n}(x))
'''


def generate(root: Path, files: int) -> Path:
    """`files` modules in packages of 20; the first op module forgets `variables` (CG004)."""
    per = 20
    for p in range(max(1, files // per)):
        pkg = root / f"pkg{p}"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text(INIT)
        (pkg / "params.py").write_text(PARAMS)
        (pkg / "derivatives.py").write_text(DERIVATIVES)
        for n in range(per - 3):
            broken = p == 0 and n == 0
            (pkg / f"op{n}.py").write_text(OP.format(
                n=n, variables="" if broken else ", variables=None",
                var_grads="" if broken else ", [dy * x * dtanh(z) for _ in variables]"))
    (root / "pyproject.toml").write_text("[tool.cglint]\n")
    return root / "pkg0" / "op0.py"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    from cglint import engine

    root = Path(tempfile.mkdtemp(prefix="cglint-project-"))
    try:
        target = generate(root, args.files)
        count = sum(1 for _ in root.rglob("*.py"))
        rel = str(target.relative_to(root))
        os.chdir(root)
        # Bytecode as an installed cglint has it (pip compiles on install); without it every
        # fresh process compiles cglint's modules again (PYTHONDONTWRITEBYTECODE, a read-only tree).
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "cglint")], env=env, check=True)
        command = [sys.executable, "-m", "cglint", "--output-format", "concise", rel]
        subprocess.run(command, capture_output=True, env=env)  # fills the cache
        ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
        rows: dict[str, tuple[list[str], Callable[[subprocess.CompletedProcess], bool]] | None] = {
            "engine, in process": None,
            "cglint FILE, warm": (command, lambda done: done.returncode == 1 and "CG004" in done.stdout),
            "cglint FILE, cold": (command[:3] + ["--no-cache"] + command[3:],
                                  lambda done: done.returncode == 1 and "CG004" in done.stdout),
            "ruff check FILE (peer)": ([ruff, "check", "--no-cache", "--isolated", rel],
                                       lambda done: done.returncode in (0, 1) and "error" not in done.stderr),
            "cglint --version": ([sys.executable, "-m", "cglint", "--version"], lambda done: done.returncode == 0),
            "python -c pass (the interpreter)": ([sys.executable, "-c", "pass"], lambda done: done.returncode == 0),
        }
        if not os.path.exists(ruff):
            del rows["ruff check FILE (peer)"]
        wall: dict[str, list[float]] = {name: [] for name in rows}
        cpu: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.runs):
            for name, how in rows.items():
                if how is None:
                    start, before = time.perf_counter(), time.process_time()
                    result = engine.lint_file(rel)
                    wall[name].append(time.perf_counter() - start)
                    cpu[name].append(time.process_time() - before)
                    if [d.code for d in result.diagnostics] != ["CG004"]:
                        print(f"project_lint: expected one CG004, got {[d.code for d in result.diagnostics]}",
                              file=sys.stderr)
                        return 1
                    continue
                argv, ok = how
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                done = subprocess.run(argv, capture_output=True, text=True, env=env)
                wall[name].append(time.perf_counter() - start)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
                if not ok(done):  # a fast command that failed measures nothing
                    print(f"project_lint: `{name}` exited {done.returncode}: {done.stdout}{done.stderr[-300:]}",
                          file=sys.stderr)
                    return 1
    finally:
        os.chdir(ROOT)
        shutil.rmtree(root, ignore_errors=True)
    print(f"A project of {count} files; one op module linted (median of {args.runs}, "
          f"load average {os.getloadavg()[0]:.1f}):\n")
    print("| how | median ms (wall) | median ms (CPU) |")
    print("| --- | ---: | ---: |")
    for name in rows:
        print(f"| {name} | {1000 * statistics.median(wall[name]):.0f} | {1000 * statistics.median(cpu[name]):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
