"""The README's two set-up commands, timed as a new user runs them: each in a fresh clone of a
commit (default HEAD), exactly as the README writes it (read from the README, so the two cannot
drift), with the machine's pip configuration and cache. Records wall time and CPU time (user +
system of the command and everything it started: pip, TensorFlow, pytest-xdist's workers) with
the load average around it, and appends a row to bench/RESULTS-setup.md.

    python bench/setup_times.py            # both commands, HEAD
    python bench/setup_times.py 1 --commit abc123

Run it under `nice` on a shared machine: the wall time then says how long a user waits on cores
that are busy with other work, the CPU time what the command itself costs."""

from __future__ import annotations

import argparse
import datetime
import os
import re
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "RESULTS-setup.md"
HEADER = """# The README's set-up commands, timed

`python bench/setup_times.py` runs each command of the README's "Try it" in a fresh clone of the
commit, exactly as written, and appends a row here. CPU is user + system time of the command and
all it started; wall is what the user waits. Load is the 1-minute load average before and after
(the machine is shared: a load above its core count means other work competed for the cores).

| date (UTC) | commit | command | exit | wall | CPU | cores | load before → after | niceness | last line |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
"""


def readme_commands() -> dict[str, str]:
    """{"1": ..., "2": ...}: the command under each `# N.` comment of the README's shell blocks."""
    text = (ROOT / "README.md").read_text()
    return {m[1]: m[2].strip() for m in re.finditer(r"^# (\d)\. .*\n(.+)$", text, re.M)}


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:02.0f} s"


def run(number: str, command: str, commit: str) -> dict:
    clone = Path(tempfile.mkdtemp(prefix="cglint-setup-"))
    log = clone.parent / f"{clone.name}.log"
    try:
        subprocess.run(["git", "clone", "-q", "--no-checkout", str(ROOT), str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "checkout", "-q", commit], check=True)
        load0 = os.getloadavg()[0]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        with open(log, "wb") as out:
            status = subprocess.run(["bash", "-c", command], cwd=clone, stdout=out, stderr=subprocess.STDOUT).returncode
        wall = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
        return {"number": number, "status": status, "wall": wall, "cpu": cpu, "load": (load0, os.getloadavg()[0]),
                "last": lines[-1][:120] if lines else ""}
    finally:
        shutil.rmtree(clone, ignore_errors=True)
        log.unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("numbers", nargs="*", default=["1", "2"], help="which commands (1, 2)")
    parser.add_argument("--commit", default="HEAD")
    args = parser.parse_args()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", args.commit], capture_output=True, text=True,
                            check=True).stdout.strip()
    commands = readme_commands()
    if not RESULTS.exists():
        RESULTS.write_text(HEADER)
    for number in args.numbers:
        r = run(number, commands[number], commit)
        last = r["last"].replace("|", "/").replace("`", "'")  # a table cell, not code
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
        row = (f"| {when} | `{commit[:7]}` | {number} | {r['status']} | {minutes(r['wall'])} | {minutes(r['cpu'])} | "
               f"{os.cpu_count()} | {r['load'][0]:.1f} → {r['load'][1]:.1f} | {os.nice(0)} | "
               f"{last} |\n")
        with open(RESULTS, "a") as f:
            f.write(row)
        print(row, end="", flush=True)


if __name__ == "__main__":
    main()
