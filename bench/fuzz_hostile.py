"""A fuzz campaign of hostile checkouts: generated and mutated programs, configurations, baselines,
paths and stdin buffers, each run through the CLI in this process (cli.main, as
tests/inprocess.py does), checking the promises of docs/threat-model.md:

- no exception escapes, the exit status is 0, 1 or 2, no traceback is printed;
- nothing outside the case's checkout changes (a sentinel directory next to it, reachable by
  symbolic links and `../` paths from the checkout, is compared byte for byte);
- a file named like an option after `--` is a path (`--exit-zero` never turns a finding's exit
  1 into 0, `--runtime` never runs anything);
- a finding in a file that was not checked is never "All checks passed": when any path could
  not be checked, the exit status is 2;
- each case takes under a CPU budget (a quadratic regex or a walk that never ends shows up).

    python bench/fuzz_hostile.py --seed 4242 --cases 10000 [--out DIR] [--time-limit SECONDS]

Writes every failing case's description to --out (default bench/fuzz-failures/) and prints a
table (per kind: cases, failures) for bench/RESULTS-fuzz.md. Exit status 1 when a case failed.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SITE = ("import tensorflow as tf\n\n@tf.custom_gradient\ndef op(x):\n    y = tf.math.tan(x)\n"
        "    def grad(dy):\n        return dy * tf.math.cos(y)\n    return y, grad\n")  # one CG005
CODECS = ["utf-8", "latin-1", "undefined", "punycode", "idna", "unicode_escape", "raw_unicode_escape", "utf-7",
          "bogus-encoding", "utf-16", "cp1252", "rot13", "hex", "base64", "uu", "zlib"]
OPTION_NAMES = ["--runtime", "--exit-zero", "--fix", "--add-noqa", "--output-file=x.py", "-", "--", "-q",
                "--runtime=all", "--config", "--write-baseline", "--select=CG999", "--show-files"]
CPU_BUDGET = 20.0  # seconds of CPU for one case (a small checkout lints in well under one)


def adversarial_line(rng: random.Random) -> str:
    k = rng.choice([10, 1000, 20000, 100000])
    return rng.choice([
        lambda: "    doc = \"" + "return " * k + "\"",
        lambda: "EXAMPLE = '''\nfrom " + "." * k + "x\n'''",
        lambda: "# " + "def f(" * k,
        lambda: "x = 1  # noqa:" + "a" * k,
        lambda: "# cglint: noqa" + " " * k + "x",
        lambda: "# cglint: example " + " " * k + "x",
        lambda: "s = '<tf.Variable \\'" + "a " * k + "'",
        lambda: "(" * rng.choice([50, 199, 250, 1000]) + ")" * 5,
        lambda: "f(" + "a=1, " * k + ")",
        lambda: "    " + "\t" * k,
        lambda: "import " + "a." * k + "b",
        lambda: "#" + "\x0c" * k,
        lambda: "a, b = f(" + "x" * k,
    ])()


def program(rng: random.Random) -> bytes:
    lines = SITE.splitlines()
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        at = rng.randint(0, len(lines))
        if op < 0.5:
            lines.insert(at, adversarial_line(rng))
        elif op < 0.7 and lines:
            del lines[min(at, len(lines) - 1)]
        elif op < 0.85:
            lines.insert(at, rng.choice(["\x00", "\ufeff", "\r", "\u2028", "\x85", "é", "\udcff"]))
        else:
            lines.insert(at, lines[min(at, len(lines) - 1)] if lines else "")
    text = rng.choice(["\n", "\r\n", "\r"]).join(lines) + "\n"
    data = text.encode("utf-8", "surrogateescape")
    if rng.random() < 0.3:
        data = f"# -*- coding: {rng.choice(CODECS)} -*-\n".encode() + data
    if rng.random() < 0.1:
        data = b"\xef\xbb\xbf" + data
    if rng.random() < 0.1:
        data = data[: rng.randint(0, len(data))]
    if rng.random() < 0.05:
        data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    return data


def config(rng: random.Random) -> bytes:
    parts = []
    if rng.random() < 0.3:
        parts.append(f"# -*- coding: {rng.choice(CODECS)} -*-")
    parts.append("[tool.cglint]")
    choices = [
        lambda: 'select = ["CG"]',
        lambda: f'select = ["{rng.choice(["CG005", "CG9", "X", "", "*"])}"]',
        lambda: f'exclude = ["{rng.choice(["*", "**/**/**/**a", "[z-a]", "../", "/", "op.py"])}"]',
        lambda: f'baseline = "{rng.choice(["../outside/cglint-baseline.json", "/dev/zero", "b.json", "sub/../../outside/x", "."])}"',
        lambda: "extend-exclude = [" + "[" * rng.choice([10, 500, 2000]) + "]" * rng.choice([10, 500, 2000]) + "]",
        lambda: "[tool.cglint.runtime]\ntimeout = " + rng.choice(["inf", "nan", "-1", "1e400", "0", '"x"']),
        lambda: "tensorflow-aliases = [\"" + rng.choice(["a.b", "..", "a" * 10000, "1x"]) + "\"]",
        lambda: "unknown-key = 1",
    ]
    for _ in range(rng.randint(0, 3)):
        parts.append(rng.choice(choices)())
    data = "\n".join(parts).encode() + b"\n"
    if rng.random() < 0.1:
        data += b"\xff\xfe"
    return data


def baseline(rng: random.Random) -> bytes:
    count = rng.choice(["1", "2", "Infinity", "-Infinity", "NaN", "1e400", "1.5", "true", '"3"', "null", "[]",
                        "9" * 400, "-5"])
    entry = rng.choice([
        f'{{"path": "op.py", "code": "CG005", "line_hash": "x", "count": {count}}}',
        '"not an object"', "[" * 2000 + "]" * 2000, '{"path": 1}',
    ])
    return f'{{"version": 1, "findings": [{entry}]}}'.encode()


def case(rng: random.Random, base: Path) -> tuple[str, list[str], bytes | None, dict]:
    """Builds one case under `base`: returns (kind, argv, stdin bytes or None, expectations)."""
    proj = base / "proj"
    (proj / ".git").mkdir(parents=True)
    outside = base / "outside"
    outside.mkdir()
    (outside / "cglint-baseline.json").write_text('{"version": 1, "findings": []}\n')
    (outside / "bashrc").write_text("export PS1='$ '\n")
    (proj / "op.py").write_text(SITE)
    kind = rng.choice(["program", "config", "paths", "baseline", "stdin", "links"])
    args = ["--no-cache"] if rng.random() < 0.7 else []
    expect: dict = {}
    stdin = None
    if kind == "program":
        for i in range(rng.randint(1, 3)):
            (proj / f"m{i}.py").write_bytes(program(rng))
        args += rng.choice([[], ["--fix"], ["--diff"], ["--add-noqa"], ["--output-format", "sarif"],
                            ["--output-format", "json"], ["--unsafe-fixes", "--fix"], ["--statistics"]])
        args += ["--", "."]
    elif kind == "config":
        (proj / "pyproject.toml").write_bytes(config(rng))
        if rng.random() < 0.3:
            (base / "pyproject.toml").write_bytes(config(rng))
            os.chown(base / "pyproject.toml", 4321, 4321) if os.geteuid() == 0 else None
        args += rng.choice([[], ["--prune-baseline"], ["--write-baseline", "b.json"], ["--show-settings"]])
        args += ["--", "."]
    elif kind == "paths":
        names = []
        for _ in range(rng.randint(1, 3)):
            name = rng.choice(OPTION_NAMES + ["bad\udcff\udcfe.py", "a b.py", "x" * 200 + ".py", "é.py"])
            try:
                (proj / name).write_bytes(b"#!/usr/bin/env python3\nopen('PWNED', 'w')\n")
            except (OSError, ValueError):
                continue
            names.append(name)
        depth = rng.choice([0, 0, 10, 300])
        if depth:
            deep = proj / "/".join(["d"] * depth)
            deep.mkdir(parents=True)
            (deep / "deep.py").write_text(SITE)
        if rng.random() < 0.3:
            (proj / "locked").mkdir()
            (proj / "locked" / "op2.py").write_text(SITE)
            os.chmod(proj / "locked", 0)
        args += rng.choice([[], ["--force-exclude"], ["--output-format", "sarif"], ["--fix"]])
        args += ["--", "op.py", *names, *(["."] if rng.random() < 0.5 else [])]
        expect["finding"] = True  # op.py's CG005, whatever the other names say
    elif kind == "baseline":
        (proj / "b.json").write_bytes(baseline(rng))
        args += ["--baseline", "b.json", *rng.choice([[], ["--prune-baseline"], ["--fix"]]), "--", "."]
    elif kind == "stdin":
        stdin = program(rng)
        if rng.random() < 0.05:
            stdin = SITE.encode() * (11 * 2**20 // len(SITE))
        args += ["-", *rng.choice([[], ["--fix"], ["--diff"], ["--stdin-filename", "x.py"],
                                   ["--stdin-filename", "n.ipynb"]])]
    else:  # links
        for name, target in (("cglint.sarif", outside / "bashrc"), ("cfg.py", outside / "bashrc"),
                             ("b.json", outside / "cglint-baseline.json"), (".cglint_cache", outside)):
            if rng.random() < 0.6:
                (proj / name).symlink_to(target)
        if rng.random() < 0.5:
            (proj / "sub").mkdir()
            (proj / "sub" / "pyproject.toml").write_text('[tool.cglint]\nbaseline = "../b.json"\n')
        args = rng.choice([["--output-file", "cglint.sarif", "--output-format", "sarif"],
                           ["--prune-baseline", "--baseline", "b.json"], ["--fix"], []]) + ["--", "sub" if (proj / "sub").exists() else "."]
    return kind, args, stdin, expect


def snapshot(directory: Path) -> dict[str, str]:
    out = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file() and not path.is_symlink():
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def run_case(rng: random.Random) -> tuple[str, str | None, list[str]]:
    from cglint import cli

    base = Path(tempfile.mkdtemp(prefix="cglint-fuzz-"))
    here = os.getcwd()
    try:
        kind, args, stdin, expect = case(rng, base)
        before = snapshot(base / "outside")
        out, err = io.StringIO(), io.StringIO()
        stdin_stream = io.TextIOWrapper(io.BytesIO(stdin or b""), encoding="utf-8", errors="surrogateescape")
        os.chdir(base / "proj")
        start = time.process_time()
        old_stdin = sys.stdin
        sys.stdin = stdin_stream
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = cli.main(list(args))
        except SystemExit as exc:  # argparse on a usage error
            code = exc.code if isinstance(exc.code, int) else 2
        except BaseException:  # noqa: BLE001 - the finding
            return kind, "exception: " + traceback.format_exc(limit=3)[-400:], args
        finally:
            sys.stdin = old_stdin
            os.chdir(here)
        spent = time.process_time() - start
        problems = []
        if code not in (0, 1, 2):
            problems.append(f"exit status {code}")
        if "Traceback" in err.getvalue():
            problems.append("traceback on stderr")
        if snapshot(base / "outside") != before:
            problems.append("a file outside the checkout changed")
        if (base / "proj" / "PWNED").exists():
            problems.append("a checked file was run")
        if expect.get("finding") and code == 0:
            problems.append("exit 0 with op.py's finding")
        if "could not be checked" in out.getvalue() + err.getvalue() and code != 2 and "--exit-zero" not in args:
            problems.append("a path not checked, yet exit status %s" % code)
        if spent > CPU_BUDGET:
            problems.append(f"{spent:.1f} s of CPU")
        return kind, "; ".join(problems) or None, args
    finally:
        os.chdir(here)
        for dirpath, dirnames, _ in os.walk(base):
            for d in dirnames:
                try:
                    os.chmod(os.path.join(dirpath, d), 0o700)
                except OSError:
                    pass
        shutil.rmtree(base, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=4242)
    parser.add_argument("--cases", type=int, default=10000)
    parser.add_argument("--start", type=int, default=0,
                        help="first case index (each case depends on the seed and its index only: "
                             "ranges run in parallel make one campaign)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "fuzz-failures"))
    parser.add_argument("--time-limit", type=float, default=0, metavar="SECONDS",
                        help="stop after this long (wall clock) and report the cases run so far")
    args = parser.parse_args()
    from cglint import reach

    totals: dict[str, list[int]] = {}
    failures = 0
    started = time.time()
    done = 0
    for i in range(args.start, args.cases):
        if args.time_limit and time.time() - started > args.time_limit:
            break
        done += 1
        rng = random.Random(f"{args.seed}:{i}")
        reach.use(())
        kind, problem, argv = run_case(rng)
        row = totals.setdefault(kind, [0, 0])
        row[0] += 1
        if problem:
            row[1] += 1
            failures += 1
            Path(args.out).mkdir(parents=True, exist_ok=True)
            Path(args.out, f"case-{args.seed}-{i}.json").write_text(json.dumps(
                {"seed": args.seed, "case": i, "kind": kind, "argv": argv, "problem": problem}, indent=2))
            print(f"case {i} ({kind}): {problem} [{' '.join(argv)[:120]}]", file=sys.__stderr__, flush=True)
        if (i + 1) % 500 == 0:
            print(f"{i + 1} cases, {failures} failures, {time.time() - started:.0f} s", file=sys.__stderr__, flush=True)
    print(f"| kind | cases | failures |\n| --- | ---: | ---: |")
    for kind, (n, f) in sorted(totals.items()):
        print(f"| {kind} | {n} | {f} |")
    print(f"| all | {done} | {failures} |")
    print(f"seed {args.seed}: cases {args.start}..{args.start + done - 1} ({done}) in {time.time() - started:.0f} s",
          file=sys.__stderr__)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
