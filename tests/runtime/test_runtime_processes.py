"""`--runtime` leaves nothing behind (issue 20, reproducers 15 and 23): Ctrl-C, SIGTERM and SIGHUP
end every child's process group at once and remove its temporary directory; after a normal run
no process the module started survives, and a thread it left running costs nothing; a
MemoryError under a limit set outside cglint names that limit."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.support import ENV

SITE = ("import tensorflow as tf\n\n@tf.custom_gradient\ndef op(x):\n    y = tf.math.sin(x)\n"
        "    def grad(dy):\n        return dy * tf.math.cos(x)\n    return y, grad\n")


def _descendants(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out] + [d for p in out for d in _descendants(int(p))]


def _env(tmp_path):
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {**ENV, "TMPDIR": str(tmp_path / "tmp")}  # this run's temporary directories only


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_ends_the_children_at_once_and_removes_their_directories(tmp_path, sig):
    (tmp_path / "slow").mkdir()
    (tmp_path / "slow/slow.py").write_text("import time\ntime.sleep(60)\n" + SITE)
    proc = subprocess.Popen([sys.executable, "-m", "cglint", "--runtime=all", "--runtime-timeout", "100", "--no-cache",
                             "slow"], cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while not _descendants(proc.pid) and time.time() < deadline:
        time.sleep(0.2)
    children = _descendants(proc.pid)
    assert children and os.listdir(tmp_path / "tmp")
    time.sleep(1)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)  # well before the module's 60 s sleep or the 100 s timeout end it
    assert proc.returncode == 2
    assert b"cglint: error: interrupted" in err and b"Traceback" not in err
    time.sleep(0.5)
    assert not [c for c in children if os.path.exists(f"/proc/{c}") and
                open(f"/proc/{c}/stat").read().split()[2] != "Z"]
    assert os.listdir(tmp_path / "tmp") == []


def test_a_normal_run_leaves_no_process_of_the_module_and_a_thread_costs_no_timeout(tmp_path):
    (tmp_path / "mods").mkdir()
    marker = tmp_path / "forked.pid"
    (tmp_path / "mods/forker.py").write_text(
        f"import os, time\nif os.fork() == 0:\n    open({str(marker)!r}, 'w').write(str(os.getpid()))\n"
        "    time.sleep(120)\n    os._exit(0)\n" + SITE)
    (tmp_path / "mods/threader.py").write_text(
        "import threading, time\nthreading.Thread(target=lambda: time.sleep(3600)).start()\n" + SITE)
    run = subprocess.run([sys.executable, "-m", "cglint", "--runtime=all", "--runtime-timeout", "60", "--no-cache",
                          "mods"], cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=300)
    # Two verdicts, not a `timeout`: the thread did not keep the child to its 60 s limit.
    assert run.returncode == 0 and run.stdout.count("match vs autodiff") == 2, run.stdout
    time.sleep(0.5)
    forked = int(marker.read_text())
    alive = os.path.exists(f"/proc/{forked}") and open(f"/proc/{forked}/stat").read().split()[2] != "Z"
    if alive:
        os.kill(forked, signal.SIGKILL)
    assert not alive
    assert not [n for n in os.listdir(tmp_path / "tmp") if n.startswith("cglint-")]


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit")
def test_memory_error_under_an_outer_limit_names_that_limit(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m/hog.py").write_text("blob = bytearray(3 << 30)\n" + SITE)
    run = subprocess.run(["prlimit", f"--as={3000 << 20}", sys.executable, "-m", "cglint", "--runtime=all",
                          "--no-cache", "m"], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
    line = next(line for line in run.stdout.splitlines() if "hog.py" in line and "skipped" in line)
    assert "the address-space limit set outside cglint (3000 MiB" in line
    assert "memory-limit" not in line
