#!/usr/bin/env python3
"""Static linting speed on real trees: cglint cold and with a warm cache, against ruff and flake8,
in the same run, medians of alternating runs, with each run's peak memory.

    python bench/static_speed.py [TREE ...] [--runs 7] [--flake8-runs 3]

Default trees: the installed TensorFlow's `tensorflow/python` and Keras (the runtime extra).
Peers: `ruff` (`pip install ruff` into the same environment) with `--no-cache`, once with
`--select F821` (one rule, the issue's reference) and once with its default rules, and flake8
with `--select F821` (pyflakes, the closest flake8 equivalent). Rows:

  cglint cold        `cglint --no-cache` (every candidate file parsed; `--jobs` automatic)
  cglint cold -j 1   the same in one process
  cglint warm        `cglint` with a cache filled by a previous run (nothing changed)
  ..., concise       the same with the default-style text output (the same parse as JSON)

cglint's modules are byte-compiled first, as `pip install` does.

Runs of all commands alternate (A B C A B C ...) so that load from other jobs on a shared
machine hits them alike; each run's exit status and output are checked (a fast command that
failed would look good), and the three cglint modes must print the same JSON. Peak memory is
the child's maximum resident set (`wait4`).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
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


def timed_run(cmd: list[str], env: dict, ok: tuple[int, ...]) -> tuple[float, float, bytes, float]:
    # Popen + wait4 ourselves, so the rusage is this child's own.
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    chunks = []
    with proc.stdout:  # type: ignore[union-attr]
        for block in iter(lambda: proc.stdout.read(65536), b""):  # type: ignore[union-attr]
            chunks.append(block)
    err = proc.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in ok:
        raise RuntimeError(f"{' '.join(cmd[:5])} exited {proc.returncode}: {err.decode()[-800:]}")
    return elapsed, usage.ru_maxrss / 1024, b"".join(chunks), usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="*", type=Path)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--flake8-runs", type=int, default=3, help="flake8 is slow: fewer runs")
    ap.add_argument("--cold-runs", type=int, default=None, help="runs of the cold cglint rows (default: --runs)")
    args = ap.parse_args()
    trees = args.trees or default_trees()
    if not trees:
        print("no tree to measure: pass one, or install the runtime extra", file=sys.stderr)
        return 2
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CGLINT_CACHE_DIR", None)
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    version = subprocess.run([ruff, "--version"], capture_output=True, text=True).stdout.strip() if Path(ruff).exists() else None
    cache = Path(tempfile.mkdtemp(prefix="cglint-bench-cache-"))
    # cglint's bytecode, as `pip install` compiles it (an editable checkout run with
    # PYTHONDONTWRITEBYTECODE would otherwise compile its modules on every run).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "cglint")], check=True,
                   env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})
    cglint = [sys.executable, "-m", "cglint", "--output-format", "json", "--exit-zero"]
    concise = [sys.executable, "-m", "cglint", "--output-format", "concise", "--exit-zero"]
    tools: dict[str, tuple[list[str], tuple[int, ...]]] = {
        "cglint cold": (cglint + ["--no-cache"], (0,)),
        "cglint cold -j 1": (cglint + ["--no-cache", "--jobs", "1"], (0,)),
        "cglint warm": (cglint + ["--cache-dir", str(cache)], (0,)),
        "cglint cold, concise": (concise + ["--no-cache"], (0,)),
        "cglint warm, concise": (concise + ["--cache-dir", str(cache)], (0,)),
    }
    if version:
        tools["ruff F821"] = ([ruff, "check", "--no-cache", "--isolated", "--select", "F821", "--exit-zero", "--quiet"], (0,))
        tools["ruff default"] = ([ruff, "check", "--no-cache", "--isolated", "--exit-zero", "--quiet"], (0,))
    tools["flake8 F821"] = ([sys.executable, "-m", "flake8", "--isolated", "--select", "F821", "--exit-zero"], (0,))

    print(f"Static speed: median of {args.runs} alternating runs (flake8: {args.flake8_runs}, cglint cold: "
          f"{args.runs if args.cold_runs is None else args.cold_runs}), CPU time and wall clock; "
          f"Python {sys.version.split()[0]}, {version or 'ruff not installed'}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} at the start\n")
    try:
        for tree in trees:
            files = list(tree.rglob("*.py"))
            mentioning = sum(1 for f in files if b"custom_gradient" in f.read_bytes())
            shutil.rmtree(cache, ignore_errors=True)
            for fill in ("cglint warm", "cglint warm, concise"):  # fill the cache (JSON entries hold fix edits)
                subprocess.run(tools[fill][0] + [str(tree)], env=env, capture_output=True, check=True)
            samples: dict[str, list[tuple[float, float]]] = {name: [] for name in tools}
            cpu: dict[str, list[float]] = {name: [] for name in tools}
            outputs: dict[str, set[bytes]] = {name: set() for name in tools}
            for i in range(args.runs):
                for name, (cmd, ok) in tools.items():
                    if name.startswith("flake8") and i >= args.flake8_runs:
                        continue
                    if "cold" in name and args.cold_runs is not None and i >= args.cold_runs:
                        continue
                    seconds, mib, out, used = timed_run(cmd + [str(tree)], env, ok)
                    samples[name].append((seconds, mib))
                    cpu[name].append(used)
                    outputs[name].add(out)
            same = (len(outputs["cglint cold"] | outputs["cglint cold -j 1"] | outputs["cglint warm"]) == 1
                    and len(outputs["cglint cold, concise"] | outputs["cglint warm, concise"]) == 1)
            ruff_median = statistics.median(s for s, _ in samples["ruff F821"]) if "ruff F821" in samples else None
            ruff_cpu = statistics.median(cpu["ruff F821"]) if "ruff F821" in cpu else None
            parsed, with_sites = _selectivity(files)
            print(f"**{tree}**: {len(files)} files, {mentioning} mention custom_gradient, {parsed} parsed in full "
                  f"(through both prefilters), {with_sites} of them hold a site or call one by keyword; cglint's JSON identical "
                  f"cold, cold -j 1 and warm (concise: cold and warm): {'yes' if same else 'NO'}\n")
            print("| command | median CPU s | / ruff F821 (CPU) | median wall s | min s | max s | peak MiB (max) | / ruff F821 (wall) |")
            print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            for name, values in samples.items():
                times = [s for s, _ in values]
                med = statistics.median(times)
                ratio = f"{med / ruff_median:.2f}x" if ruff_median else "n/a"
                used = statistics.median(cpu[name])
                cpu_ratio = f"{used / ruff_cpu:.2f}x" if ruff_cpu else "n/a"
                print(f"| {name} | {used:.2f} | {cpu_ratio} | {med:.3f} | {min(times):.3f} | {max(times):.3f} | "
                      f"{max(m for _, m in values):.0f} | {ratio} |")
            print()
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return 0


def _selectivity(paths: list[Path]) -> tuple[int, int]:
    """Files the two prefilters let through to libcst (the text test and the project index,
    then Python's parser), and how many of those hold a custom-gradient site or a keyword call
    the model resolves to one (measured in this process, not timed)."""
    sys.path.insert(0, str(ROOT))
    from cglint import engine, files as cgfiles, quickscan, reach
    from cglint import source as pysource

    parsed = with_sites = 0
    with quickscan.listings():
        for path in paths:
            text = path.read_text(encoding="utf-8", errors="replace")
            if not cgfiles.may_hold_site(text) and not quickscan.calls_project_site(text, str(path))[0]:
                continue
            tree, _ = pysource.parse(text)
            scan = quickscan.scan(pysource.analysis_text(text, tree), reach.tensorflow_aliases(str(path)), tree) if tree else None
            if scan is not None and not scan.relevant and not quickscan.calls_project_site(text, str(path))[0]:
                continue
            parsed += 1
            result = engine.lint_source(text, str(path), prefilter=False)
            model = result.model
            if model is not None and (model.sites or any(model.site_called_by(c, s) for c, s in model.all_calls
                                                         if any(a.keyword for a in c.args))):
                with_sites += 1
    return parsed, with_sites


if __name__ == "__main__":
    raise SystemExit(main())
