#!/usr/bin/env python3
"""Does cglint's time grow with the tree, file for file? Generated trees of 10,000 and 100,000
files (1 % with custom gradients), cglint cold and warm against ruff, in the same run.

    python bench/scaling_tree.py [--sizes 10000 100000] [--runs 3] [--keep]

Trees are written under /tmp (`/tmp/cglint-scaling-<N>/`, reused when present with `--keep`),
never in the repository. Each package directory holds 100 modules of ordinary Keras/TensorFlow
code (layers, training steps, helpers); one in a hundred modules also defines a
`@tf.custom_gradient` op whose grad fn takes the derivative at the output (a CG005), so the
expected number of findings is known and checked on every run. Rows alternate between
commands (medians of `--runs`); "per file" is the median divided by the number of files, and
the last column compares it with the smallest tree's.
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

PLAIN = '''"""Module {n}: a small Keras model and its training step."""
import tensorflow as tf


class Dense{n}(tf.keras.layers.Layer):
    def __init__(self, units={u}):
        super().__init__()
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="glorot_uniform")
        self.b = self.add_weight(shape=(self.units,), initializer="zeros")

    def call(self, inputs):
        return tf.nn.relu(tf.matmul(inputs, self.w) + self.b)


def train_step_{n}(model, optimizer, x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


def batches_{n}(values, size={u}):
    for start in range(0, len(values), size):
        yield values[start:start + size]
'''

SITE = '''

@tf.custom_gradient
def stable_tan_{n}(x):
    y = tf.math.tan(x)

    def grad(dy):
        return dy / tf.square(tf.math.cos(y))

    return y, grad
'''


def generate(root: Path, count: int) -> int:
    """Write `count` modules under `root`; returns how many hold a site."""
    sites = 0
    for n in range(count):
        package = root / f"pkg{n // 100:05d}"
        if n % 100 == 0:
            package.mkdir(parents=True, exist_ok=True)
            (package / "__init__.py").write_text("")
        text = PLAIN.format(n=n, u=n % 64 + 1)
        if n % 100 == 37:  # 1 %
            text += SITE.format(n=n)
            sites += 1
        (package / f"mod{n:06d}.py").write_text(text)
    return sites


def run(cmd: list[str], env: dict) -> tuple[float, float, bytes]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = proc.communicate()
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd[:5])} exited {proc.returncode}: {err.decode()[-800:]}")
    return elapsed, 0.0, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="reuse trees already generated under /tmp")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CGLINT_CACHE_DIR", None)
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    have_ruff = Path(ruff).exists()
    print(f"Tree scaling: median of {args.runs} alternating runs, wall clock; Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start\n")
    print("| files | with sites | command | median s | per file µs | per file vs smallest tree | findings |")
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    base: dict[str, float] = {}
    for size in args.sizes:
        root = Path(f"/tmp/cglint-scaling-{size}")
        marker = root / ".complete"
        if not (args.keep and marker.exists()):
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True)
            generate(root / "src", size)
            marker.write_text("")
        sites = sum(1 for n in range(size) if n % 100 == 37)
        cache = root / "cache"
        shutil.rmtree(cache, ignore_errors=True)
        cglint = [sys.executable, "-m", "cglint", "--output-format", "json", "--exit-zero", str(root / "src")]
        commands = {
            "cglint cold": cglint + ["--no-cache"],
            "cglint warm": cglint + ["--cache-dir", str(cache)],
        }
        if have_ruff:
            commands["ruff check --select F821"] = [ruff, "check", "--no-cache", "--isolated", "--select", "F821",
                                                    "--exit-zero", "--quiet", str(root / "src")]
        subprocess.run(commands["cglint warm"], env=env, capture_output=True, check=True)  # fill the cache
        samples: dict[str, list[float]] = {name: [] for name in commands}
        findings: dict[str, int | None] = {}
        for _ in range(args.runs):
            for name, cmd in commands.items():
                seconds, _, out = run(cmd, env)
                samples[name].append(seconds)
                if name.startswith("cglint"):
                    found = json.loads(out)["diagnostics"]
                    assert sum(d["code"] == "CG005" for d in found) == sites, (name, len(found))
                    findings[name] = len(found)
        for name, values in samples.items():
            med = statistics.median(values)
            per_file = med / size * 1e6
            base.setdefault(name, per_file)
            print(f"| {size:,} | {sites:,} | {name} | {med:.2f} | {per_file:.0f} | {per_file / base[name]:.2f}x | "
                  f"{findings.get(name, '-')} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
