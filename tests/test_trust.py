"""The trust boundaries (docs/threat-model.md): the linted tree, its configuration, caches others
can write and notebook JSON are untrusted input; a checkout cannot make cglint hang, exhaust
memory, write outside it, run its code, or drive the terminal. One test (at least) per rule
and per reproducer of issue 20."""

import json
import os
import resource
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cglint import cache, config, files
from tests.support import ENV

OP = ("import tensorflow as tf\n\n@tf.custom_gradient\ndef op(x):\n    y = tf.math.tan(x)\n"
      "    def grad(dy):\n        return dy * tf.math.cos(y)\n    return y, grad\n")


def cglint(*args, cwd, timeout=60, stdin=None, env=None):
    data = {"input": stdin} if isinstance(stdin, bytes) else {"input": stdin, "text": True}
    return subprocess.run([sys.executable, "-m", "cglint", *map(str, args)], capture_output=True, cwd=cwd,
                          timeout=timeout, env={**ENV, **(env or {})}, **data)


def no_traceback(run):
    err = run.stderr if isinstance(run.stderr, str) else run.stderr.decode()
    assert "Traceback" not in err, err


# ---- the guarded reader: regular files, a size cap, no FIFOs or devices --------------------------


def test_cache_entry_planted_as_a_link_to_dev_zero_is_a_miss(tmp_path):
    """Reproducer 01: a committed cache entry linking to /dev/zero is never read."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/op.py").write_text(OP)
    (tmp_path / "pyproject.toml").write_text("[tool.cglint]\n")
    settings = config.load(tmp_path)
    store = cache.Cache(tmp_path / ".cglint_cache", cache.settings_key(settings))
    entry = store._entry(str(tmp_path / "pkg/op.py"))
    entry.parent.mkdir(parents=True)
    (tmp_path / ".cglint_cache/CACHEDIR.TAG").write_text(cache._CACHEDIR_TAG)  # cglint's own cache, tampered with
    entry.symlink_to("/dev/zero")
    run = cglint("--output-format", "concise", "pkg", cwd=tmp_path, timeout=60)
    no_traceback(run)
    assert run.returncode == 1 and "pkg/op.py:7:21: CG005" in run.stdout, run.stderr
    assert not entry.is_symlink()  # replaced by the real entry, the link itself (not /dev/zero)
    assert json.loads(entry.read_text())["content"]


def test_reader_refuses_links_when_told_and_names_the_kind(tmp_path):
    (tmp_path / "real").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(files.ReadError, match="a symbolic link, not a cache entry"):
        files.read_bytes(str(tmp_path / "link"), what="a cache entry", follow=False)
    assert files.read_bytes(str(tmp_path / "link"))[0] == b"x"
    with pytest.raises(files.ReadError, match="embedded null byte"):
        files.read_bytes(str(tmp_path / "a\0b"))


@pytest.mark.parametrize("kind", ["device", "fifo", "huge"])
def test_baseline_named_by_the_tree_is_read_guarded(tmp_path, kind):
    """Reproducer 02: `baseline = "/dev/zero"` or a FIFO: one line, exit 2, at once."""
    (tmp_path / "op.py").write_text(OP)
    if kind == "device":
        where, message = "/dev/zero", "cglint: error: /dev/zero: a character device, not a baseline"
    elif kind == "fifo":
        os.mkfifo(tmp_path / "base.json")
        where, message = "base.json", "base.json: a FIFO (named pipe), not a baseline"
    else:
        with open(tmp_path / "base.json", "wb") as fh:
            fh.truncate(65 * 2**20)  # sparse
        where, message = "base.json", "over cglint's 64 MB limit"
    (tmp_path / "pyproject.toml").write_text(f'[tool.cglint]\nbaseline = "{where}"\n')
    run = cglint("--no-cache", "op.py", cwd=tmp_path, timeout=30)
    no_traceback(run)
    assert run.returncode == 2 and message in run.stderr, run.stderr


# ---- the guarded writer: never out of the project through a link ---------------------------------


def _repo_with_link(tmp_path, name):
    (tmp_path / "repo").mkdir()
    (tmp_path / "home").mkdir()
    (tmp_path / "home/.bashrc").write_text("export PS1='$ '\n")
    (tmp_path / "repo/ops.py").write_text(OP)
    (tmp_path / "repo" / name).symlink_to("../home/.bashrc")
    return tmp_path / "repo"


@pytest.mark.parametrize("args", [["--output-file", "cglint.sarif", "--output-format", "sarif"],
                                  ["--write-baseline", "cglint.sarif"]])
def test_reports_and_baselines_never_follow_a_link_out_of_the_project(tmp_path, args):
    """Reproducer 03: a committed `cglint.sarif -> ~/.bashrc` is not written through."""
    repo = _repo_with_link(tmp_path, "cglint.sarif")
    run = cglint("--no-cache", *args, "ops.py", cwd=repo)
    no_traceback(run)
    assert run.returncode == 2
    assert "cglint.sarif: cannot write: a symbolic link to" in run.stderr and "not written" in run.stderr
    assert (tmp_path / "home/.bashrc").read_text() == "export PS1='$ '\n"


def test_prune_baseline_never_follows_a_link_out_of_the_project(tmp_path):
    repo = _repo_with_link(tmp_path, "base.json")
    (tmp_path / "home/.bashrc").write_text(json.dumps({"version": 1, "findings": [
        {"path": "gone.py", "code": "CG005", "line_hash": "0"}]}))
    before = (tmp_path / "home/.bashrc").read_text()
    run = cglint("--no-cache", "--baseline", "base.json", "--prune-baseline", "ops.py", cwd=repo)
    assert run.returncode == 2 and "base.json: cannot write: a symbolic link to" in run.stderr, run.stderr
    assert (tmp_path / "home/.bashrc").read_text() == before


def test_trace_output_file_never_follows_a_link_out_of_the_project(tmp_path):
    repo = _repo_with_link(tmp_path, "trace.json")
    (repo / "pyproject.toml").write_text("[tool.cglint]\n")
    run = cglint("trace", "--output-file", "trace.json", "--", sys.executable, "-c", "pass", cwd=repo, timeout=120)
    assert run.returncode == 2 and "trace.json: cannot write: a symbolic link to" in run.stderr, run.stderr
    assert (tmp_path / "home/.bashrc").read_text() == "export PS1='$ '\n"


def test_a_link_that_stays_inside_is_followed_and_kept(tmp_path):
    (tmp_path / "reports").mkdir()
    (tmp_path / "latest.txt").symlink_to("reports/r.txt")
    (tmp_path / "op.py").write_text(OP)
    run = cglint("--no-cache", "--output-file", "latest.txt", "op.py", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    assert (tmp_path / "latest.txt").is_symlink() and "CG005" in (tmp_path / "reports/r.txt").read_text()


def test_fix_of_a_directory_never_writes_outside_it_through_a_link(tmp_path):
    """Reproducer 04 (first half): `--fix tree/` leaves `outside/target.py` alone."""
    (tmp_path / "tree").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside/target.py").write_text(OP)
    (tmp_path / "tree/link.py").symlink_to("../outside/target.py")
    (tmp_path / "tree/inner.py").write_text(OP)
    (tmp_path / "tree/alias.py").symlink_to("inner.py")  # inside: fixed through the link
    run = cglint("--no-cache", "--fix", "tree", cwd=tmp_path)
    assert run.returncode == 2
    # The link out of the named directory is not even read (the walk does not follow it).
    assert "tree/link.py: a symbolic link leading out of tree; not followed" in run.stderr
    assert (tmp_path / "outside/target.py").read_text() == OP
    assert "cos(y)" not in (tmp_path / "tree/inner.py").read_text()
    assert (tmp_path / "tree/alias.py").is_symlink()


def test_symlinked_cache_directory_is_not_used(tmp_path):
    """Reproducer 04 (second half): a committed `.cglint_cache -> elsewhere` gets no writes."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree/op.py").write_text(OP)
    (tmp_path / "tree/pyproject.toml").write_text("[tool.cglint]\n")
    (tmp_path / "tree/.cglint_cache").symlink_to("../elsewhere")
    run = cglint(".", cwd=tmp_path / "tree")
    assert run.returncode == 1
    assert "cglint: warning: cache directory" in run.stderr and "is a symbolic link; not used" in run.stderr
    assert list((tmp_path / "elsewhere").iterdir()) == []


# ---- caches others can write ---------------------------------------------------------------------


def _poisoned(tmp_path, mode):
    proj, shared = tmp_path / "proj", tmp_path / "shared"
    (proj / "pkg").mkdir(parents=True)
    (proj / "pkg/op.py").write_text(OP)
    (proj / "pyproject.toml").write_text("[tool.cglint]\n")
    settings = config.load(proj)
    store = cache.Cache(shared, cache.settings_key(settings))
    store.directory.mkdir(parents=True)
    op = proj / "pkg/op.py"
    fake = {"line": 1, "column": 1, "end_line": 1, "end_column": 2, "code": "CG005", "name": "output-derivative",
            "severity": "error", "message": "ok \x1b]0;pwned\x07\x1b[2K",
            "fix": {"applicability": "safe", "description": "x", "json_edits": [
                {"content": "import os; os.system('id')\n", "location": {"row": 1, "column": 1},
                 "end_location": {"row": 1, "column": 1}}]}}
    entry = {"key": store._file_key(settings.codes_for(str(op))), "content": cache._digest(OP),
             "parsed": True, "warnings": [], "diagnostics": [fake]}
    store._entry(str(op)).write_text(json.dumps(entry))
    (shared / "CACHEDIR.TAG").write_text(cache._CACHEDIR_TAG)  # a cache of cglint's, whoever wrote the entry
    os.chmod(shared, mode)
    return proj, shared


def test_cache_writable_by_others_is_not_used(tmp_path):
    """Reproducer 05: a shared cache directory (mode 777) decides nothing."""
    proj, shared = _poisoned(tmp_path, 0o777)
    run = cglint("--output-format", "concise", ".", cwd=proj, env={"CGLINT_CACHE_DIR": str(shared)})
    assert run.returncode == 1
    assert "pkg/op.py:7:21: CG005" in run.stdout and "pwned" not in run.stdout
    assert run.stderr.count("\n") == 1 and "is writable by others; not used" in run.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory another user's needs root")
def test_cache_owned_by_someone_else_is_not_used(tmp_path):
    proj, shared = _poisoned(tmp_path, 0o755)
    os.chown(shared, 12345, 12345)
    run = cglint("--output-format", "concise", ".", cwd=proj, env={"CGLINT_CACHE_DIR": str(shared)})
    assert "pwned" not in run.stdout and "is not owned by you; not used" in run.stderr


def test_cache_entries_are_validated_and_what_they_say_is_escaped(tmp_path):
    """The user's own cache, written by anyone with the user's rights: entries whose fields are
    malformed are misses; a well-formed message still reaches the terminal escaped."""
    proj, shared = _poisoned(tmp_path, 0o755)
    run = cglint("--output-format", "concise", ".", cwd=proj, env={"CGLINT_CACHE_DIR": str(shared)})
    assert "\x1b" not in run.stdout and "ok \\x1b]0;pwned\\x07\\x1b[2K" in run.stdout
    codes = {"CG005"}
    good = {"line": 1, "column": 1, "end_line": 1, "end_column": 2, "code": "CG005", "name": "n",
            "severity": "error", "message": "m"}
    assert cache._valid(dict(good), codes)
    for bad in ({"line": "1"}, {"line": -1}, {"code": "CG999"}, {"code": "X"}, {"message": 3},
                {"fix": {"applicability": "always", "description": "", "json_edits": []}},
                {"fix": {"applicability": "safe", "description": "", "json_edits": [{"content": 1}]}}):
        with pytest.raises(TypeError):
            cache._valid({**good, **bad}, codes)


# ---- no code from the current directory -----------------------------------------------------------


def test_python_m_cglint_never_imports_from_the_current_directory(tmp_path):
    """Reproducer 06."""
    for name in ("dataclasses", "difflib", "tomllib", "json"):
        (tmp_path / f"{name}.py").write_text(f"open('MARK-{name}', 'w')\n")
    (tmp_path / "op.py").write_text(OP)
    run = cglint("--no-cache", "--diff", "op.py", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    assert not list(tmp_path.glob("MARK-*"))


# ---- control characters are escaped in every human-readable output --------------------------------


@pytest.mark.parametrize("fmt", ["text", "concise", "github"])
def test_terminal_escapes_in_the_linted_code_are_shown_escaped(tmp_path, fmt):
    """Reproducer 07."""
    (tmp_path / "op.py").write_text(OP.replace("cos(y)\n", "cos(y)  # \x1b]0;title\x07\x1b[2K\x9b1A\u202e\n"))
    run = cglint("--no-cache", "--output-format", fmt, "op.py", cwd=tmp_path)
    assert run.returncode == 1
    assert not any(c in run.stdout for c in "\x1b\x07\x9b\u202e"), run.stdout
    if fmt == "text":
        assert "# \\x1b]0;title\\x07\\x1b[2K\\x9b1A\\u202e" in run.stdout


def test_file_names_with_control_characters_are_escaped_in_messages(tmp_path):
    (tmp_path / "a\x1b[2Kb.py").symlink_to("/dev/null")
    run = cglint("--no-cache", ".", cwd=tmp_path)
    # Met while walking, the link out of the tree is not followed: the message names it, escaped.
    assert run.returncode == 2 and "a\\x1b[2Kb.py: a symbolic link leading out of" in run.stderr
    assert "\x1b" not in run.stderr


# ---- no data loss: stdin keeps its bytes, the writer keeps what the file was --------------------


def test_stdin_fix_keeps_encoding_cookie_bom_and_line_endings(tmp_path):
    """Reproducer 09 (a, c): a latin-1 buffer with its cookie, a BOM, CRLF."""
    latin = OP.replace("import tensorflow as tf\n", "# -*- coding: latin-1 -*-\nimport tensorflow as tf\nN = 'caf\xe9'\n")
    data = latin.replace("\n", "\r\n").encode("latin-1")
    # CG005's fix only (`cos(x)` is still not tan's derivative: CG019 says so after it)
    run = cglint("-", "--fix", "--select", "CG005", "--stdin-filename", "op.py", cwd=tmp_path, stdin=data)
    assert run.returncode == 0, run.stderr
    assert run.stdout == data.replace(b"cos(y)", b"cos(x)")
    bom = b"\xef\xbb\xbf" + OP.encode()
    run = cglint("-", "--fix", "--stdin-filename", "op.py", cwd=tmp_path, stdin=bom)
    assert run.stdout == bom.replace(b"cos(y)", b"cos(x)")
    clean = b"\xef\xbb\xbfx = 1\r\n"  # nothing to fix: the bytes as they came
    assert cglint("-", "--fix", "--stdin-filename", "x.py", cwd=tmp_path, stdin=clean).stdout == clean


def test_stdin_that_is_not_valid_utf8_is_cg000_and_echoed_unchanged(tmp_path):
    """Reproducer 09 (b): as a path would be, CG000 "cannot read"; --fix echoes the bytes."""
    bad = b'x = "\xff\xfe"\n' + OP.encode()
    run = cglint("-", "--fix", "--stdin-filename", "bad.py", "--output-format", "concise", cwd=tmp_path, stdin=bad)
    assert run.returncode == 1 and run.stdout == bad
    assert b"bad.py:1:1: CG000 cannot read: not valid UTF-8 (byte 5)" in run.stderr
    run = cglint("-", "--stdin-filename", "bad.py", "--output-format", "concise", cwd=tmp_path, stdin=bad)
    assert run.returncode == 1 and run.stdout.startswith(b"bad.py:1:1: CG000 cannot read")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_signals_during_fix_leave_no_temporary_file(tmp_path, sig):
    """Reproducer 17: SIGTERM and SIGHUP clean up as SIGINT does; the files are old or new."""
    body = OP + "".join(f"\ndef helper_{k}(a):\n    return a + {k}\n" for k in range(150))
    for attempt in range(3):
        tree = tmp_path / f"tree{attempt}"
        tree.mkdir()
        for i in range(12):
            (tree / f"m{i}.py").write_text(body)
        proc = subprocess.Popen([sys.executable, "-m", "cglint", "--no-cache", "--fix", str(tree)], env=ENV,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seen = False
        while proc.poll() is None and not seen:
            seen = any(n.endswith(".cglint-tmp") for n in os.listdir(tree))
        if seen:
            proc.send_signal(sig)
        assert proc.wait(60) in ((2,) if seen else (0, 2))
        assert not [n for n in os.listdir(tree) if n.endswith(".cglint-tmp")]
        assert all((tree / f"m{i}.py").read_text() in (body, body.replace("cos(y)", "cos(x)")) for i in range(12))
        if seen:
            return
    pytest.skip("the run ended before a temporary file was seen")


def test_writer_keeps_setuid_owner_and_extended_attributes(tmp_path):
    """Reproducer 18: chmod after chown, so setuid survives; xattrs copied."""
    target = tmp_path / "f.py"
    target.write_text("old\n")
    if os.geteuid() == 0:
        os.chown(target, 1234, 5678)
    os.chmod(target, 0o4751)
    try:
        os.setxattr(target, "user.tag", b"keep")
        tagged = True
    except OSError:  # a file system without user xattrs
        tagged = False
    files.write(str(target), "new\n")
    st = os.stat(target)
    assert target.read_text() == "new\n" and stat.S_IMODE(st.st_mode) == 0o4751
    if os.geteuid() == 0:
        assert (st.st_uid, st.st_gid) == (1234, 5678)
    if tagged:
        assert os.getxattr(target, "user.tag") == b"keep"


def test_fix_refuses_to_split_hard_links(tmp_path):
    """Reproducer 18: a file with another name is not replaced (both names keep one text)."""
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree/op.py").write_text(OP)
    os.link(tmp_path / "tree/op.py", tmp_path / "same.py")
    run = cglint("--no-cache", "--fix", "tree", cwd=tmp_path)
    assert run.returncode == 2 and "tree/op.py: has 2 hard links (replacing it would split them); not written" \
        in run.stderr, run.stderr
    assert os.stat(tmp_path / "same.py").st_nlink == 2 and (tmp_path / "same.py").read_text() == OP


# ---- notebook JSON and files Python refuses ------------------------------------------------------

NB_OP = [line + "\n" for line in OP.splitlines()]


def _notebook(cells_json: str) -> str:
    return ('{"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3", '
            '"language": "python", "display_name": "P"}}, ' + cells_json + "}\n")


def _cell(source, i=1):
    return {"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None, "outputs": [], "source": source}


@pytest.mark.parametrize("tail, reason", [
    (', "n": ' + "9" * 5000, "Exceeds the limit (4300 digits)"),  # reproducer 10
    (', "n": NaN', "NaN is not JSON"),
])
def test_notebook_json_python_would_choke_on_is_one_cg000(tmp_path, tail, reason):
    text = _notebook('"cells": ' + json.dumps([_cell(NB_OP)]))
    (tmp_path / "nb.ipynb").write_text(text[:-2] + tail + "}\n")
    (tmp_path / "op.py").write_text(OP)
    run = cglint("--no-cache", "--output-format", "concise", ".", cwd=tmp_path)
    no_traceback(run)
    assert run.returncode == 1 and "op.py:7:21: CG005" in run.stdout
    assert "nb.ipynb:1:1: CG000 cannot read notebook: not valid JSON: " in run.stdout and reason in run.stdout


def test_notebook_with_a_duplicate_key_is_cg000_and_never_written(tmp_path):
    """Reproducer 11: Python keeps the last `cells`, the writer would edit the first."""
    text = _notebook('"cells": ' + json.dumps([_cell(["print('ignored')\n"], 7)]) + ', "cells": '
                     + json.dumps([_cell(NB_OP)]))
    (tmp_path / "dup.ipynb").write_text(text)
    run = cglint("--no-cache", "--fix", "--output-format", "concise", "dup.ipynb", cwd=tmp_path)
    assert run.returncode == 1
    assert "dup.ipynb:1:1: CG000 cannot read notebook: not valid JSON: the key 'cells' appears twice" in run.stdout
    assert (tmp_path / "dup.ipynb").read_text() == text and "fixed" not in run.stderr


@pytest.mark.parametrize("name, data, where", [
    ("nul.py", b'import tensorflow as tf\nS = "a\x00b"\n', "1:1"),
    ("double_bom.py", b"\xef\xbb\xbf\xef\xbb\xbfimport tensorflow as tf\n", "1:1"),
    pytest.param("nested_fstring.py", b'import tensorflow as tf\nS = f"{f"{1}"}"\n', "2:",
                 marks=pytest.mark.skipif(sys.version_info >= (3, 12), reason="valid from Python 3.12")),
])
def test_files_python_refuses_are_cg000_and_never_fixed(tmp_path, name, data, where):
    """Reproducer 19: the running Python's parser is the judge, before any rule."""
    data += OP.split("\n", 1)[1].encode()
    (tmp_path / name).write_bytes(data)
    with pytest.raises((SyntaxError, ValueError)):
        compile(data, name, "exec")
    run = cglint("--no-cache", "--fix", "--output-format", "concise", name, cwd=tmp_path)
    assert run.returncode == 1
    findings = [line for line in run.stdout.splitlines() if line.startswith(name)]
    assert len(findings) == 1 and findings[0].startswith(f"{name}:{where}") and " CG000 " in findings[0]
    assert (tmp_path / name).read_bytes() == data


# ---- globs: invalid ones are a configuration error, matching is linear ----------------------------


@pytest.mark.parametrize("table", ['extend-exclude = ["[z-a]"]', '[tool.cglint.per-file-ignores]\n"[z-a]" = ["CG005"]'])
def test_invalid_glob_is_a_one_line_configuration_error(tmp_path, table):
    """Reproducer 14 (a)."""
    (tmp_path / "op.py").write_text(OP)
    (tmp_path / "pyproject.toml").write_text(f"[tool.cglint]\n{table}\n")
    run = cglint("--no-cache", ".", cwd=tmp_path)
    no_traceback(run)
    assert run.returncode == 2 and "cglint: error: invalid glob '[z-a]' in `" in run.stderr
    assert "bad character range z-a" in run.stderr and str(tmp_path / "pyproject.toml") in run.stderr


@pytest.mark.parametrize("pattern", ["[!]", "[[:alpha:]]"])
def test_odd_classes_are_literal_and_warn_nothing(tmp_path, pattern):
    """Reproducer 14 (a, b): `[!]` never closes (literal), `[[:alpha:]]` is a class then `]`."""
    (tmp_path / "op.py").write_text(OP)
    (tmp_path / "pyproject.toml").write_text(f'[tool.cglint]\nextend-exclude = ["{pattern}"]\n')
    run = cglint("--no-cache", ".", cwd=tmp_path)
    assert run.returncode == 1 and run.stderr == ""


def test_globs_with_many_double_stars_match_in_linear_time():
    """Reproducer 14 (c): `**a**a...**b` against a long name took 38 s (regex backtracking)."""
    glob = config.Glob("**a" * 9 + "**b")
    start = time.process_time()  # CPU time: what the pattern costs, whatever the machine's load
    assert not glob.matches("a" * 400, False)
    assert glob.matches("a" * 9 + "b", False)
    assert time.process_time() - start < 1.0
    cases = [("*.py", "a/b/c.py", True), ("src/*.py", "src/x/a.py", False), ("**/gen/*.py", "gen/x.py", True),
             ("x/**/y/**/z*", "x/1/y/2/3/zq", True), ("x/**/y/**/z*", "x/1/y/2/3/q", False),
             ("*a*b*c", "zz/xaybzc", True), ("*a*b*c", "xa/ybzc", False), ("[!a]b", "ab", False)]
    for pattern, path, expected in cases:
        assert config.Glob(pattern).matches(path, False) is expected, pattern


# ---- deep expressions libcst would recurse on ---------------------------------------------------

STRCAT = OP.replace("        return dy", "        s = (" + ' "a"' * 400 + ")\n        return dy")


# (the fix makes `cos(x)`, which is still not tan's derivative: CG019 then says so, not checked here)
@pytest.mark.parametrize("args", [["--output-format", "json"], ["--output-format", "sarif"], ["--diff"],
                                  ["--fix", "--select", "CG005"]])
def test_400_concatenated_strings_are_no_recursion_error(tmp_path, args):
    """Reproducer 20: libcst nests implicit concatenation one level per string."""
    (tmp_path / "m.py").write_text(STRCAT)
    run = cglint("--no-cache", *args, "m.py", cwd=tmp_path, timeout=120)
    no_traceback(run)
    if "--fix" in args:
        assert run.returncode == 0 and (tmp_path / "m.py").read_text() == STRCAT.replace("cos(y)", "cos(x)")
    else:
        assert run.returncode == 1 and ("CG005" in run.stdout or "+        return dy * tf.math.cos(x)" in run.stdout)


# ---- processes: nothing left behind -------------------------------------------------------------


@pytest.mark.skipif(not os.path.exists("/usr/bin/prlimit"), reason="needs prlimit")
def test_a_tight_address_space_limit_is_one_error_and_leaves_no_process(tmp_path):
    """Round 3's reproducer 16 (50 MiB), round 4's (120-200 MiB): cglint's libraries do not load
    in so little address space (OpenBLAS aborts while numpy loads): one error naming the limit,
    exit 2, before any worker starts; `cglint ... | cat` returns (no process holds the pipe)."""
    (tmp_path / "pkg").mkdir()
    for i in range(30):
        (tmp_path / f"pkg/op{i}.py").write_text(OP)
    proc = subprocess.Popen(["prlimit", f"--as={50 << 20}", sys.executable, "-m", "cglint", "--no-cache", "--jobs", "2",
                             "pkg"], cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=60)  # returns only when every holder of the pipes is gone
    finally:
        left = subprocess.run(["pgrep", "-s", str(proc.pid)], capture_output=True, text=True).stdout.split()
        for pid in left:
            os.kill(int(pid), signal.SIGKILL)
    assert not left
    assert b"Traceback" not in err and proc.returncode == 2
    assert err == (b"cglint: error: cglint needs about 256 MiB of address space; the limit set outside cglint "
                   b"(ulimit -v, prlimit --as) is 50 MiB\n")


def test_pool_that_cannot_start_falls_back_to_this_process(tmp_path, monkeypatch):
    """A process or thread limit (a container's pids limit) that stops the pool's threads: the
    run lints in this process, with one warning, and reports every file."""
    from cglint import batch

    from inprocess import cglint as cglint_here

    def refuse(n):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(batch, "_can_start_threads", refuse)
    (tmp_path / "pkg").mkdir()
    for i in range(30):
        (tmp_path / f"pkg/op{i}.py").write_text(OP)
    run = cglint_here("--no-cache", "--jobs", "2", "--output-format", "concise", "pkg", cwd=tmp_path)
    assert "cglint: warning: cannot start 2 worker processes (can't start new thread); linting in this process" \
        in run.stderr
    assert run.returncode == 1 and run.stdout.count(": CG005") == 30, run.stderr


# ---- the language server under hostile clients ---------------------------------------------------


def _frame(obj):
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"processId": None, "rootUri": None, "capabilities": {}}}


@pytest.mark.parametrize("junk", [b"Content-Length: 1000000000000\r\n\r\n{}", b"Content-Length: -5\r\n\r\n{}"])
@pytest.mark.parametrize("first", [True, False])
def test_language_server_survives_hostile_framing(junk, first):
    """Reproducer 22: a huge or negative Content-Length is dropped, the server answers on."""
    messages = [junk, _frame(INITIALIZE)] if first else [_frame(INITIALIZE), junk]
    messages += [_frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}),
                 _frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}), _frame({"jsonrpc": "2.0", "method": "exit"})]
    run = subprocess.run([sys.executable, "-m", "cglint", "lsp"], input=b"".join(messages), capture_output=True,
                         timeout=120, env=ENV)
    assert b"MemoryError" not in run.stderr and b"Traceback" not in run.stderr, run.stderr[-2000:]
    replies = [json.loads(part.split(b"\r\n\r\n", 1)[1]) for part in run.stdout.split(b"Content-Length: ")[1:]]
    ids = {r.get("id") for r in replies}
    assert 3 in ids or 2 in ids, replies


def test_a_uri_that_maps_to_no_path_affects_only_itself():
    """Reproducer 21: `file:///tmp/%00/odd.py` is a buffer without a path, and the watch of
    pyproject.toml survives it (no ValueError from stat)."""
    from cglint.lsp import server

    assert server.fs_path("file:///tmp/%00/odd.py") is None
    assert server.fs_path("untitled:Untitled-1") is None
    assert server.fs_path("file:///tmp/ok.py") == "/tmp/ok.py"
    assert server._config_key("/tmp/\0/odd.py") == ()


# ---- linear cost on hostile inputs (bench/pathological.py times them at 1x and 10x) --------------


def test_notebook_magic_masking_is_linear_and_decides_as_before():
    """Reproducer 12: one round per `%` line inside brackets or a string took 138 s for 3,000."""
    from cglint import notebook

    src = 'template = r"""\n' + "% a LaTeX comment line\n" * 1500 + '"""\nx = (1\n' + "% 1\n" * 1500 + ")\n"
    start = time.process_time()
    code, masked = notebook.mask(src)
    assert time.process_time() - start < 5
    assert code == src and not masked  # every `%` line continues Python: nothing masked
    # A head that closes the bracket it stands in decides the lines after it again.
    src = "x = (1\n% 1\n%s)\n%matplotlib inline\n!ls\n"
    code, masked = notebook.mask(src)
    assert masked == {4, 5} and code.splitlines()[:3] == ["x = (1", "% 1", "%s)"]


def test_json_and_sarif_edits_cost_one_pass_per_module(tmp_path):
    """Reproducer 13: each fix's text edits re-generated the whole module (200 sites: 78 s)."""
    site = ('\n@tf.custom_gradient\ndef scale{i}(x, m):\n    def grad(dy):\n        return dy * m, None\n\n'
            '    return tf.identity(x), grad\n\n\nclass Head{i}(keras.layers.Layer):\n    def call(self, f):\n'
            '        return scale{i}(f, 3)\n')  # an int: CG015, with a fix (a float next to float32 is fine)
    (tmp_path / "sites.py").write_text("import keras\nimport tensorflow as tf\n" + "".join(site.format(i=i) for i in range(200)))
    out = {}
    for fmt in ("json", "sarif"):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        run = cglint("--isolated", "--no-cache", "--output-format", fmt, "sites.py", cwd=tmp_path, timeout=600)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime  # the child's CPU, not the clock
        assert run.returncode == 1 and cpu < 40, cpu
        out[fmt] = run.stdout
    report = json.loads(out["json"])
    fixed = [d for d in report["diagnostics"] if d.get("fix")]
    assert len(fixed) == 200 and all(d["fix"]["edits"] for d in fixed)


def test_colour_output_keeps_its_own_colours_and_escapes_the_code_s(tmp_path):
    (tmp_path / "op.py").write_text(OP.replace("cos(y)\n", "cos(y)  # \x1b]0;title\x07\x1b[2K\x1b[1A\n"))
    run = cglint("--no-cache", "--color", "always", "op.py", cwd=tmp_path)
    assert "\x1b[" in run.stdout  # report.style's colours
    assert "\\x1b]0;title\\x07\\x1b[2K\\x1b[1A" in run.stdout and "\x1b]" not in run.stdout and "\x1b[2K" not in run.stdout
