"""Suppressions as in ruff: line `# noqa`, file-level `# cglint: noqa[: CODES]`, unknown codes
warned and ignored, and --add-noqa."""

import json

from support import BAD, cglint

from cglint.engine import lint_source
from cglint.noqa import add_noqa


def codes(source):
    return [d.code for d in lint_source(source, "m.py").diagnostics]


def test_file_level_noqa():
    assert codes(BAD) == ["CG004", "CG005"]
    assert codes("# cglint: noqa\n" + BAD) == []
    assert codes(BAD + "# cglint: noqa: CG005\n") == ["CG004"]
    assert codes(BAD + "  #CGLINT:NOQA:CG004,CG005\n") == []
    # Not on a line of its own, or inside a string: not a directive.
    assert codes(BAD.replace("w = tf.Variable(1.0)", "w = tf.Variable(1.0)  # cglint: noqa")) == ["CG004", "CG005"]
    assert codes(BAD + 'DOC = """\n# cglint: noqa\n"""\n') == ["CG004", "CG005"]
    # flake8's file-level directive is for flake8.
    assert codes("# flake8: noqa\n" + BAD) == ["CG004", "CG005"]


def test_unknown_codes_are_warned_and_ignored_other_tools_codes_are_not_ours():
    src = BAD.replace("tf.square(tf.cos(y))", "tf.square(tf.cos(y))  # noqa: CG999, E501")
    result = lint_source(src, "m.py")
    assert [d.code for d in result.diagnostics] == ["CG004", "CG005"]  # CG999 silences nothing
    assert result.warnings == ["9: unknown rule code 'CG999' in `# noqa`, ignored"]
    src = BAD.replace("tf.square(tf.cos(y))", "tf.square(tf.cos(y))  # noqa: E501, CG005")
    result = lint_source(src, "m.py")
    assert [d.code for d in result.diagnostics] == ["CG004"] and result.warnings == []


def test_unknown_code_warning_on_the_command_line(tmp_path):
    (tmp_path / "m.py").write_text(BAD.replace("def grad(dy):", "def grad(dy):  # noqa: CG9"))
    run = cglint("m.py", cwd=tmp_path)
    assert "cglint: warning: m.py:8: unknown rule code 'CG9' in `# noqa`, ignored" in run.stderr
    (tmp_path / "m.py").write_text(BAD + "# cglint: noqa: junk here\n")
    run = cglint("m.py", cwd=tmp_path)
    assert "m.py:11: invalid `# cglint: noqa` directive" in run.stderr and run.returncode == 1


def test_add_noqa_merges_and_keeps_other_codes():
    src = BAD.replace("def grad(dy):", "def grad(dy):  # noqa: E501").replace(
        "tf.square(tf.cos(y))", "tf.square(tf.cos(y))  # why: output")
    result = lint_source(src, "m.py")
    new, changed, skipped = add_noqa(src, result.diagnostics)
    assert changed == 2 and skipped == []
    assert "    def grad(dy):  # noqa: E501, CG004\n" in new
    assert "tf.square(tf.cos(y))  # why: output  # noqa: CG005\n" in new
    assert codes(new) == []


def test_add_noqa_skips_lines_inside_strings():
    src = 'import tensorflow as tf\nx = """\nabc\n"""\n'
    fake = type("D", (), {"line": 2, "code": "CG005"})()
    new, changed, skipped = add_noqa(src, [fake])
    assert new == src and changed == 0 and skipped == [2]


def test_add_noqa_command(tmp_path):
    path = tmp_path / "m.py"
    path.write_bytes(BAD.replace("\n", "\r\n").encode())
    run = cglint("--add-noqa", "m.py", cwd=tmp_path)
    assert run.returncode == 0 and "Added 2 noqa directives." in run.stderr
    data = path.read_bytes()
    assert b"def grad(dy):  # noqa: CG004\r\n" in data and data.count(b"\r\n") == data.count(b"\n")
    assert cglint("m.py", cwd=tmp_path).returncode == 0
    assert json.loads(cglint("--output-format", "json", "m.py", cwd=tmp_path).stdout)["diagnostics"] == []
