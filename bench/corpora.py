"""cglint (static) on the outside corpora written by other hands, scored by their own scorer.

    python bench/corpora.py                 lint each corpus, print score.py's output (strict and
                                            bug levels, with every miss and false finding)
    python bench/corpora.py --write LABEL   also append the figures to bench/RESULTS-corpora.md
                                            under the heading LABEL ("before", "after", ...)
    python bench/corpora.py --runtime       also `--runtime=all` on the files of each RUNTIME.tsv,
                                            scored by `score.py --runtime`
    python bench/corpora.py --corpora DIR   where the corpora live (default ../shared/corpora,
                                            or $CGLINT_CORPORA)

The corpora (`fresh-modules-1`, `fresh-modules-2`) carry TensorFlow-checked truth (LABELS.tsv,
GAPS.tsv); `score.py` is theirs, run unchanged. They measure; they are never a target: a change
that makes one of their files pass without fixing the class of code it stands for is wrong.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = Path(os.environ.get("CGLINT_CORPORA", "/work/shared/corpora"))
SETS = ("fresh-modules-1", "fresh-modules-2")


def score(corpora: Path, name: str) -> tuple[str, float]:
    corpus = corpora / name
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "s.json"
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "cglint", "--no-cache", "--output-format", "json",
                        "--output-file", str(report), str(corpus / "cases")],
                       cwd=ROOT, capture_output=True, text=True)
        took = time.perf_counter() - start
        out = subprocess.run([sys.executable, str(corpora / "score.py"), str(corpus), str(report)],
                             capture_output=True, text=True)
    return out.stdout, took


def runtime_score(corpora: Path, name: str) -> tuple[str, float]:
    corpus = corpora / name
    rows = (corpus / "RUNTIME.tsv").read_text().splitlines()[1:]
    files = sorted({str(corpus / "cases" / r.split("\t")[0]) for r in rows if r.strip()})
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "r.json"
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "cglint", "--no-cache", "--runtime=all",
                        "--output-format", "json", "--output-file", str(report), *files],
                       cwd=ROOT, capture_output=True, text=True)
        took = time.perf_counter() - start
        out = subprocess.run([sys.executable, str(corpora / "score.py"), "--runtime", str(corpus),
                              str(report)], capture_output=True, text=True)
    return out.stdout, took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpora", type=Path, default=DEFAULT)
    ap.add_argument("--write", metavar="LABEL")
    ap.add_argument("--runtime", action="store_true")
    ap.add_argument("--only-runtime", action="store_true")
    args = ap.parse_args()
    sections = []
    for name in SETS:
        kinds = ([] if args.only_runtime else [("static", score)]) + (
            [("runtime", runtime_score)] if args.runtime or args.only_runtime else [])
        for kind, fn in kinds:
            text, took = fn(args.corpora, name)
            block = f"### {name} ({kind}, {took:.1f} s)\n\n```\n{text.rstrip()}\n```\n"
            print(block, flush=True)
            sections.append(block)
    if args.write:
        path = ROOT / "bench" / "RESULTS-corpora.md"
        head = "" if path.exists() else (
            "# cglint on the outside corpora\n\n`python bench/corpora.py` (static; "
            "`score.py` from the corpora, unchanged).\n\n")
        with path.open("a") as f:
            f.write(head + f"## {args.write}\n\n" + "\n".join(sections) + "\n")


if __name__ == "__main__":
    main()
