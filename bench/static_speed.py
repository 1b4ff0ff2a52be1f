#!/usr/bin/env python3
"""Static linting speed: cglint against ruff (and a plain `ast.parse` of the same files) on a
real tree, median of several runs, side by side in the same run.

    python bench/static_speed.py [TREE ...] [--runs 5]

Default tree: the installed TensorFlow's `tensorflow/python` (needs the runtime extra) and
Keras. ruff runs with `--no-cache` so both tools read every file; ruff comes from `pip install
ruff` (the `bench` extra). Prints a markdown table; the machine may be shared, so compare the
ratios, not the absolute times.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def default_trees() -> list[Path]:
    trees = []
    for pkg, sub in (("tensorflow", "python"), ("keras", "")):
        spec = importlib.util.find_spec(pkg)
        if spec and spec.submodule_search_locations:
            base = Path(list(spec.submodule_search_locations)[0])
            trees.append(base / sub if sub else base)
    return trees


def timed(cmd: list[str], env: dict | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="*", type=Path)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    trees = args.trees or default_trees()
    if not trees:
        print("no tree to measure: pass one, or install the runtime extra", file=sys.stderr)
        return 2
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    tools = {
        "cglint": [sys.executable, "-m", "cglint", "--output-format", "json"],
        "ruff check (default rules)": [ruff, "check", "--no-cache", "--isolated", "--exit-zero", "--quiet"],
        "python: ast.parse every file": [sys.executable, "-c",
            "import ast,sys,pathlib\nfor t in sys.argv[1:]:\n for p in pathlib.Path(t).rglob('*.py'):\n"
            "  try: ast.parse(p.read_bytes())\n  except Exception: pass"],
    }
    print(f"Static speed, median of {args.runs} runs (wall clock), Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs\n")
    print("| tree | files | files mentioning custom_gradient | " + " | ".join(tools) + " | cglint / ruff |")
    print("| --- | ---: | ---: | " + " | ".join("---:" for _ in tools) + " | ---: |")
    for tree in trees:
        files = list(tree.rglob("*.py"))
        mentioning = sum(1 for f in files if b"custom_gradient" in f.read_bytes())
        medians = {}
        for name, cmd in tools.items():
            if not Path(cmd[0]).exists() and shutil.which(cmd[0]) is None:
                medians[name] = None
                continue
            samples = [timed(cmd + [str(tree)], env) for _ in range(args.runs)]
            medians[name] = statistics.median(samples)
        cells = [f"{medians[n]:.2f} s" if medians[n] is not None else "n/a" for n in tools]
        ratio = (medians["cglint"] / medians["ruff check (default rules)"]
                 if medians.get("ruff check (default rules)") else float("nan"))
        print(f"| {tree} | {len(files)} | {mentioning} | " + " | ".join(cells) + f" | {ratio:.1f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
