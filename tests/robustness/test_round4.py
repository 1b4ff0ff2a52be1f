"""The round-4 reproducers (tests/robustness/round4/, copied from the audit with their headers)
run as written against the installed `cglint` (the one next to this interpreter); each test
asserts what the reproducer's header says should happen, on the lines the script prints about
cglint's own output (never on what TensorFlow writes).

The reproducers are examples of classes; the tests of each class live with the code
(tests/test_robustness_*.py, tests/robustness/test_regex_linear.py, ...). This file proves that
the examples themselves no longer fail.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent / "round4"
CGLINT = Path(sys.executable).parent / "cglint"
HAS_TF = importlib.util.find_spec("tensorflow") is not None
needs_tf = pytest.mark.skipif(not HAS_TF, reason="the reproducer runs --runtime or pytest --cglint: needs TensorFlow")
needs_cglint = pytest.mark.skipif(not CGLINT.exists(), reason=f"no installed cglint at {CGLINT}")
pytestmark = needs_cglint


def run(script: str, *args: str, cwd: Path | None = None, timeout: float = 600, path: Path | None = None,
        with_stderr: bool = False) -> str:
    """The reproducer's own stdout (what it says about cglint's exit status and output); with
    `with_stderr`, its stderr too (for a reproducer that leaves cglint's stderr uncaptured and
    runs no TensorFlow)."""
    path = path or HERE / script
    command = ["bash", str(path)] if script.endswith(".sh") else [sys.executable, str(path)]
    done = subprocess.run([*command, *args], text=True, timeout=timeout, cwd=cwd, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT if with_stderr else subprocess.PIPE)
    return done.stdout


def line(out: str, start: str) -> str:
    found = [x for x in out.splitlines() if x.startswith(start)]
    assert found, f"no line starting {start!r} in:\n{out}"
    return found[0]


def test_01_coding_cookie_naming_a_codec_that_raises_unicode_error():
    out = run("01_coding_cookie_unicodeerror_traceback.sh", str(CGLINT))
    assert "tracebacks: 0, findings printed: 1" in line(out, "tree with legacy.py: exit 1,"), out
    assert line(out, "stdin --fix:") == "stdin --fix: exit 1, bytes echoed: 26 (of 26), tracebacks: 0", out
    idna = line(out, "--fix on a '# coding: idna' file:")
    assert "tracebacks: 0" in idna and "cannot fix a file in the idna encoding" in idna, out


@pytest.mark.parametrize("script, size", [("02_cg013_prefilter_regex_quadratic.gen.py", "280"),
                                          ("03_import_regex_quadratic.gen.py", "50000")])
def test_02_03_prefilter_regexes_are_linear(tmp_path, script, size):
    """At the reproducer's size the quadratic patterns took 20 s (02) and 32 s (03) of CPU. A CPU
    limit of 15 s (prlimit: a resource limit, not a clock) kills a quadratic run; the linear one
    takes a fraction of a second."""
    if shutil.which("prlimit") is None:
        pytest.skip("needs prlimit")
    generated = tmp_path / run(script, size, cwd=tmp_path).strip()
    assert generated.is_file()
    done = subprocess.run(["prlimit", "--cpu=15", str(CGLINT), "--isolated", "--no-cache", str(generated.parent)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "All checks passed (1 file checked)" in done.stdout, (done.returncode, done.stderr)


def test_04_a_directory_tree_deeper_than_the_recursion_limit():
    out = run("04_deep_directory_recursionerror.sh", str(CGLINT))
    assert line(out, "exit ").startswith("exit 1, tracebacks: 0, findings printed: 1"), out


def test_05_sarif_for_a_file_name_that_is_not_utf8():
    out = run("05_sarif_non_utf8_filename_traceback.sh", str(CGLINT))
    for fmt in ("json", "sarif"):
        assert line(out, f"{fmt}:").startswith(f"{fmt}: exit 1, tracebacks: 0, report written: yes"), out


def test_06_a_committed_file_named_like_an_option_is_a_path(tmp_path):
    """The reproducer's local hook, with the args of the shipped .pre-commit-hooks.yaml (it was
    written with the args shipped then)."""
    if shutil.which("git") is None or not (CGLINT.parent / "pre-commit").exists():
        pytest.skip("needs git and pre-commit")
    hooks = (Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml").read_text()
    shipped = re.findall(r"^  args: (\[.*\])$", hooks, re.MULTILINE)
    assert shipped and all(a.endswith(", --]") for a in shipped), "every shipped hook ends its options with --"
    script = (HERE / "06_precommit_filename_option_injection.sh").read_text()
    assert "args: [--force-exclude]" in script
    patched = tmp_path / "06.sh"
    patched.write_text(script.replace("args: [--force-exclude]", f"args: {shipped[0]}"))
    done = subprocess.run(["bash", str(patched), str(CGLINT)], capture_output=True, text=True, timeout=900)
    out = done.stdout
    assert line(out, "with a file named --exit-zero:").startswith("with a file named --exit-zero: hook Failed"), out
    assert "(op.py has a CG005: 1 printed)" in out, out
    assert line(out, "with a file named --runtime:").startswith("with a file named --runtime: PWNED absent"), out


def test_07_no_write_through_a_link_out_of_the_checkout_whatever_the_config_directory():
    out = run("07_output_file_symlink_bypass_subdir_config.sh", str(CGLINT))
    assert 'now begins: export PS1="$ "' in out, out
    assert "exit 2" in out.splitlines(), out


def test_08_non_finite_baseline_count():
    out = run("08_baseline_count_infinity_traceback.sh", str(CGLINT))
    for value in ("Infinity", "1e400"):
        text = line(out, f"count {value}:")
        assert text.startswith(f"count {value}: exit 2, tracebacks: 0; cglint: error: "), out


def test_09_configured_baseline_outside_the_project_is_never_written():
    assert run("09_prune_baseline_writes_outside_project.sh", str(CGLINT)).strip() == "left alone"


@needs_tf
def test_10_garbage_in_the_runtime_results_file_and_the_trace_events(tmp_path):
    """Run with the text report: the concise one no longer lists runtime verdicts, which the
    reproducer counts (`vs autodiff`)."""
    script = (HERE / "10_runtime_results_file_garbage_traceback.sh").read_text()
    assert "--output-format concise" in script
    patched = tmp_path / "10.sh"
    patched.write_text(script.replace("--output-format concise", "--output-format text"))
    out = run("10.sh", str(CGLINT), timeout=900, path=patched)
    for case in ("a:", "b:"):
        text = line(out, case)
        assert "tracebacks: 0" in text and not text.startswith(f"{case} exit 2"), out
        assert "runtime lines: 0" not in text, out  # good.py's verdict is kept
    assert line(out, "trace, one non-object events line:").startswith(
        "trace, one non-object events line: exit 0, tracebacks: 0"), out


@needs_tf
def test_11_runtime_ends_processes_the_module_started_in_a_session_of_their_own():
    out = run("11_runtime_new_session_process_outlives_run.sh", str(CGLINT), timeout=900)
    assert line(out, "processes of the module still running") == \
        "processes of the module still running after cglint exited: none", out


def test_12_trace_passes_sigterm_to_the_command_and_still_reports():
    out = run("12_trace_sigterm_orphans_command.sh", str(CGLINT))
    assert line(out, "traced command").endswith("still running: no"), out
    assert line(out, "marker written") == "marker written after cglint had exited: no", out
    assert line(out, "cglint trace exit").startswith("cglint trace exit 143 "), out  # 128 + SIGTERM, the command's


def test_13_trace_of_a_script_without_a_shebang():
    out = run("13_trace_exec_format_error_traceback.sh", str(CGLINT))
    assert line(out, "exit") == ("exit 2, tracebacks: 0; cglint trace: error: ./run.sh: cannot execute: "
                                 "exec format error"), out


def test_14_language_server_survives_deep_json_before_the_first_open():
    out = run("14_lsp_deep_json_before_first_open_kills_server.py", str(CGLINT))
    assert out.count("(still serving)") == 3, out


def test_15_an_unreadable_directory_is_an_error():
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("as root, needs setpriv to drop the capabilities that bypass modes")
    out = run("15_unreadable_directory_all_checks_passed.sh", str(CGLINT))
    for path in ("proj", "proj/sub"):
        text = line(out, f"cglint {path}:")
        assert text.startswith(f"cglint {path}: exit 2;") and "permission denied" in text, out
        assert "All checks passed" not in text, out


def test_16_an_address_space_limit_is_named_once():
    if shutil.which("prlimit") is None:
        pytest.skip("needs prlimit")
    out = run("16_memory_limit_traceback.sh", str(CGLINT))
    for mib in (120, 160, 200):
        text = line(out, f"{mib} MiB:")
        assert text.startswith(f"{mib} MiB: exit 2, findings 0, 'internal error' lines 0, tracebacks 0; "
                               "cglint: error: cglint needs about 256 MiB of address space"), out
    assert line(out, "256 MiB:").startswith("256 MiB: exit 1, findings 3, 'internal error' lines 0, tracebacks 0"), out


def test_17_fix_never_rewrites_bytes_of_an_escape_codec_file():
    out = run("17_fix_rewrites_untouched_bytes_escape_codecs.sh", str(CGLINT))
    for codec in ("unicode_escape", "raw_unicode_escape", "utf-7"):
        text = line(out, f"{codec}:")
        before, after = re.search(r"was \[(.*)\], now \[(.*)\]", text).groups()
        assert f"{codec}: lines 10 -> 10;" in text and before == after, out


def test_18_stdin_has_the_file_size_limit():
    if not os.access("/usr/bin/time", os.X_OK):
        pytest.skip("needs GNU time at /usr/bin/time")
    out = run("18_stdin_no_size_limit.sh", str(CGLINT))
    peak = int(re.search(r"stdin: .* (\d+) KB peak", out).group(1))
    assert peak < 400_000, out  # was 3.8 GB: at most the 10 MB limit is read
    assert "CG000 cannot read: 28.6 MB, over cglint's 10 MB limit" in out, out


def test_19_a_link_out_of_the_tree_is_not_read():
    out = run("19_reads_through_symlinks_out_of_tree.sh", str(CGLINT))
    assert "AWS_SECRET" not in out, out
    assert "No problems found in the 0 files checked; 1 path could not be checked" in out, out


def test_20_a_coding_comment_in_pyproject_toml_is_a_comment():
    out = run("20_pyproject_coding_comment.sh", str(CGLINT))
    for cookie in ("undefined", "bogus-encoding"):
        assert line(out, f"cookie-like comment '{cookie}'").endswith("(valid TOML: yes): exit 0, tracebacks: 0; "), out


@needs_tf
def test_21_pytest_xdist_strict_collects_the_workers_verdicts():
    if importlib.util.find_spec("xdist") is None:
        pytest.skip("needs pytest-xdist")
    out = run("21_pytest_xdist_cglint_strict_false_pass.sh", str(CGLINT), timeout=900)
    assert line(out, "serial:").startswith("serial: exit 1;"), out
    assert line(out, "-n 2:").startswith("-n 2:   exit 1;"), out
    assert "no custom gradient was called" not in line(out, "-n 2:"), out


def test_22_a_configuration_of_another_user_above_the_project_is_ignored():
    if os.geteuid() != 0:
        pytest.skip("the reproducer gives the file to another user with chown: needs root")
    out = run("22_foreign_parent_pyproject_used.sh", str(CGLINT), with_stderr=True)
    assert "owned by another user (uid 1234) outside the project root" in out and "ignored" in out, out
    assert out.rstrip().endswith("exit 1"), out
