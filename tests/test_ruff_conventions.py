"""cglint beside `ruff check` (0.17's conventions): the same situations, run as a user runs them
(a pipe, and a terminal through a pty), and the same shape of answer. Each case runs ruff too,
so a convention asserted here is one ruff really follows; without ruff installed (it is in the
`test` extra) the ruff half is skipped and cglint's half still runs."""

from __future__ import annotations

import importlib.util
import os
import pty
import re
import subprocess
import sys

import pytest
from support import ENV, FIXTURES, read_terminal

HAVE_RUFF = importlib.util.find_spec("ruff") is not None
ESC = "\x1b["
PLAIN_ENV = {k: v for k, v in ENV.items() if k not in ("NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE")}

# A finding with a safe fix (F401 / CG005), one with only an unsafe fix (E711 / CG015).
RUFF_SAFE = "import os\n"
RUFF_UNSAFE = "x = 1\nif x == None:\n    pass\n"
CG_SAFE = (FIXTURES / "rules" / "cg005_bad.py").read_text()
CG_UNSAFE = (FIXTURES / "rules" / "cg015_bad.py").read_text()


@pytest.fixture
def tree(tmp_path):
    for name, text in {"r_safe.py": RUFF_SAFE, "r_unsafe.py": RUFF_UNSAFE, "c_safe.py": CG_SAFE,
                       "c_unsafe.py": CG_UNSAFE, "ok.py": "x = 1\n"}.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def run(tool: str, *args, cwd, stdin: str | None = None):
    """`ruff check --isolated ARGS` or `cglint check --isolated ARGS` through pipes."""
    if tool == "ruff" and not HAVE_RUFF:
        pytest.skip("ruff is not installed (pip install ruff; it is in the test extra)")
    cmd = [sys.executable, "-m", tool, "check", "--isolated", *map(str, args)]
    if tool == "ruff":  # the rules the fixtures trigger (E711 is not in ruff's default set) and E902 (io-error)
        cmd[cmd.index("--isolated") + 1:cmd.index("--isolated") + 1] = ["--no-cache", "--select", "F401,E711,E902"]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=PLAIN_ENV, input=stdin)


def on_terminal(tool: str, *args, cwd) -> str:
    """What the tool writes to a terminal: stdout and stderr are a pty's slave."""
    if tool == "ruff" and not HAVE_RUFF:
        pytest.skip("ruff is not installed (pip install ruff; it is in the test extra)")
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", tool, "check", "--isolated", *map(str, args)], cwd=cwd,
                                env={**PLAIN_ENV, "TERM": "xterm-256color"}, stdin=subprocess.DEVNULL,
                                stdout=slave, stderr=slave)
    finally:
        os.close(slave)
    shown = read_terminal(master)
    proc.wait(timeout=120)
    os.close(master)
    return shown.decode()


TOOLS = {"ruff": ("r_safe.py", "r_unsafe.py", "F401", "E711"), "cglint": ("c_safe.py", "c_unsafe.py", "CG005", "CG015")}
both = pytest.mark.parametrize("tool", list(TOOLS))


@both
def test_a_fixable_finding_shows_star_help_and_the_fixable_summary(tool, tree):
    safe, _, code, _ = TOOLS[tool]
    out = run(tool, safe, cwd=tree)
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert re.search(rf"\b{code} \[\*\] ", lines[0]), lines[0]
    assert any(line.startswith("help: ") for line in lines), out.stdout  # what the fix does
    assert re.match(r"Found 1 (error|problem)", lines[-2]) and lines[-1].startswith("[*] 1 fixable with")
    assert ESC not in out.stdout + out.stderr  # a pipe: no colour


@both
def test_a_terminal_gets_colour_and_a_pipe_none(tool, tree):
    safe, _, code, _ = TOOLS[tool]
    shown = on_terminal(tool, safe, cwd=tree)
    assert ESC in shown and code in shown
    plain = re.sub(r"\x1b\[[0-9;]*m", "", shown).replace("\r\n", "\n")
    assert plain == run(tool, safe, cwd=tree).stdout  # the same words, coloured
    assert ESC not in on_terminal(tool, "--color", "never", safe, cwd=tree)


@both
def test_diff_with_only_unsafe_fixes_says_so_and_names_the_option(tool, tree):
    _, unsafe, _, _ = TOOLS[tool]
    out = run(tool, "--diff", unsafe, cwd=tree)
    assert out.returncode == 0
    # ruff prints the line on stdout, after the diff; cglint on stderr, so that stdout stays a
    # patch (`cglint --diff | git apply`).
    assert re.fullmatch(r"No (errors|problems) would be fixed \(1 fix available with `--unsafe-fixes`\)\.\n",
                        out.stdout + out.stderr), out.stdout + out.stderr


@both
def test_a_missing_path_is_reported_never_with_all_checks_passed(tool, tree):
    out = run(tool, "nope.py", "ok.py", cwd=tree)
    assert out.returncode != 0
    assert "nope.py" in out.stdout + out.stderr
    assert "All checks passed" not in out.stdout + out.stderr


@both
def test_an_unknown_option_is_a_short_error_with_a_tip(tool, tree):
    out = run(tool, "--statistcs", "ok.py", cwd=tree)
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.splitlines()
    assert "error:" in lines[0] and "--statistcs" in lines[0]
    assert [line.strip() for line in lines if "tip:" in line] == ["tip: a similar argument exists: '--statistics'"
                                                                  if tool == "ruff" else
                                                                  "tip: a similar option exists: '--statistics'"]
    assert lines[-1].startswith("For more information, try '") and lines[-1].endswith("--help'.")
    assert len(lines) <= 7  # not the whole usage


@both
def test_statistics_rows_then_the_summary_and_json_fixable_count(tool, tree):
    safe, unsafe, code, unsafe_code = TOOLS[tool]
    out = run(tool, "--statistics", safe, unsafe, cwd=tree)
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    rows = sorted(lines[:2], key=lambda line: line.split("\t")[1] != code)  # ties in code order, whichever it is
    assert re.fullmatch(rf"1\t{code}\t\[\*\] [a-z-]+", rows[0]) and re.fullmatch(rf"1\t{unsafe_code}\t\[ \] [a-z-]+",
                                                                                   rows[1])
    assert re.match(r"Found 2 (errors|problems)", lines[2]) and lines[3].startswith("[*] 1 fixable with")
    import json

    rows = json.loads(run(tool, "--statistics", "--output-format", "json", safe, unsafe, cwd=tree).stdout)
    assert sorted((r["code"], r["fixable"], r["fixable_count"]) for r in rows) == sorted(
        [(code, True, 1), (unsafe_code, False, 0)])
    assert set(rows[0]) == {"code", "name", "count", "fixable", "fixable_count"}


@both
def test_concise_one_line_a_finding_with_star_then_the_summary(tool, tree):
    safe, unsafe, code, unsafe_code = TOOLS[tool]
    lines = run(tool, "--output-format", "concise", safe, unsafe, cwd=tree).stdout.splitlines()
    assert re.match(rf"{safe}:\d+:\d+: {code} \[\*\] \S", lines[0]), lines[0]
    assert re.match(rf"{unsafe}:\d+:\d+: {unsafe_code} \S", lines[1]) and "[*]" not in lines[1]
    assert re.match(r"Found 2 (errors|problems)", lines[2])
    clean = run(tool, "--output-format", "concise", "ok.py", cwd=tree)
    assert clean.returncode == 0 and clean.stdout.startswith("All checks passed")


@both
def test_stdin_filename_without_dash_reads_stdin(tool, tree):
    safe, _, code, _ = TOOLS[tool]
    out = run(tool, "--output-format", "concise", "--stdin-filename", f"pkg/{safe}", cwd=tree,
              stdin=(tree / safe).read_text())
    assert out.returncode == 1
    assert out.stdout.startswith(f"pkg/{safe}:") and f" {code} " in out.stdout.splitlines()[0]
    assert "ok.py" not in out.stdout  # not the directory


@both
def test_check_subcommand_and_quiet(tool, tree):
    safe, _, code, _ = TOOLS[tool]
    loud = run(tool, safe, cwd=tree)
    quiet = run(tool, "-q", safe, cwd=tree)
    assert quiet.returncode == loud.returncode == 1
    assert code in quiet.stdout and "Found" not in quiet.stdout and "fixable" not in quiet.stdout
    assert quiet.stdout.strip() == loud.stdout.split("Found ")[0].strip()
    assert run(tool, "-q", "ok.py", cwd=tree).stdout == ""
