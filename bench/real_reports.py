"""cglint on real custom-gradient bug reports: static rules, `--runtime=all` and `cglint trace`.

    python bench/real_reports.py [NAME_PREFIX ...] [--out bench/RESULTS-real-reports.md]

For every report in `bench/real_reports/` (one directory per public report, see its README),
buggy and fixed: the static findings and the `--runtime=all` verdicts (one run of
`cglint --runtime=all --output-format json --output-file F FILE`), and the verdicts of
`cglint trace --output-format json --output-file F -- python FILE`. Reports are read from
the files cglint writes, never from a stream TensorFlow also writes on. A report is *caught*
when a runtime or trace verdict on its buggy version shows the report's own symptom (the
class's keywords in the detail, an `error` for a contract error, any `mismatch` for a value
that ignores the op's derivative); a *false mismatch* is a `mismatch` on a fixed version.
Reports labelled `none-on-2.21` do not count in "caught N of M". Runs one program at a time
(TensorFlow is heavy); the whole corpus takes a few minutes.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "bench" / "real_reports"
CGLINT = [sys.executable, "-m", "cglint"]
TIMEOUT = 600

# What "the bug's own symptom" looks like in a verdict's detail, per class.
SYMPTOM = {
    "shape": r"shape",
    "dtype": r"dtype|float16|float32|float64|half|double|bfloat16",
    "sign": r"sign|opposite|negat|flip",
    "conjugate": r"conj",
    "instability": r"finite|nan|inf\b|float64|precision|unstable|overflow|underflow",
    "upstream": r"",  # any mismatch: the value ignores the op's derivative
    "order": r"order|swap",
    "contract-error": None,  # an `error` verdict (TensorFlow's own message)
}

# Why a reproducing report is missed, kept with the script so every run writes it.
NOTES: dict[str, str] = {
    "16_flip_gradient_override_ignored": (
        "in TF 2 eager code `gradient_override_map` is ignored, so no custom gradient ever runs. `cglint "
        "trace` now says so, as the registered function's `error` (the map was entered while TensorFlow "
        "executes eagerly, the registered gradient never runs), which is the bug; the class's symptom "
        "(a sign, a reversal) is not measured, since nothing reversed ran. The static rule CG017 flags the "
        "override map too (not counted here). The fixed version (tf.custom_gradient reversal) is "
        "`intentional`: a gradient reversal, recognised by its signature."),
}


def header(path: Path) -> dict[str, str]:
    """Source, Symptom, TF 2.21 and Class lines of a corpus file's docstring."""
    text = path.read_text()
    doc = text.split('"""')[1] if text.count('"""') >= 2 else ""
    fields: dict[str, str] = {}
    key = None
    for line in doc.splitlines():
        m = re.match(r"(Source|Symptom|TF 2\.21|Class): ?(.*)", line)
        if m:
            key = m.group(1)
            fields[key] = m.group(2).strip()
        elif key and line.strip():
            fields[key] += " " + line.strip()
        else:
            key = None
    return fields


def report_class(fields: dict[str, str]) -> str:
    return fields.get("Class", "").split()[0] if fields.get("Class") else ""


def run_json(cmd: list[str], out: Path) -> tuple[dict | None, str]:
    """Run a cglint command that writes JSON to `out`; (report, note on failure)."""
    out.unlink(missing_ok=True)
    try:
        proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, f"timeout {TIMEOUT}s"
    if not out.exists():
        return None, f"no report (exit {proc.returncode})"
    try:
        return json.loads(out.read_text()), ""
    except json.JSONDecodeError as exc:
        return None, f"bad JSON: {exc}"


def verdicts(report: dict | None) -> list[dict]:
    return list(report.get("runtime", [])) if report else []


def head(entries: list[dict], width: int = 90) -> str:
    if not entries:
        return "none"
    parts = []
    for e in entries:
        detail = (e.get("detail") or "").replace("|", "/").replace("\n", " ")
        parts.append(f"{e.get('function')}: **{e.get('verdict')}** {detail[:width]}")
    return "<br>".join(parts)


def shows_symptom(cls: str, entries: list[dict]) -> bool:
    pattern = SYMPTOM.get(cls, "")
    for e in entries:
        if pattern is None:
            if e.get("verdict") == "error":
                return True
        elif e.get("verdict") in ("mismatch", "error") and re.search(pattern, e.get("detail") or "", re.I):
            return True
    return False


def analyse(path: Path, tmp: Path) -> dict:
    rel = str(path.relative_to(ROOT))
    t0 = time.monotonic()
    rt, rt_note = run_json(
        [*CGLINT, "--runtime=all", "--no-cache", "--output-format", "json", "--output-file", str(tmp / "rt.json"), rel],
        tmp / "rt.json",
    )
    tr, tr_note = run_json(
        [*CGLINT, "trace", "--output-format", "json", "--output-file", str(tmp / "tr.json"), "--", sys.executable, rel],
        tmp / "tr.json",
    )
    return {
        "static": sorted({d.get("code", "?") for d in (rt or {}).get("diagnostics", [])}),
        "runtime": verdicts(rt),
        "runtime_note": rt_note,
        "trace": verdicts(tr),
        "trace_note": tr_note,
        "trace_exit": ((tr or {}).get("trace") or {}).get("exit_status"),
        "seconds": time.monotonic() - t0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("only", nargs="*", help="report directory name prefixes (default: all)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "RESULTS-real-reports.md"))
    args = ap.parse_args()
    dirs = sorted(d for d in CORPUS.iterdir() if d.is_dir() and (d / "buggy.py").exists())
    if args.only:
        dirs = [d for d in dirs if any(d.name.startswith(p) for p in args.only)]
    rows, caught, counted, false_mismatch = [], 0, 0, []
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for d in dirs:
            fields = header(d / "buggy.py")
            cls = report_class(fields)
            bug = analyse(d / "buggy.py", tmp)
            fixed = analyse(d / "fixed.py", tmp) if (d / "fixed.py").exists() else None
            reproduces = cls != "none-on-2.21"
            hit_rt = shows_symptom(cls, bug["runtime"]) if reproduces else False
            hit_tr = shows_symptom(cls, bug["trace"]) if reproduces else False
            if reproduces:
                counted += 1
                caught += hit_rt or hit_tr
            fixed_mm = bool(fixed) and any(
                e.get("verdict") == "mismatch" for e in fixed["runtime"] + fixed["trace"]
            )
            if fixed_mm:
                false_mismatch.append(d.name)
            rows.append((d.name, fields, cls, bug, fixed, hit_rt, hit_tr, fixed_mm))
            print(
                f"{d.name:45} {cls:15} runtime={'Y' if hit_rt else '-'} trace={'Y' if hit_tr else '-'} "
                f"fixed-mismatch={'Y' if fixed_mm else '-'} ({bug['seconds']:.0f}s)",
                flush=True,
            )
    summary = (
        f"caught {caught} of {counted} reproducing reports "
        f"({100 * caught / max(counted, 1):.0f}%, target >= 60%); "
        f"false mismatches on fixed versions {len(false_mismatch)} (target 0)"
        + (f": {', '.join(false_mismatch)}" if false_mismatch else "")
    )
    print(summary)
    write_results(Path(args.out), rows, summary)
    return 0


def write_results(out: Path, rows: list, summary: str) -> None:
    lines = [
        "# cglint on real custom-gradient bug reports",
        "",
        "`python bench/real_reports.py` (corpus: `bench/real_reports/`, one public report per",
        "directory, reduced to a buggy and a fixed program; see its README). TensorFlow 2.21,",
        "Keras 3. Caught = a `--runtime=all` or `cglint trace` verdict on the buggy version shows",
        "the report's own symptom; reports that no longer reproduce on 2.21 are not counted.",
        "",
        f"**{summary}**",
        "",
        "| report | class | static | --runtime=all (buggy) | trace (buggy) | caught | fixed: runtime / trace |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, fields, cls, bug, fixed, hit_rt, hit_tr, fixed_mm in rows:
        caught = "runtime+trace" if hit_rt and hit_tr else "runtime" if hit_rt else "trace" if hit_tr else ("n/a" if cls == "none-on-2.21" else "**no**")
        rt = head(bug["runtime"]) + (f" ({bug['runtime_note']})" if bug["runtime_note"] else "")
        tr = head(bug["trace"]) + (f" ({bug['trace_note']})" if bug["trace_note"] else "")
        fx = "no fixed version"
        if fixed:
            fx = " / ".join(
                ", ".join(sorted({e.get("verdict", "?") for e in entries})) or "none"
                for entries in (fixed["runtime"], fixed["trace"])
            ) + (" **false mismatch**" if fixed_mm else "")
        url = fields.get("Source", "").split()[0] if fields.get("Source") else ""
        lines.append(
            f"| [{name}]({url}) | {cls} | {', '.join(bug['static']) or '-'} | {rt} | {tr} | {caught} | {fx} |"
        )
    lines += ["", "## Misses and what would catch them", ""]
    for name, *_ in rows:
        if name in NOTES:
            lines.append(f"- **{name}**: {NOTES[name]}")
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    raise SystemExit(main())
