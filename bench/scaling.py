#!/usr/bin/env python3
"""How cglint's cost grows with the size of one module (a script, not a timed test).

    python bench/scaling.py [--sizes 250 1000 6000] [--runs 5]

Generates one module per size from realistic site shapes, repeated with fresh names: a
decorated op with a caller, a Keras layer whose `call` closes over a custom-gradient function
reading its weights, the call form `tf.custom_gradient(_fwd)`, a forward reading a module
variable with a `variables` grad fn, a NumPy-in-forward bug, a forgotten decorator, and plain
model code around them. Each module is linted (`lint_source`, every rule, prefilter on: what
every output format does) `--runs` times, sizes alternating so a busy machine slows every size
alike; the table shows the median time per module and per site, and the per-site ratio to the
smallest size. The target: per-site time at 6,000 within 1.5x of 250, and the 6,000-site
module under 10 s.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import libcst as cst  # noqa: E402

from cglint.engine import lint_source, paused_gc  # noqa: E402

HEADER = '''\
import numpy as np
import tensorflow as tf
from tensorflow import keras

SCALE = tf.Variable(2.0, name="scale")
'''

# Six shapes; `{i}` makes every name unique. Each template holds one custom-gradient site
# (the forgotten decorator holds a CG013 candidate instead) and the code that calls it.
TEMPLATES = [
    '''
@tf.custom_gradient
def log1pexp_{i}(x):
    e = tf.exp(x)

    def grad(dy):
        return dy * (1 - 1 / (1 + e))

    return tf.math.log(1 + e), grad


def loss_{i}(x):
    return tf.reduce_sum(log1pexp_{i}(x))
''',
    '''
class Dense{i}(keras.layers.Layer):
    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], 4), name="w")
        self.b = self.add_weight(shape=(4,), initializer="zeros", name="b")

    def call(self, inputs):
        @tf.custom_gradient
        def forward(x):
            z = tf.matmul(x, self.w) + self.b

            def grad(dy, variables=None):
                dz = dy * (1 - tf.tanh(z) ** 2)
                grads = {{self.w.value.ref(): tf.matmul(x, dz, transpose_a=True),
                          self.b.value.ref(): tf.reduce_sum(dz, axis=0)}}
                return tf.matmul(dz, self.w, transpose_b=True), [grads[v.ref()] for v in variables]

            return tf.tanh(z), grad

        return forward(inputs)
''',
    '''
def _clip_fwd_{i}(x, y):
    def grad(dy):
        return tf.clip_by_norm(dy, 1.0), tf.clip_by_norm(dy, 1.0)

    return x + y, grad


clip_add_{i} = tf.custom_gradient(_clip_fwd_{i})


def step_{i}(a, b):
    return clip_add_{i}(a, b) * 2.0
''',
    '''
@tf.custom_gradient
def scaled_{i}(x):
    def grad(dy, variables=None):
        return dy * SCALE, [tf.reduce_sum(dy * x) for _ in variables]

    return x * SCALE, grad
''',
    '''
@tf.custom_gradient
def sine_{i}(x):
    return tf.sin(x), lambda dy: dy * np.cos(x.numpy())
''',
    '''
def ste_sign_{i}(x):
    def grad(dy):
        return dy * tf.cast(tf.abs(x) <= 1.0, dy.dtype)

    return tf.sign(x), grad


def binarize_{i}(x):
    return ste_sign_{i}(x) * 2.0


def metrics_{i}(y_true, y_pred):
    err = tf.abs(y_true - y_pred)
    return {{"mae": tf.reduce_mean(err), "max": tf.reduce_max(err)}}
''',
]


def module(sites: int) -> str:
    parts = [HEADER]
    for i in range(sites):
        parts.append(TEMPLATES[i % len(TEMPLATES)].format(i=i))
    return "".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[250, 1000, 6000])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    sources = {n: module(n) for n in args.sizes}
    times: dict[int, list[float]] = {n: [] for n in args.sizes}
    parse: dict[int, list[float]] = {n: [] for n in args.sizes}
    found: dict[int, int] = {}
    for run in range(args.runs):
        order = args.sizes if run % 2 == 0 else list(reversed(args.sizes))
        for n in order:
            start = time.perf_counter()
            result = lint_source(sources[n], f"scaling_{n}.py")
            times[n].append(time.perf_counter() - start)
            sites = len(result.model.sites) if result.model is not None else 0
            if sites < n * 5 // 6 or not result.diagnostics:  # a fast run that analysed nothing proves nothing
                print(f"scaling: the {n}-site module produced {sites} sites and {len(result.diagnostics)} findings",
                      file=sys.stderr)
                return 1
            if found.setdefault(n, len(result.diagnostics)) != len(result.diagnostics):
                print(f"scaling: the {n}-site module gave {found[n]} findings in one run and "
                      f"{len(result.diagnostics)} in another", file=sys.stderr)
                return 1
            # Each run starts as a fresh process would: the previous tree (cyclic: the model
            # holds it) collected outside the timing. Without this the full collection the
            # engine runs before a lint once a million objects wait would charge one run's
            # garbage to the next.
            del result
            gc.collect()
            # libcst's own share: `libcst.parse_module` of the module (what any libcst-based tool
            # pays; cglint parses long modules in pieces, cglint.cstparse), the collector paused.
            with paused_gc():
                start = time.perf_counter()
                cst.parse_module(sources[n])
                parse[n].append(time.perf_counter() - start)
    base = statistics.median(times[args.sizes[0]]) / args.sizes[0]
    print(f"| sites | lines | findings | median s | libcst.parse_module s | ms / site | per-site vs {args.sizes[0]} |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in args.sizes:
        full = statistics.median(times[n])
        lines = sources[n].count("\n")
        print(f"| {n} | {lines} | {found[n]} | {full:.2f} | {statistics.median(parse[n]):.2f} "
              f"| {1000 * full / n:.3f} | {full / n / base:.2f}x |")
    print(f"runs: {args.runs} per size, alternating order; python {sys.version.split()[0]}; "
          f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return _commands(sources[max(args.sizes)], args.runs)


def _commands(source: str, runs: int) -> int:
    """The largest module as users lint it: each command in a fresh process (start-up, reading,
    output and exit included), with the peers that parse Python in the same run, alternating."""
    import shutil
    import subprocess
    import tempfile

    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    flake8 = shutil.which("flake8") or str(Path(sys.executable).with_name("flake8"))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.py"
        path.write_text(source)
        commands = {"cglint FILE": [sys.executable, "-m", "cglint", "--isolated", "--no-cache", str(path)],
                    "cglint --output-format json": [sys.executable, "-m", "cglint", "--isolated", "--no-cache",
                                                    "--output-format", "json", str(path)]}
        if Path(flake8).exists():
            commands["flake8 (pyflakes, pycodestyle)"] = [flake8, "--isolated", str(path)]
        if Path(ruff).exists():
            commands["ruff check --no-cache"] = [ruff, "check", "--no-cache", "--isolated", str(path)]
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for run in range(runs):
            for name in (list(commands) if run % 2 == 0 else list(reversed(commands))):
                start = time.perf_counter()
                done = subprocess.run(commands[name], capture_output=True, text=True)
                samples[name].append(time.perf_counter() - start)
                if name.startswith("cglint") and (done.returncode != 1 or len(done.stdout) < 10_000):
                    print(f"scaling: `{name}` exited {done.returncode}: {done.stderr[-300:]}", file=sys.stderr)
                    return 1
    lines = source.count("\n")
    print(f"\nThe {lines}-line module from the command line (fresh process each run; median of {runs}):\n")
    print("| command | median s |")
    print("| --- | ---: |")
    for name, times in samples.items():
        print(f"| {name} | {statistics.median(times):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
