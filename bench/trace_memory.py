"""Peak memory of `cglint trace` (and `--runtime`) on an iterative forward (issue 34, item 6).

    python bench/trace_memory.py [--steps 3000] [--size 200000]
    python bench/trace_memory.py --runtime --steps 150   # a module that calls it on its import

With `--runtime` the program is a module that calls the custom gradient eagerly on its own data
when imported, measured plain (`python module.py`) and under `cglint --runtime=all`, whose child
imports it and checks the function (the largest process is the measure either way).

A custom gradient whose forward is a `tf.while_loop` of STEPS iterations over SIZE elements,
differentiated once in a compiled step: the program keeps one step's tensors (the loop is one op
and the custom gradient exists so that autodiff never records it); the check, eager, at the exit
on inputs of the recorded signature, keeps every iteration's on its tape unless it is budgeted.
(Called eagerly under a tape, TensorFlow 2.21 records the forward's ops on the program's own
tape too: the program itself then keeps every iteration.) Runs the program plain and under `cglint trace`, alternating, each in a fresh
wrapper process whose children's peak resident set (`getrusage`) is the measure, and prints both
with the budget (1.5x plain + 300 MB) and the trace's verdict (from its JSON file). Each run is
capped at `--data-limit` GiB of data segment so a regression fails the run, not the machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = """
import tensorflow as tf


@tf.custom_gradient
def heron_sqrt(x):
    def body(i, y):
        return i + 1, 0.5 * (y + x / y)

    _, y = tf.while_loop(lambda i, y: i < {steps}, body, (tf.constant(0), tf.ones_like(x)))

    def grad(dy):
        return dy / (2.0 * y)

    return y, grad


@tf.function
def step(x):  # as a compiled training step runs it: the loop is one op, autodiff never records it
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = heron_sqrt(x)
    return tape.gradient(y, x)


print(float(tf.reduce_sum(step(tf.random.uniform([{size}], 0.5, 2.0, seed=1)))))
"""

MODULE = PROGRAM.split("@tf.function")[0] + """
X = tf.random.uniform([{size}], 0.5, 2.0, seed=1)
Y = heron_sqrt(X)
"""

WRAPPER = """
import json, resource, subprocess, sys
limit = int(sys.argv[2]) << 30
def cap():
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
rc = subprocess.run(sys.argv[3:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=cap).returncode
open(sys.argv[1], "w").write(json.dumps({"rc": rc, "rss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def measure(cmd: list[str], tmp: Path, limit: int) -> dict:
    out = tmp / "m.json"
    subprocess.run([sys.executable, "-c", WRAPPER, str(out), str(limit), *cmd], check=True)
    return json.loads(out.read_text())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--size", type=int, default=200000)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--data-limit", type=int, default=6, help="GiB of data segment per run")
    ap.add_argument("--runtime", action="store_true", help="measure `cglint --runtime=all` on a module instead")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        prog = tmp / "iterate.py"
        prog.write_text((MODULE if args.runtime else PROGRAM).format(steps=args.steps, size=args.size))
        report = tmp / "trace.json"
        if args.runtime:
            checked = [sys.executable, "-m", "cglint", "--no-cache", "--runtime=all", "--runtime-timeout", "900",
                       "--output-format", "json", "--output-file", str(report), str(prog)]
        else:
            checked = [sys.executable, "-m", "cglint", "trace", "--output-format", "json",
                       "--output-file", str(report), "--", sys.executable, str(prog)]
        plain, traced = [], []
        for _ in range(args.repeats):
            plain.append(measure([sys.executable, str(prog)], tmp, args.data_limit))
            traced.append(measure(checked, tmp, args.data_limit))
        p = max(r["rss_kib"] for r in plain) / 1024
        t = max(r["rss_kib"] for r in traced) / 1024
        entries = json.loads(report.read_text()).get("runtime", []) if report.exists() else []
        print(f"{args.steps}-step while_loop of {args.size:,} elements, {args.repeats} run(s) each")
        print(f"plain  peak {p:,.0f} MiB (exit {[r['rc'] for r in plain]})")
        print(f"{'runtime' if args.runtime else 'traced'} peak {t:,.0f} MiB (exit {[r['rc'] for r in traced]}); budget 1.5 x plain + 300 MB = "
              f"{1.5 * p + 300e6 / 2**20:,.0f} MiB: {'within' if t <= 1.5 * p + 300e6 / 2**20 else 'OVER'}")
        for e in entries:
            print(f"  {e.get('function')}: {e.get('verdict')} | {e.get('detail')} | {e.get('checked', '')}")


if __name__ == "__main__":
    main()
