"""`cglint trace -- pytest` on real projects' own test files: results unchanged, cost, verdicts.

    python bench/trace_suites.py --setup [--tfp-checkout DIR] [--checkout OWNER/NAME=GITDIR ...]
        # once: a venv in ~/.cache/cglint-bench/ with the projects from PyPI and this cglint
        # (editable), tf-models' imports, zfit's own venv; TFP's tests from a git checkout; with
        # --checkout, the ecosystem projects' checkouts bench/mutation.py --trace uses (CHECKOUTS)
    python bench/trace_suites.py [--repeats 1] [SUITE ...]

Each suite is a few test files that exercise custom gradients: from the installed wheels,
larq's straight-through quantizers, Sonnet's gradient-scaling and leaky-clip ops, Keras 3's
`ops.custom_gradient` and quantizers; TFP's wheel has no tests, so its math tests come from its
repository and run against the 0.25.0 wheel (newer tests, so some fail alike in both runs).
cglint trace leaves TensorFlow's and Keras's own custom gradients alone (library code), so
Keras's suite runs traced but has no verdicts. Per suite, alternating, in fresh processes: the plain
`python -m pytest FILES` and the same under `cglint trace --output-format json --output-file F`.
Pass/fail counts come from pytest's JUnit XML file, verdicts from cglint's JSON file (never
from a stream TensorFlow also writes on), time is the wall time of the whole command and peak
memory the largest resident set of any process it started (`resource.getrusage` of the
children of a fresh wrapper process). Writes bench/RESULTS-trace-suites.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("CGLINT_BENCH_CACHE", Path.home() / ".cache" / "cglint-bench"))
VENV = CACHE / "venv"
PY = VENV / "bin" / "python"
PACKAGES = ["tensorflow==2.21.*", "tf-keras==2.21.*", "larq==0.14.0", "dm-sonnet==2.0.2", "keras==3.15.1",
            "tensorflow-probability==0.25.0", "scipy", "pytest"]

# name -> (test files relative to site-packages, pytest -k expression or None, environment)
SUITES = {
    # larq 0.14 subclasses Keras 2 layers: it runs on tf-keras
    "larq": (["larq/quantizers_test.py"], None, {"TF_USE_LEGACY_KERAS": "1"}),
    "sonnet": (["sonnet/src/scale_gradient_test.py", "sonnet/src/leaky_clip_by_value_test.py"], None, {}),
    "keras": (["keras/src/ops/core_test.py", "keras/src/quantizers/quantizers_test.py"],
              "custom_gradient or fake_quant or quantize", {}),
    # Keras's quantized layers' own tests, with Keras's custom gradients judged (`--include keras`)
    "keras-quantized": (["keras/src/layers/core/dense_test.py", "keras/src/layers/core/einsum_dense_test.py",
                         "keras/src/layers/core/embedding_test.py"], "int8 or int4 or float8",
                        {"KERAS_BACKEND": "tensorflow"}),
    # TFP's wheel has no tests: these two come from its repository (see TFP_TESTS), run from the cache
    "tfp": (["tfp-tests/custom_gradient_test.py", "tfp-tests/generic_test.py"], "not Collective", {}),
}
# `cglint trace` options per suite: library code is left alone unless included.
TRACE_ARGS = {"keras-quantized": ["--include", "keras"]}
# The mutation benchmark's `--trace` (bench/mutation.py) runs the ecosystem projects' own tests.
# Their wheels lack some: source checkouts at the released tag supply them (tests, and
# elasticdeform's C extension built in place, as `pip install -e .` leaves a checkout), from git
# repositories given to --setup as --checkout OWNER/NAME=GITDIR.
# Ecosystem project -> (repository, tag, the paths of it needed: none for all).
CHECKOUTS_DIR = CACHE / "checkouts"
CHECKOUTS = {
    "tensorflow-probability-0.25.0": ("tensorflow/probability", "v0.25.0", ["tensorflow_probability"]),
    "elasticdeform-0.5.1": ("gvtulder/elasticdeform", "v0.5.1", []),
    "zfit-0.28.0": ("zfit/zfit", "0.28.0", ["tests", "docs/images/README.rst"]),  # its conftest writes to docs/images
}
# What tf-models' vision layers and their tests import (its own pins want TensorFlow 2.20), and
# TFP's tests (mpmath).
TEST_PACKAGES = ["mpmath", "gin-config", "tensorflow-datasets", "tensorflow-hub", "tensorflow-model-optimization", "tf_slim",
                      "pyyaml", "immutabledict", "opencv-python-headless", "pycocotools", "pandas", "psutil",
                      "py-cpuinfo", "Pillow", "matplotlib", "sentencepiece"]
# zfit 0.28 upgrades NumPy past what this venv's projects take: a venv of its own, used for it.
PROJECT_VENVS = {"zfit-0.28.0": (CACHE / "venv-zfit", [
    "tensorflow==2.21.*", "tensorflow-probability==0.25.0", "tf-keras==2.21.*", "zfit==0.28.0", "pytest",
    # what its tests' conftest imports (pytest-cases, also in its test extra, breaks pytest 9)
    "matplotlib", "mplhep", "pyyaml", "pytest-rerunfailures", "pytest-helpers-namespace", "pytest-timeout"])}

# Test files not in the wheels: (repository, path in it, where they go under CACHE or site-packages)
TFP_TESTS = [
    ("tensorflow_probability/python/math/custom_gradient_test.py", "tfp-tests/custom_gradient_test.py"),
    ("tensorflow_probability/python/math/generic_test.py", "tfp-tests/generic_test.py"),
    ("tensorflow_probability/python/internal/distribute_test_lib.py",
     "site:tensorflow_probability/python/internal/distribute_test_lib.py"),
]

# Hand check of every verdict (function -> why it is right), written into the results.
NOTES: dict[str, str] = {
    "larq ste_sign.<locals>._call (intentional)": (
        "right: the forward is `sign(x)` (piecewise constant: autodiff and finite differences give 0 "
        "away from 0), the grad fn passes the upstream through where |x| <= clip_value "
        "(`_clipped_gradient`): the straight-through estimator of binarised networks, deliberate."),
    "larq approx_sign (intentional)": (
        "right: forward `sign(x)`, grad `(1 - |x|) * 2 * dy` on |x| <= 1 (the ApproxSign estimator of "
        "Bi-Real Net): a deliberate surrogate for a zero derivative. (A check where every input has "
        "|x| > 1 is a `match`: both gradients are zero there; the worst check decides the entry.)"),
    "larq swish_sign.<locals>._call (intentional)": (
        "right: forward `sign(x)`, grad the derivative of the SignSwish surrogate "
        "`2 * sigmoid(beta x) (1 + beta x (1 - sigmoid(beta x))) - 1`: deliberate."),
    "larq ste_tern.<locals>._call (intentional)": (
        "right: forward `sign(sign(x + t) + sign(x - t))` (ternary, piecewise constant), grad the "
        "clipped pass-through: a straight-through estimator."),
    "larq ste_heaviside.<locals>._call (intentional)": (
        "right: forward the Heaviside step (piecewise constant), grad the clipped pass-through."),
    "larq DoReFa.call.<locals>._k_bit_with_identity_grad (intentional)": (
        "right, and no longer a false mismatch: forward `round(x * n) / n` (k-bit quantisation), grad "
        "`lambda dy: dy`, the straight-through estimator. `test_dorefa_ste_grad[weights]` puts inputs "
        "exactly on a rounding edge (every zero weight maps to 0.5, and round(1.5) jumps), where finite "
        "differences are huge; the staircase test now also accepts a jump of the same size at a third of "
        "the step, so it is recognised. Its autograph-converted copy (reported before as a second entry, "
        "`call.<locals>._k_bit_with_identity_grad` at the same line) is merged into this one."),
    "sonnet leaky_clip_by_value (error)": (
        "a true latent bug. `test_leaky_clip_by_value_forward` passes Python lists as the bounds "
        "(`clip_min_array = [0.5, 2.5, 2.5]`); TensorFlow's custom_gradient flattens nested arguments "
        "into inputs (`nest.flatten(args)`), so the call has 1 + 3 + 3 = 7 inputs and the grad fn's "
        "3 gradients raise \"expected to return 7 gradients\" as soon as anything differentiates "
        "that call. The test checks only the forward, so the suite passes; the docstring asks for "
        "Tensors, which would be one input each."),
    "sonnet scale_gradient (intentional)": (
        "right: the test scales by -0.5, a gradient reversal and scaling of an identity forward, "
        "recognised by its signature."),
    "tfp <lambda> at generic.py:771 (match)": (
        "right: `log_cosh`'s `vjp_fwd` (`log(cosh(x))`, stable form) with `vjp_bwd` `dy * tanh(x)`, the "
        "true derivative; checked at `testLogCoshAtZero` (float32 scalar 0, where both are 0) and "
        "`testLogCoshGrad` (float64[100]), both `match`. It is the only function "
        "these two test files call through TFP's own custom-gradient decorator "
        "(`tensorflow_probability/python/internal/custom_gradient.py`, whose generic `f_wrapped(*args)` "
        "forward runs the decorated function's `vjp_fwd`): the entry now names that function and its "
        "line, not the wrapper's closure, and each function the wrapper makes gets an entry of its own "
        "(tests/test_trace_report.py). (`tfp.math.custom_gradient`, which custom_gradient_test.py "
        "tests, is the stop-gradient construction, not `tf.custom_gradient`: nothing to check there.)"),
    "keras (no verdicts)": (
        "by design: trace leaves TensorFlow's and Keras's own custom gradients alone (library "
        "code), and Keras's tests define theirs inside `keras/src`; the traced run only measures "
        "the cost of the hook."),
}

# Runs COMMAND and writes its wall time and the peak RSS of its process tree's largest process.
WRAPPER = """
import json, resource, subprocess, sys, time
t0 = time.monotonic()
rc = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
wall = time.monotonic() - t0
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
open(sys.argv[1], "w").write(json.dumps({"rc": rc, "wall": wall, "rss_kib": rss}))
"""


def project_python(project: str, default: str) -> str:
    """The interpreter that runs an ecosystem project's tests: its own venv's if it has one."""
    venv = PROJECT_VENVS.get(project)
    return str(venv[0] / "bin" / "python") if venv and (venv[0] / "bin" / "python").exists() else default


def _venv(venv: Path, packages: list[str]) -> None:
    """A venv with `packages` and this cglint (editable)."""
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", *packages], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", "-e", str(ROOT)], check=True)


def checkout(project: str, gitdir: str) -> Path:
    """The project's repository at its released tag under CHECKOUTS_DIR, C extensions built in
    place. Files whose contents the repository lacks (a partial clone) are left out."""
    import shutil

    dest = CHECKOUTS_DIR / project
    shutil.rmtree(dest, ignore_errors=True)
    _, tag, paths = CHECKOUTS[project]
    names = subprocess.run(["git", "-C", gitdir, "ls-tree", "-r", "-z", "--name-only", tag, "--", *paths],
                           capture_output=True, check=True).stdout.decode().split("\0")
    names = [n for n in names if n]
    out = subprocess.run(["git", "-C", gitdir, "cat-file", "--batch"], capture_output=True, check=True,
                         input="".join(f"{tag}:{n}\n" for n in names).encode()).stdout
    at = 0
    for name in names:  # each: "<sha> blob <size>\n<contents>\n", or "<what> missing\n"
        end = out.index(b"\n", at)
        header = out[at:end].split()
        at = end + 1
        if len(header) == 3 and header[1] == b"blob":
            size = int(header[2])
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes(out[at:at + size])
            at += size + 1
    if (dest / "setup.py").exists() and any(dest.rglob("*.c")):
        subprocess.run([str(PY), "setup.py", "build_ext", "--inplace"], cwd=dest, check=True,
                       stdout=subprocess.DEVNULL)
    return dest


def setup(tfp_checkout: str | None, checkouts: list[str] = ()) -> None:
    CACHE.mkdir(parents=True, exist_ok=True)
    _venv(VENV, PACKAGES)
    # the projects' tests' imports, with the versions PACKAGES installed kept (tf-models pins older ones)
    frozen = subprocess.run([str(PY), "-m", "pip", "freeze"], capture_output=True, text=True, check=True).stdout
    pins = CACHE / "pins.txt"
    pins.write_text("".join(f"{line}\n" for line in frozen.splitlines() if line.split("==")[0].lower().replace("_", "-")
                            in ("numpy", "tensorflow", "keras", "protobuf", "tf-keras", "ml-dtypes", "h5py")))
    subprocess.run([str(PY), "-m", "pip", "install", "-q", "-c", str(pins), *TEST_PACKAGES], check=True)
    for venv, packages in PROJECT_VENVS.values():
        _venv(venv, packages)
    by_repo = {repo: project for project, (repo, *_) in CHECKOUTS.items()}
    for spec in [*checkouts, *([f"tensorflow/probability={tfp_checkout}"] if tfp_checkout else [])]:
        repo, _, gitdir = spec.partition("=")
        if repo not in by_repo or not gitdir:
            raise SystemExit(f"--checkout {spec}: expected OWNER/NAME=GITDIR, OWNER/NAME one of {', '.join(by_repo)}")
        print(f"checkout of {repo} at {CHECKOUTS[by_repo[repo]][1]}: {checkout(by_repo[repo], gitdir)}")
    if tfp_checkout:  # a git checkout (or bare repository) of tensorflow/probability
        for src, dest in TFP_TESTS:
            target = site_packages() / dest[5:] if dest.startswith("site:") else CACHE / dest
            target.parent.mkdir(parents=True, exist_ok=True)
            text = subprocess.run(["git", "-C", tfp_checkout, "show", f"HEAD:{src}"], capture_output=True,
                                  text=True, check=True).stdout
            target.write_text(text)


def site_packages() -> Path:
    out = subprocess.run(
        [str(PY), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    )
    return Path(out.stdout.strip())


def junit_counts(path: Path) -> dict[str, int]:
    if not path.exists():
        return {"tests": -1, "failures": -1, "errors": -1, "skipped": -1}
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    keys = ("tests", "failures", "errors", "skipped")
    return {k: sum(int(s.get(k, 0)) for s in suites) for k in keys}


def measured(cmd: list[str], tmp: Path, cwd: Path, env: dict[str, str]) -> dict:
    stats = tmp / "stats.json"
    subprocess.run([sys.executable, "-c", WRAPPER, str(stats), *cmd], cwd=cwd, check=True, env={**os.environ, **env})
    return json.loads(stats.read_text())


def run_suite(name: str, repeats: int, tmp: Path) -> dict:
    files, keyword, env = SUITES[name]
    sp = site_packages()
    paths = [CACHE / f if f.startswith("tfp-tests/") else sp / f for f in files]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise SystemExit(f"missing test files {missing}: run --setup (with --tfp-checkout for tfp)")
    pytest = [str(PY), "-m", "pytest", "-q", "-p", "no:cacheprovider", *map(str, paths)]
    if keyword:
        pytest += ["-k", keyword]
    env_note = ""
    plain, traced, verdicts = [], [], []
    counts_plain = counts_traced = None
    for _ in range(repeats):
        junit = tmp / "plain.xml"
        plain.append(measured([*pytest, f"--junitxml={junit}"], tmp, sp, env))
        counts_plain = junit_counts(junit)
        junit, report = tmp / "traced.xml", tmp / "trace.json"
        report.unlink(missing_ok=True)
        traced.append(measured(
            [str(VENV / "bin" / "cglint"), "trace", *TRACE_ARGS.get(name, []), "--output-format", "json",
             "--output-file", str(report), "--", *pytest, f"--junitxml={junit}"],
            tmp, sp, env,
        ))
        counts_traced = junit_counts(junit)
        verdicts = json.loads(report.read_text()).get("runtime", []) if report.exists() else []
        if not report.exists():
            env_note = "no trace report written"
    med = lambda runs, k: statistics.median(r[k] for r in runs)  # noqa: E731
    return {
        "name": name, "files": files, "keyword": keyword, "env": env,
        "plain": counts_plain, "traced": counts_traced,
        "wall": (med(plain, "wall"), med(traced, "wall")),
        "rss": (med(plain, "rss_kib") / 1024, med(traced, "rss_kib") / 1024),
        "rc": (plain[-1]["rc"], traced[-1]["rc"]),
        "verdicts": verdicts, "note": env_note,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suites", nargs="*", help=f"default: {' '.join(SUITES)}")
    ap.add_argument("--setup", action="store_true", help=f"create {VENV} with the projects and this cglint")
    ap.add_argument("--tfp-checkout", help="with --setup: a git repository of tensorflow/probability for its tests")
    ap.add_argument("--checkout", action="append", default=[], metavar="OWNER/NAME=GITDIR",
                    help=f"with --setup: a git repository of one of {', '.join(r for r, *_ in CHECKOUTS.values())}, "
                         "checked out at the ecosystem's version for bench/mutation.py --trace (repeatable)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "bench" / "RESULTS-trace-suites.md"))
    ap.add_argument("--json", metavar="PATH", help="also save the measurements as JSON to PATH")
    ap.add_argument("--render", metavar="PATH", help="only rewrite --out from measurements saved with --json")
    args = ap.parse_args()
    if args.render:
        saved = json.loads(Path(args.render).read_text())
        write_results(Path(args.out), saved["results"], saved["repeats"])
        return 0
    if args.setup:
        setup(args.tfp_checkout, args.checkout)
        return 0
    if not PY.exists():
        print(f"no bench venv at {VENV}: run python bench/trace_suites.py --setup first", file=sys.stderr)
        return 2
    names = args.suites or list(SUITES)
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        print(f"unknown suite(s): {', '.join(unknown)} (known: {', '.join(SUITES)})", file=sys.stderr)
        return 2
    results = []
    with tempfile.TemporaryDirectory() as tmpdir:
        for name in names:
            t0 = time.monotonic()
            r = run_suite(name, args.repeats, Path(tmpdir))
            results.append(r)
            print(
                f"{name:8} plain {r['plain']} traced {r['traced']} "
                f"time {r['wall'][0]:.1f}s -> {r['wall'][1]:.1f}s ({r['wall'][1] / r['wall'][0]:.2f}x) "
                f"peak RSS {r['rss'][0]:.0f} -> {r['rss'][1]:.0f} MiB ({r['rss'][1] / r['rss'][0]:.2f}x) "
                f"verdicts {len(r['verdicts'])} ({time.monotonic() - t0:.0f}s)",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "repeats": args.repeats}))
    write_results(Path(args.out), results, args.repeats)
    return 0


def write_results(out: Path, results: list[dict], repeats: int) -> None:
    lines = [
        "# `cglint trace -- pytest` on real projects' own test files",
        "",
        f"`python bench/trace_suites.py` (after `--setup`; {repeats} plain and {repeats} traced run(s) per",
        "suite, alternating, medians). Projects from PyPI in a venv outside the repository",
        f"(`{VENV.relative_to(Path.home()) if VENV.is_relative_to(Path.home()) else VENV}` under the home directory): "
        + ", ".join(PACKAGES) + ". Wall time of the whole command; peak RSS of the",
        "largest process. Machine: 2 shared vCPUs, CPU only, other jobs running.",
        "",
        "| suite | test files | plain: tests/fail/err/skip | traced: tests/fail/err/skip | unchanged | time plain -> traced | ratio | peak RSS plain -> traced | ratio | verdicts |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    fmt = lambda c: "/".join(str(c[k]) for k in ("tests", "failures", "errors", "skipped"))  # noqa: E731
    for r in results:
        files = "<br>".join(r["files"]) + (f"<br>-k `{r['keyword']}`" if r["keyword"] else "")
        files += "".join(f"<br>{k}={v}" for k, v in r["env"].items())
        by_verdict: dict[str, int] = {}
        for v in r["verdicts"]:
            by_verdict[v.get("verdict", "?")] = by_verdict.get(v.get("verdict", "?"), 0) + 1
        lines.append(
            f"| {r['name']} | {files} | {fmt(r['plain'])} | {fmt(r['traced'])} | "
            f"{'yes' if r['plain'] == r['traced'] else '**no**'} | {r['wall'][0]:.1f} s -> {r['wall'][1]:.1f} s | "
            f"{r['wall'][1] / r['wall'][0]:.2f}x | {r['rss'][0]:.0f} -> {r['rss'][1]:.0f} MiB | "
            f"{r['rss'][1] / r['rss'][0]:.2f}x | {', '.join(f'{k} {n}' for k, n in sorted(by_verdict.items())) or 'none'}"
            f"{' (' + r['note'] + ')' if r['note'] else ''} |"
        )
    lines += ["", "## Every verdict", ""]
    for r in results:
        lines += [f"### {r['name']}", "", "| function | where | verdict | detail |", "| --- | --- | --- | --- |"]
        for v in r["verdicts"]:
            where = f"{Path(v.get('path', '?')).name}:{v.get('line', '?')}"
            detail = (v.get("detail") or "").replace("|", "/").replace("\n", " ")[:160]
            lines.append(f"| {v.get('function')} | {where} | {v.get('verdict')} | {detail} |")
        lines.append("")
    lines += ["## Hand check of every verdict", ""]
    lines += [f"- **{k}**: {v}" for k, v in NOTES.items()] or ["- none reported"]
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    raise SystemExit(main())
