"""A static run tells an interactive terminal how far it is (files done / total, on stderr,
erased at the end); `-q`, machine formats and pipes get nothing of it."""

import os
import pty
import subprocess
import sys

import pytest
from support import ENV, read_terminal, cglint


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("progress")
    for i in range(3):
        (root / f"m{i}.py").write_text(f"def f{i}(x, scale=1):\n    return x * scale\n")
    return root


def _tty_stderr(args, cwd):
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "cglint", "--no-cache", *args], cwd=cwd, env=ENV,
                            stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    terminal = read_terminal(master)
    stdout = proc.stdout.read().decode()
    proc.wait(timeout=600)
    os.close(master)
    return proc.returncode, stdout, terminal.decode(errors="replace")


def test_a_terminal_sees_progress_then_a_clean_line(tree):
    code, stdout, terminal = _tty_stderr(["."], tree)
    assert code == 0
    assert "cglint: 3/3 files" in terminal and terminal.rstrip("\r\n").endswith("\r\x1b[K")
    assert "/3 files" not in stdout and "\x1b" not in stdout  # the report itself is untouched


@pytest.mark.parametrize("args", [["-q", "."], ["--output-format", "json", "."]])
def test_quiet_and_json_runs_show_none(tree, args):
    code, stdout, terminal = _tty_stderr(args, tree)
    assert code == 0 and "/3 files" not in terminal and "/3 files" not in stdout


def test_a_pipe_gets_none(tree):
    run = cglint("--no-cache", ".", cwd=tree)
    assert run.returncode == 0 and "/3 files" not in run.stderr and "\x1b[K" not in run.stderr
