#!/usr/bin/env python3
"""Behaviour unchanged? Lint the same inputs with cglint's code at two commits and compare.

    python bench/behaviour_diff.py BEFORE [AFTER] [--mutation] [--corpora DIR] [--keep]

Each commit's `cglint/` is checked out into a temporary worktree; everything else (the fixtures,
the bench scripts, this script) is taken from the working tree, so only the package differs. Then:

1. **Findings**: `cglint --isolated --no-cache --output-format json --exit-zero` over `fixtures/`
   (the held-out corpora included) and the outside corpora's cases; every finding compared by
   (file, code, line, column, message). The differences are printed, and their count.
2. **Corpora**: `score.py` of the outside corpora on each commit's report, side by side.
3. **Mutation** (`--mutation`): `bench/mutation.py`'s table at each commit, side by side.

AFTER defaults to the working tree's HEAD. A script, not a test: minutes of CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPORA = Path(os.environ.get("CGLINT_CORPORA", "/work/shared/corpora"))
SETS = ("fresh-modules-1", "fresh-modules-2")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def _tree(rev: str, base: Path) -> Path:
    """A directory with `rev`'s cglint/ and the working tree's fixtures/ and bench/."""
    tree = base / rev
    tree.mkdir()
    archive = subprocess.run(["git", "archive", rev, "cglint"], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    for name in ("fixtures", "bench", "pyproject.toml"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, tree / name)
    return tree


def _python(tree: Path) -> dict:
    """The environment that makes `python -m cglint` and `import cglint` load the tree's package."""
    env = dict(os.environ, PYTHONPATH=str(tree), TF_CPP_MIN_LOG_LEVEL="3", NO_COLOR="1")
    where = subprocess.run([sys.executable, "-c", "import cglint; print(cglint.__file__)"], cwd=tree, env=env,
                           check=True, capture_output=True, text=True).stdout.strip()
    assert where.startswith(str(tree)), f"cglint loads from {where}, not {tree}"
    return env


def findings(tree: Path, corpora: Path) -> tuple[set[tuple], dict[str, Path]]:
    env = _python(tree)
    paths = [str(tree / "fixtures")] + [str(corpora / s / "cases") for s in SETS if (corpora / s).is_dir()]
    report = tree / "findings.json"
    subprocess.run([sys.executable, "-m", "cglint", "--isolated", "--no-cache", "--output-format", "json",
                    "--exit-zero", "--output-file", str(report), *paths], cwd=tree, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    rows = set()
    for d in json.loads(report.read_text())["diagnostics"]:
        name = os.path.relpath(d["path"], tree) if d["path"].startswith(str(tree)) else d["path"]
        rows.add((name, d["code"], d["line"], d["column"], d["message"]))
    reports = {}
    for s in SETS:
        if (corpora / s).is_dir():
            one = tree / f"{s}.json"
            subprocess.run([sys.executable, "-m", "cglint", "--isolated", "--no-cache", "--output-format", "json",
                            "--exit-zero", "--output-file", str(one), str(corpora / s / "cases")], cwd=tree,
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            reports[s] = one
    return rows, reports


def score(corpora: Path, corpus: str, report: Path) -> str:
    out = subprocess.run([sys.executable, str(corpora / "score.py"), str(corpora / corpus), str(report)],
                         capture_output=True, text=True)
    return out.stdout.strip()


def mutation(tree: Path) -> str:
    out = subprocess.run([sys.executable, str(tree / "bench" / "mutation.py")], cwd=tree, env=_python(tree),
                         capture_output=True, text=True)
    return out.stdout.strip() or out.stderr.strip()[-2000:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before")
    ap.add_argument("after", nargs="?", default="HEAD")
    ap.add_argument("--corpora", type=Path, default=CORPORA)
    ap.add_argument("--mutation", action="store_true", help="also run bench/mutation.py at both commits")
    ap.add_argument("--keep", action="store_true", help="keep the temporary trees")
    args = ap.parse_args()
    revs = [_git("rev-parse", "--short", r) for r in (args.before, args.after)]
    base = Path(tempfile.mkdtemp(prefix="cglint-behaviour-"))
    try:
        trees = [_tree(r, base) for r in revs]
        (rows_a, rep_a), (rows_b, rep_b) = (findings(t, args.corpora) for t in trees)
        gone, new = sorted(rows_a - rows_b), sorted(rows_b - rows_a)
        print(f"## Findings: {revs[0]} {len(rows_a)}, {revs[1]} {len(rows_b)}; "
              f"{len(gone) + len(new)} differences\n")
        for sign, rows in (("-", gone), ("+", new)):
            for row in rows:
                print(f"{sign} {row[0]}:{row[2]}:{row[3]}: {row[1]} {row[4][:100]}")
        for s in rep_a:
            print(f"\n## {s}\n\n### {revs[0]}\n\n{score(args.corpora, s, rep_a[s])}\n\n"
                  f"### {revs[1]}\n\n{score(args.corpora, s, rep_b[s])}")
        if args.mutation:
            for rev, tree in zip(revs, trees):
                print(f"\n## Mutation benchmark at {rev}\n\n{mutation(tree)}")
        return 1 if gone or new else 0
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
