"""The command line, run as users run it: a child process, exit codes, output."""

import json
import subprocess
import sys

import pytest
from support import BAD, FIXTURES, cglint


def test_fixtures_report_every_code_and_exit_1():
    run = cglint("--output-format", "json", "fixtures/")
    assert run.returncode == 1
    out = json.loads(run.stdout)
    assert out["version"] == 1
    by_file = {}
    for d in out["diagnostics"]:
        by_file.setdefault(d["path"], set()).add(d["code"])
        notebook = {"cell"} if d["path"].endswith(".ipynb") else set()  # a notebook's findings name the cell
        assert set(d) == {"path", "line", "column", "end_line", "end_column", "code", "name", "severity",
                          "message", "fixable", "fix"} | notebook
    from cglint.rules import ALL_RULES

    every = {r.code for r in ALL_RULES}
    assert set().union(*by_file.values()) == every, "fixtures/ must show every rule code"
    for code in every:
        # Each rule's bad fixture shows its own code and nothing else.
        assert by_file[f"fixtures/rules/{code.lower()}_bad.py"] == {code}
    assert by_file["fixtures/seed/original.py"] >= {"CG001", "CG002", "CG004", "CG005"}
    assert by_file["fixtures/seed/seed_fix.py"] >= {"CG003", "CG004"}
    assert by_file["fixtures/notebooks/seed_op.ipynb"] == {"CG001", "CG002", "CG004", "CG005"}
    assert "fixtures/seed/correct.py" not in by_file
    assert not any(p.endswith("_good.py") for p in by_file)


def test_correct_file_exits_0():
    run = cglint("fixtures/seed/correct.py")
    assert run.returncode == 0, run.stdout
    assert "All checks passed" in run.stdout


def test_text_output_has_location_code_frame_and_summary(tmp_path):
    (tmp_path / "m.py").write_text(BAD)
    run = cglint("m.py", cwd=tmp_path)
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    assert lines[0].startswith("m.py:8:9: CG004 ")
    assert lines[1] == "   8 |     def grad(dy):"
    assert lines[2] == " " * 15 + "^^^^"
    assert "m.py:9:31: CG005 [*] " in run.stdout  # [*]: `--fix` can fix it
    assert lines[-2] == "Found 2 problems in 1 file."
    assert lines[-1] == ("[*] 1 fixable with the `--fix` option "
                         "(1 hidden fix can be enabled with the `--unsafe-fixes` option).")


def test_json_positions_are_one_based_with_exclusive_end(tmp_path):
    (tmp_path / "m.py").write_text(BAD)
    out = json.loads(cglint("--output-format", "json", "m.py", cwd=tmp_path).stdout)
    cg005 = next(d for d in out["diagnostics"] if d["code"] == "CG005")
    line = BAD.splitlines()[8]
    start = line.index("tf.cos(y)")
    assert (cg005["line"], cg005["column"], cg005["end_line"], cg005["end_column"]) == (9, start + 1, 9, start + 10)


def test_select_and_ignore(tmp_path):
    (tmp_path / "m.py").write_text(BAD)
    codes = lambda *a: {d["code"] for d in json.loads(cglint("--output-format", "json", *a, "m.py", cwd=tmp_path).stdout)["diagnostics"]}
    assert codes("--select", "CG005") == {"CG005"}
    assert codes("--ignore", "CG005") == {"CG004"}
    assert codes("--select", "CG00", "--ignore", "CG004,CG005") == set()


def test_noqa_suppresses_named_codes_only(tmp_path):
    src = BAD.replace("def grad(dy):", "def grad(dy):  # noqa: CG004").replace(
        "tf.square(tf.cos(y))", "tf.square(tf.cos(y))  # noqa: CG001, CG002")
    (tmp_path / "m.py").write_text(src)
    out = json.loads(cglint("--output-format", "json", "m.py", cwd=tmp_path).stdout)
    assert [d["code"] for d in out["diagnostics"]] == ["CG005"]
    (tmp_path / "m.py").write_text(src.replace("# noqa: CG001, CG002", "# noqa"))
    assert cglint("m.py", cwd=tmp_path).returncode == 0


def test_syntax_error_is_cg000_not_a_traceback(tmp_path):
    (tmp_path / "broken.py").write_text("import tensorflow as tf\n@tf.custom_gradient\ndef op(x:\n    pass\n")
    (tmp_path / "ok.py").write_text(BAD)
    run = cglint("--output-format", "json", ".", cwd=tmp_path)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    diags = json.loads(run.stdout)["diagnostics"]
    cg000 = [d for d in diags if d["code"] == "CG000"]
    assert len(cg000) == 1 and cg000[0]["path"] == "broken.py" and cg000[0]["line"] in (3, 4)
    assert {d["code"] for d in diags if d["path"] == "ok.py"} == {"CG004", "CG005"}


def test_undecodable_file_is_cg000(tmp_path):
    (tmp_path / "latin.py").write_bytes(b"# custom_gradient \xe9\xff\n")
    run = cglint("latin.py", cwd=tmp_path)
    assert run.returncode == 1 and "CG000" in run.stdout and "Traceback" not in run.stderr


def test_stdin_with_filename():
    run = cglint("-", "--stdin-filename", "pkg/ops.py", stdin=BAD)
    assert run.returncode == 1
    assert run.stdout.startswith("pkg/ops.py:8:9: CG004")


@pytest.mark.parametrize(
    "args,message",
    [
        (["no/such/path.py"], "no/such/path.py: no such file or directory"),
        (["--select", "CG999", "fixtures"], "unknown rule code or prefix: 'CG999'"),
        (["--explain", "XX1"], "unknown rule code"),
        (["--output-format", "yaml"], "invalid choice"),
        (["--runtime", "--runtime-timeout", "-1", "fixtures"], "expected a positive number of seconds, got '-1'"),
        (["--runtime", "-", "--stdin-filename", "x.py"], "--runtime needs files on disk, not '-' (stdin)"),
    ],
)
def test_usage_errors_exit_2_with_one_line(args, message):
    run = cglint(*args)
    assert run.returncode == 2
    assert message in run.stderr and "Traceback" not in run.stderr


def test_discovery_skips_virtualenvs_and_build_dirs(tmp_path):
    for d in ("build", "site-packages", ".git", "__pycache__", "myenv"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "m.py").write_text(BAD)
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text(BAD)
    paths = {d["path"] for d in json.loads(cglint("--output-format", "json", ".", cwd=tmp_path).stdout)["diagnostics"]}
    assert paths == {"src/m.py"}
    # Named explicitly, an excluded directory is linted.
    assert cglint("build", cwd=tmp_path).returncode == 1


def test_explain_and_list_rules():
    run = cglint("--explain", "cg005")
    assert run.returncode == 0
    assert run.stdout.startswith("# output-derivative (CG005)")
    assert "## Why is this bad?" in run.stdout and "## Use instead" in run.stdout
    listing = cglint("--list-rules").stdout.splitlines()
    assert listing[0].startswith("CG000  syntax-error")


def test_version_is_fast_and_import_does_not_load_tensorflow():
    run = subprocess.run([sys.executable, "-c", "import cglint.cli, cglint.engine, sys; "
                          "assert 'tensorflow' not in sys.modules, 'tensorflow imported'"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    run = cglint("--version")
    assert run.returncode == 0 and run.stdout.startswith("cglint ")


def test_pathological_nesting_is_cg000_and_the_run_goes_on(tmp_path):
    deep = "import tensorflow as tf\n@tf.custom_gradient\ndef f(x):\n    return " + "-" * 5000 + "x, lambda d: d\n"
    (tmp_path / "deep.py").write_text(deep)
    (tmp_path / "ok.py").write_text(BAD)
    run = cglint("--output-format", "concise", ".", cwd=tmp_path)
    assert run.returncode == 1 and "Traceback" not in run.stderr and "internal error" not in run.stderr
    assert "deep.py:1:1: CG000 cannot parse: nesting too deep" in run.stdout
    assert "ok.py:9:31: CG005" in run.stdout


def test_the_command_leaves_fast_with_all_its_output(tmp_path):
    # `cglint` exits without the interpreter's teardown (cli.entry): every byte of a large
    # report still reaches the pipe, an --output-file is complete, and the exit code is kept,
    # with Python's own buffering (PYTHONUNBUFFERED unset).
    from support import ENV, ROOT

    env = {k: v for k, v in ENV.items() if k != "PYTHONUNBUFFERED"}

    def run_cglint(*args):
        return subprocess.run([sys.executable, "-m", "cglint", "--isolated", "--no-cache", *map(str, args)],
                              capture_output=True, text=True, cwd=ROOT, env=env)

    site = ("@tf.custom_gradient\ndef sine_{i}(x):\n"
            "    return tf.sin(x), lambda dy: dy * np.cos(x.numpy())\n\n\n")
    (tmp_path / "many.py").write_text("import numpy as np\nimport tensorflow as tf\n\n\n"
                                      + "".join(site.format(i=i) for i in range(400)))
    run = run_cglint("--output-format", "json", tmp_path / "many.py")
    assert run.returncode == 1, run.stderr
    found = json.loads(run.stdout)["diagnostics"]
    assert len(found) == 800 and found[-1]["line"] == 4 + 5 * 399 + 3  # two findings per site
    run = run_cglint("--output-format", "json", "--output-file", tmp_path / "out.json", tmp_path / "many.py")
    assert run.returncode == 1, run.stderr
    assert json.loads((tmp_path / "out.json").read_text())["diagnostics"] == found
    (tmp_path / "ok.py").write_text("x = 1\n")
    run = run_cglint(tmp_path / "ok.py")  # a short report: all of it still in the buffer
    assert run.returncode == 0 and run.stdout.startswith("All checks passed")


# ---- what a ruff user expects (tests/test_ruff_conventions.py runs ruff beside these) --------


def test_unknown_option_is_a_short_error_with_a_tip():
    run = cglint("--statistcs", "fixtures/seed/correct.py")
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.splitlines() == ["cglint: error: unrecognized arguments: --statistcs", "",
                                       "  tip: a similar option exists: '--statistics'", "",
                                       "For more information, try 'cglint --help'."]
    run = cglint("--frobnicate")
    assert run.returncode == 2 and "tip: to pass '--frobnicate' as a path, use '-- --frobnicate'" in run.stderr
    assert "usage:" not in run.stderr
    run = cglint("trace", "--calss", "2", "--", "true")
    assert run.returncode == 2 and "tip: a similar option exists: '--calls'" in run.stderr


@pytest.mark.parametrize("option,tip", [
    ("--json", "a similar option exists: '--output-format json'"),  # not '--version'
    ("--format", "a similar option exists: '--output-format'"),
    ("--config-file", "a similar option exists: '--config'"),
    ("--timeout", "a similar option exists: '--runtime-timeout'"),
    ("--colour", "a similar option exists: '--color'"),
    ("--per-file-ignores", "'per-file-ignores' is a setting, not an option: set it under [tool.cglint] in "
                           "pyproject.toml"),
    ("--rtol", "'rtol' is a setting, not an option: set it under [tool.cglint.runtime] in pyproject.toml"),
    ("--verbose", "to pass '--verbose' as a path, use '-- --verbose'"),  # not '--version'
    ("--target-version", "to pass '--target-version' as a path, use '-- --target-version'"),
])
def test_an_unknown_option_gets_a_relevant_tip(option, tip):
    run = cglint(option, "fixtures/seed/correct.py")
    assert run.returncode == 2
    assert run.stderr.splitlines()[2] == f"  tip: {tip}", run.stderr


UNUSED_NOQA = """import tensorflow as tf


@tf.custom_gradient
def op(x):
    def grad(dy):
        return dy  # noqa: CG005

    return x, grad
"""


def test_every_code_is_accepted_by_select_cg100_as_ruff_takes_ruf100(tmp_path):
    """CG100 is selected by its code, as ruff's RUF100 (from the command line or the
    configuration); `CG` and `ALL` keep to the catalogue, which is what they selected before."""
    (tmp_path / "m.py").write_text(UNUSED_NOQA)
    for args in (["--extend-select", "CG100"], ["--select", "CG005,CG100"], ["--select", "CG1", "--extend-select",
                                                                            "CG005"]):
        run = cglint("--no-cache", "--output-format", "concise", *args, "m.py", cwd=tmp_path)
        assert run.returncode == 1, (args, run.stderr)
        assert run.stdout.splitlines()[0] == "m.py:7:20: CG100 [*] Unused `noqa` directive (unused: `CG005`)", args
    run = cglint("--no-cache", "--select", "CG100", "m.py", cwd=tmp_path)
    assert run.returncode == 0 and run.stderr == ""  # accepted (it judges the codes of rules that ran: none)
    run = cglint("--no-cache", "--select", "CG", "m.py", cwd=tmp_path)
    assert run.returncode == 0 and "CG100" not in run.stdout
    (tmp_path / "pyproject.toml").write_text('[tool.cglint]\nextend-select = ["CG100"]\n')
    run = cglint("--no-cache", "--output-format", "concise", "m.py", cwd=tmp_path)
    assert run.returncode == 1 and "CG100" in run.stdout, run.stdout + run.stderr
    run = cglint("--no-cache", "--ignore", "CG100", "m.py", cwd=tmp_path)
    assert run.returncode == 0, run.stdout


def test_check_is_accepted_as_in_ruff(tmp_path):
    (tmp_path / "m.py").write_text(BAD)
    run = cglint("check", "--output-format", "concise", "-q", ".", cwd=tmp_path)
    assert run.returncode == 1 and run.stderr == ""
    assert [line.split(": ")[0] for line in run.stdout.splitlines()] == ["m.py:8:9", "m.py:9:31"]
    (tmp_path / "check").mkdir()  # a directory named `check` is `./check`
    (tmp_path / "check" / "c.py").write_text(BAD)
    assert "check/c.py:8:9" in cglint("./check", cwd=tmp_path).stdout


def test_commands_are_words_for_the_options_they_stand_for(tmp_path):
    (tmp_path / "m.py").write_text(BAD)
    (tmp_path / "n.py").write_text(BAD)
    # `fix` is `--fix`: the same file afterwards, the same report
    by_option = cglint("--no-cache", "--fix", "--output-format", "concise", "m.py", cwd=tmp_path)
    by_word = cglint("fix", "--no-cache", "--output-format", "concise", "n.py", cwd=tmp_path)
    assert by_word.returncode == by_option.returncode == 1
    assert (tmp_path / "n.py").read_text() == (tmp_path / "m.py").read_text() != BAD
    assert by_word.stdout.replace("n.py", "m.py") == by_option.stdout
    assert cglint("explain", "CG005").stdout == cglint("--explain", "CG005").stdout != ""
    for word, option in (("settings", "--show-settings"), ("files", "--show-files"), ("rules", "--list-rules")):
        shown, asked = cglint("show", word, "m.py", cwd=tmp_path), cglint(option, "m.py", cwd=tmp_path)
        assert shown.returncode == asked.returncode == 0 and shown.stdout == asked.stdout != ""
    wrong = cglint("show", "colours", cwd=tmp_path)
    assert wrong.returncode == 2 and wrong.stdout == ""
    assert wrong.stderr.startswith("cglint: error: cglint show: say what to show: settings, files, rules")
    (tmp_path / "fix").mkdir()  # a directory named like a command is reached as `./fix`
    (tmp_path / "fix" / "f.py").write_text(BAD)
    run = cglint("./fix", cwd=tmp_path)
    assert run.returncode == 1 and "fix/f.py:8:9" in run.stdout and (tmp_path / "fix" / "f.py").read_text() == BAD


def test_stdin_filename_without_dash_reads_stdin(tmp_path):
    (tmp_path / "other.py").write_text(BAD.replace("ops", "other"))
    run = cglint("--stdin-filename", "pkg/ops.py", cwd=tmp_path, stdin=BAD)
    assert run.returncode == 1 and run.stdout.startswith("pkg/ops.py:8:9: CG004")
    assert "other.py" not in run.stdout
    run = cglint("--stdin-filename", "pkg/ops.py", "other.py", cwd=tmp_path, stdin="x = 1\n")
    assert run.returncode == 0 and "All checks passed" in run.stdout
    assert "ignoring other.py in favour of standard input" in run.stderr


def test_a_missing_path_never_comes_with_all_checks_passed(tmp_path):
    (tmp_path / "ok.py").write_text("x = 1\n")
    run = cglint("nope.py", "ok.py", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr == "cglint: error: nope.py: no such file or directory\n"
    assert "All checks passed" not in run.stdout
    assert run.stdout == ("No problems found in the 1 file checked; 1 path could not be checked "
                          "(see the errors above).\n")
    (tmp_path / "bad.py").write_text(BAD)
    run = cglint("--output-format", "concise", "nope.py", "bad.py", cwd=tmp_path)
    assert run.returncode == 2 and run.stdout.splitlines()[-1] == "1 path could not be checked (see the errors above)."


CG015 = (FIXTURES / "rules" / "cg015_bad.py").read_text()


def test_findings_show_a_short_title_detail_lines_and_the_fix():
    run = cglint("--isolated", "fixtures/rules/cg015_bad.py")
    lines = run.stdout.splitlines()
    assert lines[0] == ("fixtures/rules/cg015_bad.py:14:29: CG015 a Python number passed positionally to the "
                        "custom-gradient function `ste_sign` (parameter `clip_value`)")
    assert lines[1].startswith("  14 |") and lines[2].strip() == "^"
    assert lines[3].startswith("  TensorFlow converts every positional argument to a tensor")
    assert all(len(line) <= 92 for line in lines[3:])  # CG015's 500 characters, wrapped
    assert "  close over it instead (the forward takes only tensors)" in lines
    assert "help: Close over `clip_value`: the custom-gradient function takes only tensors" in lines
    assert "note: this is an unsafe fix (review it): apply it with `--fix --unsafe-fixes`" in lines
    # Every word of the message is still there, in order.
    message = json.loads(cglint("--isolated", "--output-format", "json", "fixtures/rules/cg015_bad.py").stdout)[
        "diagnostics"][0]["message"]
    shown = " ".join(" ".join(lines[:1] + lines[3:lines.index("help: Close over `clip_value`: the custom-gradient "
                                                                "function takes only tensors")]).split())
    assert shown.replace(";", "").replace(":", "").split() == [
        *"fixtures/rules/cg015_bad.py1429 CG015".split(), *message.replace(";", "").replace(":", "").split()]
    # A safe fix: `[*]` and its help line, no note.
    run = cglint("--isolated", "fixtures/rules/cg005_bad.py")
    assert " CG005 [*] " in run.stdout.splitlines()[0]
    assert "help: Evaluate the derivative at `x`, the input of `softplus`" in run.stdout and "note:" not in run.stdout


def test_colour_on_a_terminal_or_when_asked_plain_in_pipes(tmp_path):
    from support import ENV

    esc = "\x1b["
    assert esc not in cglint("fixtures/rules/cg005_bad.py").stdout  # a pipe
    assert esc in cglint("--color", "always", "fixtures/rules/cg005_bad.py").stdout
    assert esc in cglint("--color=always", "--output-format", "concise", "fixtures/rules/cg005_bad.py").stdout

    def env_run(**env):
        return subprocess.run([sys.executable, "-m", "cglint", "fixtures/rules/cg005_bad.py"], capture_output=True,
                              text=True, env={**ENV, "NO_COLOR": "", "FORCE_COLOR": "", **env}).stdout

    assert esc in env_run(FORCE_COLOR="1")
    assert esc not in env_run(FORCE_COLOR="1", NO_COLOR="1")
    out = tmp_path / "report.txt"  # a file named by --output-file stays plain
    cglint("--color", "auto", "--output-file", out, "fixtures/rules/cg005_bad.py")
    assert esc not in out.read_text()
    run = cglint("--color", "never", "fixtures/rules/cg005_bad.py")
    assert esc not in run.stdout and run.returncode == 1


def test_quiet_prints_the_findings_only(tmp_path):
    (tmp_path / "m.py").write_text(BAD)
    (tmp_path / "ok.py").write_text("x = 1\n")
    loud, quiet = cglint("m.py", cwd=tmp_path), cglint("-q", "m.py", cwd=tmp_path)
    assert quiet.returncode == 1 and quiet.stdout == loud.stdout.split("Found 2 problems")[0]
    assert cglint("--quiet", "ok.py", cwd=tmp_path).stdout == ""
    run = cglint("-q", "--fix", "--output-format", "json", "m.py", cwd=tmp_path)
    assert run.stderr == ""  # no "Fixed 1 problem" note


def test_diff_summaries(tmp_path):
    (tmp_path / "q.py").write_text(CG015)
    run = cglint("--diff", "q.py", cwd=tmp_path)
    assert run.returncode == 0 and run.stdout == ""
    assert run.stderr == "No problems would be fixed (1 fix available with `--unsafe-fixes`).\n"
    assert "+    return _ste_sign(x)" in cglint("--diff", "--unsafe-fixes", "q.py", cwd=tmp_path).stdout
    (tmp_path / "m.py").write_text(BAD)
    run = cglint("--diff", "m.py", cwd=tmp_path)
    assert run.stderr == "Would fix 1 problem in 1 file (1 fix available with `--unsafe-fixes`).\n"
    run = cglint("--diff", "--show-fixes", "m.py", cwd=tmp_path)
    assert run.stderr.count("Would fix") == 1, run.stderr  # the list says it once
    assert run.stderr.startswith("Would fix 1 problem:\n- m.py:\n")


def test_show_files_show_settings_and_exit_non_zero_on_fix(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.cglint]\nignore = ["CG004"]\nextend-exclude = ["gen/"]\n')
    (tmp_path / "gen").mkdir()
    (tmp_path / "gen" / "g.py").write_text(BAD)
    (tmp_path / "m.py").write_text(BAD)
    (tmp_path / "notes.txt").write_text("")
    run = cglint("--show-files", cwd=tmp_path)
    assert run.returncode == 0 and run.stdout == "m.py\n"
    run = cglint("--show-settings", "m.py", cwd=tmp_path)
    assert run.returncode == 0
    assert run.stdout.startswith('Resolved settings for: "m.py"\n')
    assert f'config_file = "{tmp_path / "pyproject.toml"}"' in run.stdout.splitlines()
    selected = next(line for line in run.stdout.splitlines() if line.startswith("select = "))
    assert '"CG005"' in selected and '"CG004"' not in selected
    assert 'extend_exclude = ["gen/"]' in run.stdout.splitlines()
    run = cglint("--fix", "--exit-non-zero-on-fix", "--select", "CG005", "m.py", cwd=tmp_path)
    assert run.returncode == 1 and "(1 fixed, 0 remaining)" in run.stdout
    run = cglint("--fix", "--exit-non-zero-on-fix", "--select", "CG005", "m.py", cwd=tmp_path)
    assert run.returncode == 0  # nothing left to change


def test_explain_by_code_or_name():
    by_name = cglint("--explain", "output-derivative")
    assert by_name.returncode == 0 and by_name.stdout == cglint("--explain", "CG005").stdout
    assert cglint("--explain", "unused-noqa").stdout.startswith("# unused-noqa (CG100)")
    run = cglint("--explain", "output-derivatives")
    assert run.returncode == 2 and "unknown rule code or name: 'output-derivatives'" in run.stderr
