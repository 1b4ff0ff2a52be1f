"""What `cglint trace` adds to a training run, at 200 and 1,000 steps.

    python bench/trace_overhead.py [--repeats 3] [--steps 200 1000]

The program: a Keras 3 model whose layer builds a custom-gradient closure over its kernel in
`call` (the shape cglint trace is for), trained with a GradientTape loop, eagerly (every step
goes through cglint's hook: the worst case) and under `tf.function` (the step is traced once).
Each configuration runs in a fresh process, plain and under `cglint trace`, alternating, and the
table shows medians of CPU time (user + system, all threads; on a shared machine it is far less
disturbed by other load than wall time, which is shown too): the loop's own (measured inside the
program, first step to last, so it includes the check at the first step) and the whole process
(TensorFlow's import, the check, cglint's report). The check runs at the first call per input
signature only, so the added time should be the same at 200 and at 1,000 steps.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = '''
import sys, time
import keras
import tensorflow as tf


class TanhDense(keras.layers.Layer):
    def __init__(self, units, **kw):
        super().__init__(**kw)
        self.units = units

    def build(self, shape):
        self.kernel = self.add_weight(shape=(shape[-1], self.units), initializer="glorot_uniform", name="kernel")

    def call(self, inputs):
        @tf.custom_gradient
        def dense_tanh(x):
            y = tf.tanh(tf.matmul(x, self.kernel))

            def grad(upstream, variables=None):
                dz = upstream * (1 - y * y)
                return tf.matmul(dz, self.kernel, transpose_b=True), [tf.matmul(x, dz, transpose_a=True)]

            return y, grad

        return dense_tanh(inputs)


steps, mode = int(sys.argv[1]), sys.argv[2]
model = keras.Sequential([keras.Input(shape=(16,)), TanhDense(32), keras.layers.Dense(1)])
opt = keras.optimizers.SGD(0.01)
x = tf.random.stateless_normal([32, 16], seed=[1, 2])
y = tf.reduce_sum(x, axis=1, keepdims=True)


def step():
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(x) - y) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss


if mode == "graph":
    step = tf.function(step)
start, cpu = time.perf_counter(), time.process_time()
for _ in range(steps):
    loss = step()
float(loss)
print(f"LOOP {time.perf_counter() - start:.4f} {time.process_time() - cpu:.4f}")
'''


def run_once(program: Path, steps: int, mode: str, traced: bool) -> tuple[float, float, float, float]:
    """(loop wall, loop CPU, process wall, process CPU) in seconds."""
    cmd = [sys.executable, str(program), str(steps), mode]
    if traced:
        cmd = [sys.executable, "-m", "cglint", "trace", "--"] + cmd
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    loop = [ln for ln in proc.stdout.splitlines() if ln.startswith("LOOP ")]
    if proc.returncode != 0 or not loop:
        raise SystemExit(f"run failed ({' '.join(cmd)}):\n{proc.stdout}\n{proc.stderr}")
    if traced and "1 custom gradient checked: 1 match" not in proc.stderr:
        raise SystemExit(f"the traced run did not check the layer:\n{proc.stderr}")
    _, loop_wall, loop_cpu = loop[0].split()
    return float(loop_wall), float(loop_cpu), wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, nargs="+", default=[200, 1000])
    ap.add_argument("--modes", nargs="+", default=["eager", "graph"], choices=["eager", "graph"])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        program = Path(tmp, "train_loop.py")
        program.write_text(PROGRAM)
        configs = [(mode, steps) for mode in args.modes for steps in args.steps]
        samples: dict[tuple, list[tuple[float, float, float, float]]] = {}
        # Every configuration once per round, plain then traced: load that drifts over the run
        # spreads over all rows instead of favouring some.
        for r in range(args.repeats):
            for mode, steps in configs:
                for traced in (False, True):
                    samples.setdefault((mode, steps, traced), []).append(run_once(program, steps, mode, traced))
            print(f"  round {r + 1}/{args.repeats} done", file=sys.stderr, flush=True)
            table(configs, samples, r + 1)  # after every round, so an interrupted run still has one


def table(configs, samples, rounds: int) -> None:
    rows = []
    for mode, steps in configs:
        med = {t: [statistics.median(run[i] for run in samples[(mode, steps, t)]) for i in range(4)]
               for t in (False, True)}
        rows.append((mode, steps, med[False], med[True]))
    print(f"medians of {rounds} interleaved runs per cell; seconds")
    print()
    print("| loop | steps | loop CPU, plain | loop CPU, traced | added | process CPU, plain | process CPU, traced "
          "| added | loop wall, plain | loop wall, traced |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for mode, steps, p, t in rows:
        print(f"| {mode} | {steps} | {p[1]:.2f} | {t[1]:.2f} | {t[1] - p[1]:+.2f} | {p[3]:.2f} | {t[3]:.2f} "
              f"| {t[3] - p[3]:+.2f} | {p[0]:.2f} | {t[0]:.2f} |")
    print(flush=True)


if __name__ == "__main__":
    main()
