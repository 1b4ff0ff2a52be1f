#!/usr/bin/env python3
"""A synthetic project for the prefilter: `n` modules in a package, a share of them defining
custom gradients, a share calling them by keyword through every import form, the rest plain
TensorFlow code that imports the site modules and makes keyword calls to other functions.

    python bench/synthetic_project.py [--files 2000] [--runs 5]

prints cold CPU per file (`cglint --no-cache`, medians of alternating runs) for this project and
for the same project without any site, the number of files the prefilter lets through in each,
and checks that the findings equal a run without the prefilter (`--no-prefilter` in-process)."""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SITE = '''import tensorflow as tf


@tf.custom_gradient
def op_{k}(x):
    y = tf.math.tan(x)

    def grad(dy):
        return dy / tf.square(tf.math.cos({arg}))

    return y, grad


def helper_{k}(x, scale=1.0):
    return x * scale
'''
NO_SITE = '''import tensorflow as tf


def op_{k}(x):
    return tf.math.tan(x)


def helper_{k}(x, scale=1.0):
    return x * scale
'''
# Each way real code names another module's function (the [generalise] forms).
CALLERS = [
    "from pkg.m{k} import op_{k}\n\n\ndef run(t):\n    return op_{k}(x=t)\n",
    "from pkg import m{k}\n\n\ndef run(t):\n    return m{k}.op_{k}(x=t)\n",
    "import pkg.m{k} as mod\n\n\ndef run(t):\n    return mod.op_{k}(x=t)\n",
    "from .m{k} import op_{k} as f\n\n\ndef run(t):\n    return f(x=t)\n",
    "from . import m{k}\n\n\ndef run(t):\n    return m{k}.op_{k}(x=t)\n",
    "from pkg import op_{k}\n\n\ndef run(t):\n    return op_{k}(x=t)\n",
    "from pkg.registry import OPS\n\n\ndef run(t):\n    return OPS[\"{k}\"](x=t)\n",
    "from pkg.factories import make_{k}\n\n\ndef run(t):\n    return make_{k}()(x=t)\n",
]
PLAIN = ("import tensorflow as tf\n\nfrom pkg.m{k} import helper_{k}\n\n\n"
         "def run(t):\n    return helper_{k}(t, scale=2.0) + tf.reduce_sum(t, axis=0)\n")


def make(root: Path, files: int = 2000, site_share: float = 0.05, caller_share: float = 0.2, sites: bool = True,
         seed: int = 0) -> Path:
    """Writes the project under `root/pkg` and returns that directory."""
    rng = random.Random(seed)
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    n_sites = max(1, int(files * site_share))
    n_callers = int(files * caller_share)
    init, registry, factories = [], ["OPS = {}\n"], []
    for k in range(n_sites):
        arg = "y" if k % 2 else "x"  # every other site takes the derivative at its output (CG005)
        (pkg / f"m{k}.py").write_text((SITE if sites else NO_SITE).format(k=k, arg=arg))
        init.append(f"from .m{k} import op_{k}\n")
        registry.insert(0, f"from pkg.m{k} import op_{k}\n")
        registry.append(f"OPS[\"{k}\"] = op_{k}\n")
        factories.append(f"from pkg.m{k} import op_{k}\n\n\ndef make_{k}():\n    return op_{k}\n\n\n")
    (pkg / "__init__.py").write_text("".join(init))
    (pkg / "registry.py").write_text("".join(registry))
    (pkg / "factories.py").write_text("".join(factories))
    for i in range(files - n_sites - 3):
        k = rng.randrange(n_sites)
        text = CALLERS[i % len(CALLERS)].format(k=k) if i < n_callers else PLAIN.format(k=k)
        (pkg / f"c{i}.py").write_text(text)
    return pkg


def _cpu(cmd: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    before = os.times()
    run = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system), run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    from cglint import files as cgfiles, quickscan

    with tempfile.TemporaryDirectory() as tmp:
        trees = {name: make(Path(tmp) / name, args.files, sites=name == "sites") for name in ("sites", "no sites")}
        through = {}
        for name, pkg in trees.items():
            texts = {p: p.read_text() for p in sorted(pkg.glob("*.py"))}
            through[name] = sum(1 for p, t in texts.items() if cgfiles.may_hold_site(t)
                                or quickscan.calls_project_site(t, str(p))[0])
        times: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(args.runs):
            for name, pkg in trees.items():
                cpu, run = _cpu([sys.executable, "-m", "cglint", "--no-cache", "-q", "pkg"], pkg.parent)
                if run.returncode not in (0, 1):
                    print(run.stderr, file=sys.stderr)
                    return 2
                times[name].append(cpu)
        print(f"| project | files | prefilter lets through | cold CPU (median of {args.runs}) | per file |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name in trees:
            med = statistics.median(times[name])
            print(f"| {name} | {args.files} | {through[name]} | {med:.2f} s | {1000 * med / args.files:.2f} ms |")
        ratio = statistics.median(times["sites"]) / statistics.median(times["no sites"])
        print(f"\nper-file cost with sites / without: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
