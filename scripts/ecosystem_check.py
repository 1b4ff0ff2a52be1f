#!/usr/bin/env python3
"""Run cglint over pinned releases of real projects that use TensorFlow's custom_gradient.

    python scripts/ecosystem_check.py                  # download (once), lint, compare
    python scripts/ecosystem_check.py --project larq   # one project
    python scripts/ecosystem_check.py --write-baseline # record today's findings (keeps reasons)

Each project is fetched with `pip download --no-deps` at a pinned version, for one pinned
platform and Python, so every machine analyses the same files. Only the `.py` files are
unpacked, into a cache outside the repository (default ~/.cache/cglint/ecosystem, or
--cache-dir, or $CGLINT_ECOSYSTEM_CACHE). Findings are compared with the committed baseline
(scripts/ecosystem_baseline.txt): one accepted finding per line,

    project/path/in/release.py:LINE CODE  reason: the TensorFlow behaviour that makes it a bug

The run fails (exit 1) on any finding that is not in the baseline, and on any baseline entry
whose reason is still UNEXAMINED; entries no longer found are reported (stale). Exit 2 when a
download fails.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cglint.engine import lint_source  # noqa: E402
from cglint.files import UndecodableError, read_source  # noqa: E402
from cglint.rules import ALL_RULES  # noqa: E402

# (distribution, pinned version[, Python the wheel is for]). Pins change only together with the
# baseline. A release that supports no current Python is fetched for the newest it supports.
# A wheel is used where one exists for the pinned platform, else the sdist; every project below
# was checked to hold TensorFlow custom-gradient sites in that archive (sdists of these releases
# hold no more sites than their wheels, so wheels are used throughout, phiflow 2.2.7 has only an sdist).
PROJECTS = [
    ("tensorflow-cpu", "2.21.0"),
    ("keras", "3.15.1"),  # keras.ops.custom_gradient: tf.custom_gradient on the TF backend (the keras column)
    ("tf-keras", "2.21.0"),
    ("tensorflow-probability", "0.25.0"),
    ("dm-sonnet", "2.0.2"),
    ("larq", "0.14.0"),
    ("larq-zoo", "2.4.0"),
    ("tensorflow-compression", "2.14.1"),
    ("tf-models-official", "2.20.0"),
    ("tensorflow-recommenders", "0.7.7"),
    ("tensorflow-model-optimization", "0.8.1"),
    ("tensorflow-lattice", "2.1.1"),
    ("tensorflow-constrained-optimization", "0.2"),
    ("tensorflow-quantum", "0.7.6"),
    ("qhbmlib", "0.3.0", "3.9"),
    ("lingvo", "0.14.2"),  # imports TensorFlow through lingvo.compat: resolved by ALIASES
    ("mesh-tensorflow", "0.1.21"),  # Mesh-TF's own custom_gradient
    ("tf-quant-finance", "0.0.1.dev34"),
    ("gpflow", "2.11.2"),
    ("zfit", "0.28.0"),
    ("strawberryfields", "0.23.0"),
    ("mrmustard", "0.7.3"),
    ("pennylane", "0.28.0"),  # the last releases with a TensorFlow interface
    ("tensorcircuit-ng", "1.10.0"),
    ("sionna", "0.19.2"),  # the TensorFlow line (1.x and later moved away)
    ("dgl", "2.1.0"),
    ("xplique", "2.0.2"),
    ("tf-keras-vis", "0.8.7"),
    ("keras-spiking", "0.3.0"),
    ("deel-lip", "1.5.0"),
    ("elasticdeform", "0.5.1"),
    ("tensorlayer", "2.2.5"),
    ("pot", "0.9.5"),
    ("ivy", "1.0.0.5"),
    ("phiflow", "2.2.7"),
    ("trax", "1.4.1"),
    ("tf2jax", "0.3.8"),
    ("jax", "0.10.2"),  # jax2tf
]
# `[tool.cglint] tensorflow-aliases` each project would configure: modules re-exporting TensorFlow.
ALIASES = {"lingvo": ("lingvo.compat",)}
# Binary wheels are chosen for this platform and Python whatever machine runs the check.
PLATFORMS = ["manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "any"]
PYTHON_VERSION = "3.11"
BASELINE = ROOT / "scripts" / "ecosystem_baseline.txt"
UNEXAMINED = "UNEXAMINED"


@dataclass
class Finding:
    key: str  # project/path:line CODE
    message: str


def cache_dir(arg: str | None) -> Path:
    raw = arg or os.environ.get("CGLINT_ECOSYSTEM_CACHE") or "~/.cache/cglint/ecosystem"
    return Path(raw).expanduser().resolve()


def download(dist: str, version: str, cache: Path, python: str = PYTHON_VERSION) -> Path:
    """The release's archive in the cache, fetched once."""
    dest = cache / "downloads" / f"{dist}-{version}"
    archives = sorted(p for p in dest.glob("*") if p.suffix in (".whl", ".gz", ".zip")) if dest.exists() else []
    if archives:
        return archives[0]
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--disable-pip-version-check",
           "--only-binary=:all:", "--python-version", python, "--implementation", "cp",
           *[arg for p in PLATFORMS for arg in ("--platform", p)], "--dest", str(dest), f"{dist}=={version}"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:  # no wheel for the pinned platform: fall back to the sdist
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary=:all:",
               "--disable-pip-version-check", "--no-build-isolation", "--dest", str(dest), f"{dist}=={version}"]
        run = subprocess.run(cmd, capture_output=True, text=True)
    archives = sorted(p for p in dest.glob("*") if p.suffix in (".whl", ".gz", ".zip"))
    if run.returncode != 0 or not archives:
        raise RuntimeError(f"pip download {dist}=={version} failed: {run.stderr.strip().splitlines()[-1:]}")
    return archives[0]


def unpack(archive: Path, dest: Path) -> Path:
    """Only the Python sources; a marker file makes the unpacking happen once."""
    marker = dest / ".unpacked"
    if marker.exists():
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                if name.endswith(".py") and _safe(name):
                    zf.extract(name, dest)
    else:
        with tarfile.open(archive) as tf:
            members = [m for m in tf.getmembers() if m.isfile() and m.name.endswith(".py") and _safe(m.name)]
            tf.extractall(dest, members=members, filter="data")
    marker.write_text(archive.name + "\n")
    return dest


def _safe(name: str) -> bool:
    return not name.startswith("/") and ".." not in Path(name).parts


def lint_project(dist: str, root: Path) -> tuple[dict, list[Finding]]:
    stats = {"files": 0, "parsed": 0, "sites": 0, "keras": 0, "seconds": 0.0}
    findings: list[Finding] = []
    start = time.perf_counter()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        stats["files"] += 1
        try:
            source = read_source(str(path))
        except UndecodableError:
            continue
        result = lint_source(source, rel, ALL_RULES, tensorflow_aliases=ALIASES.get(dist, ()))
        if result.parsed:
            stats["parsed"] += 1
            # The sites the rules were given: TensorFlow's custom_gradient only, as the model resolves it.
            stats["sites"] += len(result.model.sites)
            stats["keras"] += sum(site.keras_ops for site in result.model.sites)
        for d in result.diagnostics:
            findings.append(Finding(f"{dist}/{rel}:{d.line} {d.code}", d.message))
    stats["seconds"] = time.perf_counter() - start
    return stats, findings


def read_baseline(path: Path) -> dict[str, str]:
    entries: dict[str, str] = {}
    if not path.exists():
        return entries
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        where, _, reason = line.partition("  ")
        entries[where.strip()] = reason.strip()
    return entries


def write_baseline(path: Path, found: list[Finding], old: dict[str, str]) -> None:
    header = [line for line in (path.read_text().splitlines() if path.exists() else []) if line.startswith("#")]
    lines = [f"{f.key}  {old.get(f.key) or UNEXAMINED + ': ' + f.message}" for f in sorted(found, key=_order)]
    path.write_text("\n".join(header + lines) + "\n")


def _order(f: Finding) -> tuple:
    where, code = f.key.rsplit(" ", 1)
    path, line = where.rsplit(":", 1)
    return path, int(line), code


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cache-dir", help="where releases are downloaded and unpacked (default ~/.cache/cglint/ecosystem)")
    p.add_argument("--project", action="append", help="only this distribution (repeatable)")
    p.add_argument("--baseline", type=Path, default=BASELINE)
    p.add_argument("--write-baseline", action="store_true",
                   help="rewrite the baseline with today's findings; new ones are marked UNEXAMINED")
    args = p.parse_args(argv)

    cache = cache_dir(args.cache_dir)
    chosen = [(d, v, *py) for d, v, *py in PROJECTS if not args.project or d in args.project]
    if not chosen:
        p.error(f"unknown project; known: {', '.join(d for d, *_ in PROJECTS)}")
    baseline = read_baseline(args.baseline)
    found: list[Finding] = []
    rows = []
    started = time.perf_counter()
    for dist, version, *python in chosen:
        try:
            archive = download(dist, version, cache, *python)
        except RuntimeError as exc:
            print(f"ecosystem_check: {exc}", file=sys.stderr)
            return 2
        root = unpack(archive, cache / "src" / f"{dist}-{version}")
        stats, findings = lint_project(dist, root)
        found += findings
        new = sum(f.key not in baseline for f in findings)
        kind = "wheel" if archive.suffix == ".whl" else "sdist"
        rows.append((f"{dist}=={version}", kind, stats, len(findings), new))

    # sites: TensorFlow custom-gradient sites as the model resolves them (what the rules check),
    # of which keras: Keras 3 `keras.ops.custom_gradient` sites (tf.custom_gradient on the TF backend);
    # seconds: linting only (reading, prefilter, parse, rules), not download or unpacking.
    print(f"{'project':44} {'from':5} {'files':>6} {'parsed':>6} {'sites':>6} {'keras':>5} {'findings':>8} {'new':>4} "
          f"{'seconds':>7}")
    for name, kind, s, n, new in rows:
        print(f"{name:44} {kind:5} {s['files']:>6} {s['parsed']:>6} {s['sites']:>6} {s['keras']:>5} {n:>8} {new:>4} "
              f"{s['seconds']:>7.2f}")
    total = {k: sum(r[2][k] for r in rows) for k in ("files", "parsed", "sites", "keras", "seconds")}
    print(f"{'total (' + str(len(rows)) + ' projects)':44} {'':5} {total['files']:>6} {total['parsed']:>6} {total['sites']:>6} "
          f"{total['keras']:>5} {sum(r[3] for r in rows):>8} {sum(r[4] for r in rows):>4} {total['seconds']:>7.2f}")
    print(f"whole check: {time.perf_counter() - started:.1f} s (downloads included)")

    if args.write_baseline:
        kept = {k: v for k, v in baseline.items() if not any(k.startswith(d + "/") for d, *_ in chosen)}
        merged = [Finding(k, v) for k, v in kept.items()] + found
        write_baseline(args.baseline, merged, baseline)
        print(f"wrote {args.baseline} ({len(merged)} entries)")
        return 0

    keys = {f.key for f in found}
    new = [f for f in found if f.key not in baseline]
    checked = tuple(d + "/" for d, *_ in chosen)
    stale = [k for k in baseline if k.startswith(checked) and k not in keys]
    unexamined = [k for k in keys if baseline.get(k, "").startswith(UNEXAMINED)]
    for f in new:
        print(f"NEW    {f.key}  {f.message}")
    for k in sorted(unexamined):
        print(f"UNEXAMINED {k}")
    for k in sorted(stale):
        print(f"STALE  {k}  (in the baseline, no longer found)")
    ok = not new and not unexamined
    print(f"{len(found)} findings: {len(found) - len(new)} in the baseline, {len(new)} new, "
          f"{len(unexamined)} unexamined, {len(stale)} stale baseline entries -> {'OK' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
