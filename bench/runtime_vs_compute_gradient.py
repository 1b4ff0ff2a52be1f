"""Time of cglint's check_gradient vs tf.test.compute_gradient on tan(x @ W + b).

    TF_CPP_MIN_LOG_LEVEL=3 python bench/runtime_vs_compute_gradient.py [--max-exp 6] [--repeats 3]

x has n elements (shape (n/10, 10)), W is (10, 10), b is (10,). check_gradient compares the
custom VJP with autodiff for x, W and b (a constant number of passes); compute_gradient builds
the full Jacobian for x only, by one backward per output element and two forwards per input
element. Each compute_gradient size runs in a child process stopped at the budget (--budget,
60 s per run); sizes past the first one over budget (or predicted at > 2x the budget from the
growth so far) are not attempted. Prints a markdown table.
"""

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tensorflow as tf  # noqa: E402

from cglint.runtime import check_gradient  # noqa: E402

W = tf.Variable(tf.random.stateless_normal([10, 10], seed=[1, 2]) * 0.05, name="w")
B = tf.Variable(tf.zeros([10]), name="b")


@tf.custom_gradient
def dense_tan(x):
    z = x @ W + B
    y = tf.tan(z)

    def grad(upstream, variables=None):
        g = upstream / tf.square(tf.cos(z))
        by_var = {W.ref(): tf.transpose(x) @ g, B.ref(): tf.reduce_sum(g, 0)}
        return g @ tf.transpose(W), [by_var[v.ref()] for v in variables]

    return y, grad


def timed(f, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def fmt(t):
    return f"{t * 1e3:.0f} ms" if t < 1 else f"{t:.1f} s"


def make_x(n, e):
    return tf.random.stateless_normal([max(n // 10, 1), 10], seed=[3, e]) * 0.1


def compute_gradient_child(e, repeats):
    """Runs in a child process so a size that blows the budget can be stopped."""
    x = make_x(10 ** e, e)
    t, _ = timed(lambda: tf.test.compute_gradient(lambda v: dense_tan(v), [x]), repeats)
    print(t)


def time_compute_gradient(e, repeats, budget):
    """Median seconds, or a reason string when it ran over the budget or out of memory."""
    try:
        out = subprocess.run([sys.executable, __file__, "--cg-child", str(e), str(repeats)],
                             capture_output=True, text=True, timeout=budget * repeats + 30)
    except subprocess.TimeoutExpired:
        return f"skipped (took > {budget:g} s)"
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        return "skipped (out of memory)" if "Memory" in last else f"failed: {last[:60]}"
    return float(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-exp", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget", type=float, default=60.0, help="seconds per compute_gradient run")
    ap.add_argument("--cg-child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cg_child:
        return compute_gradient_child(*args.cg_child)

    rows, last, growth, over = [], None, 10.0, False
    for e in range(1, args.max_exp + 1):
        n = 10 ** e
        x = make_x(n, e)
        check_gradient(dense_tan, x)  # first call at a new shape pays for kernel set-up
        t_cg, report = timed(lambda: check_gradient(dense_tan, x), args.repeats)
        # Extrapolate from the growth seen between the last two sizes, but at least linear
        # (compute_gradient does one backward pass per output element).
        predicted = None if last is None else last * max(growth, 10.0)
        ratio = None
        if over:
            cell = f"skipped (would take > {args.budget:g} s)"
        else:
            # Sizes expected to be slow get one run, bounded by the budget.
            reps = args.repeats if (predicted or 0) * args.repeats < args.budget else 1
            t_tf = time_compute_gradient(e, reps, args.budget)
            if isinstance(t_tf, str):
                cell, over = t_tf, True
            else:
                growth = t_tf / last if last else 10.0
                last = t_tf
                over = t_tf * max(growth, 10.0) > 2 * args.budget
                cell, ratio = fmt(t_tf) + ("" if reps > 1 else " (1 run)"), t_tf / t_cg
        rows.append((n, fmt(t_cg), report.verdict, cell,
                     "—" if ratio is None else f"{ratio:,.0f}x"))
        print(f"n={n}: cglint {fmt(t_cg)} ({report.verdict}), compute_gradient {cell}",
              file=sys.stderr, flush=True)

    print(f"check_gradient vs tf.test.compute_gradient on tan(x @ W + b); TensorFlow "
          f"{tf.__version__}, Python {platform.python_version()}, {os.cpu_count()} CPUs "
          f"(shared), median of {args.repeats} runs\n")
    print("| n (elements of x) | cglint check_gradient (x, W, b) | verdict | "
          "tf.test.compute_gradient (x only) | compute_gradient / cglint |")
    print("| ---: | ---: | --- | ---: | ---: |")
    for n, a, v, b, r in rows:
        print(f"| 10^{len(str(n)) - 1} | {a} | {v} | {b} | {r} |")


if __name__ == "__main__":
    main()
