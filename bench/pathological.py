#!/usr/bin/env python3
"""Hostile inputs cost linear time: each pathological generator timed at 1x and 10x its size.

    python bench/pathological.py [--scale 1] [--runs 3]

Generators (each writes its input in a temporary directory, outside the repository):

  json-sites     a module with N custom-gradient sites and a fixable finding each, JSON output
  sarif-sites    the same module, SARIF output
  notebook-mask  a notebook cell with N `%` lines inside a string and N inside brackets
  globs          N files and `extend-exclude` globs with nine `**` (a backtracking regex's worst)
  strcat         N statements of 400 implicitly concatenated string literals
  redefinitions  one custom-gradient function defined N times (a notebook's re-run cell)
  deep           N statements holding a 150-level nested expression

Each run lints the generated input with the CLI's code in this process (`cglint.cli.main`,
imports warm, no cache), the best of `--runs`. Prints a table: the time at 1x and at 10x and
their ratio; linear cost gives about 10, and the target is <= 12 (a quadratic step gives 100).
Not a timed test: the machine may be shared, so compare the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

OP = ("\n@tf.custom_gradient\ndef op{i}(x):\n    y = tf.math.tan(x)\n    def grad(dy):\n"
      "        return dy * tf.math.cos(y)\n    return y, grad\n")
SITE = ('\n@tf.custom_gradient\ndef scale{i}(x, m):\n    def grad(dy):\n        return dy * m, None\n\n'
        '    return tf.identity(x), grad\n\n\nclass Head{i}(keras.layers.Layer):\n    def call(self, f):\n'
        '        return scale{i}(f, -0.3)\n')


def sites(d: Path, n: int) -> list[str]:
    (d / "m.py").write_text("import keras\nimport tensorflow as tf\n" + "".join(SITE.format(i=i) for i in range(n)))
    return ["m.py"]


def notebook_mask(d: Path, n: int) -> list[str]:
    src = ([line + "\n" for line in OP.format(i=0).splitlines()] + ['template = r"""\n']
           + ["% a LaTeX comment line\n"] * n + ['"""\n', "x = (1\n"] + ["% 1, 1\n"] * n + [")\n"])
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3", "language": "python",
                                                                          "display_name": "P"}},
          "cells": [{"cell_type": "code", "id": "a", "metadata": {}, "execution_count": None, "outputs": [],
                     "source": ["import tensorflow as tf\n", *src]}]}
    (d / "m.ipynb").write_text(json.dumps(nb))
    return ["m.ipynb"]


def globs(d: Path, n: int) -> list[str]:
    (d / "pkg").mkdir()
    for i in range(n):
        (d / "pkg" / f"{'a' * 40}{i}.py").write_text("x = 1\n")
    (d / "pyproject.toml").write_text('[tool.cglint]\nextend-exclude = ["' + "**a" * 9 + '**b", "src/**/gen/**/x*"]\n')
    return ["pkg"]


def strcat(d: Path, n: int) -> list[str]:
    body = "".join(f"s{i} = (" + ' "a"' * 400 + ")\n" for i in range(n))
    (d / "m.py").write_text("import tensorflow as tf\n" + OP.format(i=0) + body)
    return ["--output-format", "json", "m.py"]


def redefinitions(d: Path, n: int) -> list[str]:
    cell = OP.format(i="") + "\nz = op(tf.constant(1.0))\n" + "".join(f"v{i} = {i}\n" for i in range(60))
    (d / "m.py").write_text("import tensorflow as tf\n" + cell * n)
    return ["m.py"]


def deep(d: Path, n: int) -> list[str]:
    body = "".join(f"d{i} = " + "[" * 150 + "1" + "]" * 150 + "\n" for i in range(n))
    (d / "m.py").write_text("import tensorflow as tf\n" + OP.format(i=0) + body)
    return ["--output-format", "json", "m.py"]


GENERATORS = {  # name: (generator, the 1x size)
    "json-sites": (lambda d, n: ["--output-format", "json", *sites(d, n)], 20),
    "sarif-sites": (lambda d, n: ["--output-format", "sarif", *sites(d, n)], 20),
    "notebook-mask": (notebook_mask, 300),
    "globs": (globs, 200),
    "strcat": (strcat, 2),
    "redefinitions": (redefinitions, 20),
    "deep": (deep, 5),
}


def timed(make, n: int, runs: int) -> float:
    from cglint import cli

    best = float("inf")
    with tempfile.TemporaryDirectory(prefix="cglint-bench-") as tmp:
        d = Path(tmp)
        args = make(d, n)
        here = os.getcwd()
        os.chdir(d)
        try:
            for _ in range(runs):
                start = time.perf_counter()
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    cli.main(["--no-cache", *args])
                best = min(best, time.perf_counter() - start)
        finally:
            os.chdir(here)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every 1x size by this")
    parser.add_argument("--runs", type=int, default=3, help="best of this many runs per size")
    parser.add_argument("--only", nargs="*", choices=sorted(GENERATORS), help="run only these generators")
    args = parser.parse_args()
    print(f"{'generator':<15} {'1x size':>8} {'1x s':>8} {'10x s':>8} {'10x/1x':>7}")
    worst = 0.0
    for name, (make, size) in GENERATORS.items():
        if args.only and name not in args.only:
            continue
        n = max(1, round(size * args.scale))
        timed(make, 1, 1)  # imports and first-call costs, outside the table
        one, ten = timed(make, n, args.runs), timed(make, 10 * n, args.runs)
        ratio = ten / one
        worst = max(worst, ratio)
        print(f"{name:<15} {n:>8} {one:>8.2f} {ten:>8.2f} {ratio:>7.1f}", flush=True)
    print(f"worst ratio {worst:.1f} (target <= 12)")
    return 0 if worst <= 12 else 1


if __name__ == "__main__":
    sys.exit(main())
