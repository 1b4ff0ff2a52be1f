"""Runs the runtime check for one user module in a child process, with a timeout.

User code may crash, hang, `sys.exit` or `os._exit`; each such module costs `skipped` verdicts
with the reason, never the caller's run. This module does not import TensorFlow itself.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from cglint.gradcheck.report import GradientReport

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_SAFE_PATH = ["-P"] if sys.version_info >= (3, 11) else []


def _skipped(detail: str, seed: int) -> dict:
    return GradientReport.skipped(detail, seed).to_dict()


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        if proc.poll() is None:
            proc.kill()


# Children running now (each in a process group of its own, so that a terminal's Ctrl-C does not
# reach user code directly): `stop_all` ends them when cglint is interrupted or terminated.
_LIVE: set[subprocess.Popen] = set()
_LOCK = threading.Lock()
_STOPPING = threading.Event()


def stop_all() -> None:
    """Kills every child's process group at once and starts no more (their threads then return
    `skipped` and remove their temporary directories)."""
    _STOPPING.set()
    with _LOCK:
        for proc in list(_LIVE):
            _kill_group(proc)


# A container's memory (cgroup v2, then v1): less than the machine's, and what the OOM killer uses.
_CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def default_memory_limit() -> int:
    """MiB for one child: half the memory of the machine (or of the container cglint runs in),
    at least 2 GiB (TensorFlow itself takes about 300 MiB of the data segment the limit
    counts; see child.limit_memory)."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 4096
    for name in _CGROUP_LIMITS:
        try:
            with open(name) as fh:
                value = fh.read().strip()
        except OSError:
            continue
        if value.isdigit():
            total = min(total, int(value))
    return max(2048, (total >> 20) // 2)


def run_module_checks(module_path: str, functions: list[dict], timeout: float = 60.0,
                      seed: int = 0, cwd: str | None = None, memory_limit: int | None = None) -> list[dict]:
    """Checks `functions` of the module at `module_path` in one child process.

    Each entry of `functions` is a dict with `function` (qualified name: `op`, `Class.method`)
    and optionally `inputs` (a spec, see `cglint.runtime.spec`), `shapes` (shapes the static
    side found, for the input search), `intentional`, `rtol`, `atol`, and any keys the caller
    wants echoed back (`line`, ...). Returns one dict per entry, in order: the entry's own keys
    plus `path`, `verdict`, `reference`, `max_rel_error`, `detail`, `seed`, `args`, `inputs`.
    The child runs in `cwd` (default: the module's directory), its memory capped at
    `memory_limit` MiB (default `default_memory_limit()`, 0: no cap): a module that exhausts it
    costs its own functions `skipped` with a reason that says so.
    """
    memory_limit = default_memory_limit() if memory_limit is None else memory_limit
    functions = list(functions)
    with tempfile.TemporaryDirectory(prefix="cglint-") as tmp:
        req_path, res_path = Path(tmp, "request.json"), Path(tmp, "results.jsonl")
        req_path.write_text(json.dumps({"module_path": str(Path(module_path).resolve()),
                                        "functions": functions, "seed": seed,
                                        "memory_limit_mib": memory_limit}))
        res_path.touch()
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONPATH": os.pathsep.join(
                   p for p in (_PACKAGE_ROOT, os.environ.get("PYTHONPATH")) if p)}
        failure = None
        try:
            if _STOPPING.is_set():
                raise InterruptedError("cglint was interrupted")
            proc = subprocess.Popen(
                # -P: the module's directory (the cwd) is not put first on sys.path, so a user
                # `inspect.py` or `random.py` cannot replace the standard library for the child.
                [sys.executable, *_SAFE_PATH, "-m", "cglint.runtime.child", str(req_path), str(res_path)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=env, cwd=cwd or str(Path(module_path).resolve().parent),
                start_new_session=True)  # its own process group, so a hang is killed whole
        except OSError as e:
            return [{**f, "path": module_path, **_skipped(f"could not start the child: {e}", seed)}
                    for f in functions]
        with _LOCK:
            _LIVE.add(proc)
        try:
            rc = proc.wait(timeout=timeout)
            if _STOPPING.is_set():
                failure = "cglint was interrupted"
            elif rc < 0:
                failure = f"child killed by signal {signal.Signals(-rc).name}"
            elif rc != 0:
                failure = f"child exited with code {rc}"
        except subprocess.TimeoutExpired:
            failure = f"timed out after {timeout:g}s"
        finally:
            # The child and anything the user's code started (a forked data loader, a server)
            # end with it, whatever happened; then its temporary directory goes.
            _kill_group(proc)
            proc.wait()
            with _LOCK:
                _LIVE.discard(proc)
        events = []
        for line in res_path.read_text(encoding="utf-8").splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # a line cut short by a crash
    failure_event = next((e for e in events if "import_failed" in e), {})
    import_failed = failure_event.get("import_failed")
    done = {e["index"]: e["result"] for e in events if "index" in e}
    out = []
    for i, f in enumerate(functions):
        if i in done:
            result = done[i]
        elif import_failed is not None:
            result = _skipped(f"import failed: {import_failed}", seed)
            if failure_event.get("raised_in"):  # the session attributes it (session._attribute)
                result.update(raised_in=failure_event["raised_in"], message=failure_event["message"])
        else:
            result = _skipped(failure or "no result from the child", seed)
        out.append({**f, "path": module_path, **result})
    return out
