"""Hostile paths and writes that must never destroy (issue 14).

Every path that cannot be read as a Python file ends with one message naming it and exit 2,
and the rest of the run goes on; only regular files are read (a FIFO is never opened, a device
never read) and only regular files are replaced by a write."""

import os
import shutil
import stat
import subprocess
import sys
import threading

import pytest

from cglint import files, fix

BAD = ("import tensorflow as tf\n\n@tf.custom_gradient\ndef op(x):\n    y = tf.math.tan(x)\n"
       "    return y, lambda dy: dy * tf.math.cos(y)\n")
ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False


def cglint(*args, cwd, timeout=60):
    return subprocess.run([sys.executable, "-m", "cglint", "--isolated", "--output-format", "concise", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=timeout)


def project(tmp_path):
    (tmp_path / "ok.py").write_text(BAD)
    return tmp_path


def assert_reported(run, *messages):
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "Traceback" not in run.stderr
    for message in messages:
        assert f"cglint: error: {message}" in run.stderr, run.stderr
    assert "ok.py:6:31: CG005" in run.stdout  # the rest of the run went on


def test_fifo_named_or_found_is_never_opened(tmp_path):
    project(tmp_path)
    os.mkfifo(tmp_path / "pipe.py")
    assert_reported(cglint("pipe.py", "ok.py", cwd=tmp_path, timeout=30), "pipe.py: a FIFO (named pipe)")
    assert_reported(cglint(".", cwd=tmp_path, timeout=30), "pipe.py: a FIFO (named pipe), not a Python file; skipped")


def test_character_devices_are_never_read(tmp_path):
    project(tmp_path)
    os.symlink("/dev/zero", tmp_path / "zero.py")
    assert_reported(cglint("/dev/zero", "ok.py", cwd=tmp_path), "/dev/zero: a character device")
    assert_reported(cglint("zero.py", "ok.py", cwd=tmp_path), "zero.py: a character device, not a Python file; skipped")
    # Met while walking, a link leading out of the directory named is not followed at all.
    assert_reported(cglint(".", cwd=tmp_path), "zero.py: a symbolic link leading out of .; not followed")


def test_dangling_symlink_and_symlink_loop_are_named(tmp_path):
    project(tmp_path)
    os.symlink(tmp_path / "nowhere.py", tmp_path / "gone.py")
    os.symlink("loop_b.py", tmp_path / "loop_a.py")
    os.symlink("loop_a.py", tmp_path / "loop_b.py")
    run = cglint(".", cwd=tmp_path)
    assert_reported(run, f"gone.py: dangling symbolic link (to {tmp_path / 'nowhere.py'})",
                    "loop_a.py: symbolic link loop")


def test_missing_path_is_named_and_the_others_are_linted(tmp_path):
    project(tmp_path)
    assert_reported(cglint("no/such.py", "ok.py", cwd=tmp_path), "no/such.py: no such file or directory")


def test_directory_named_like_a_module_is_walked(tmp_path):
    (tmp_path / "x.py").mkdir()
    (tmp_path / "x.py" / "ok.py").write_text(BAD)
    run = cglint("x.py", cwd=tmp_path)
    assert run.returncode == 1 and "x.py/ok.py:6:31: CG005" in run.stdout, run.stderr


def test_unreadable_file_is_named(tmp_path):
    project(tmp_path)
    (tmp_path / "secret.py").write_text(BAD)
    (tmp_path / "secret.py").chmod(0)
    prefix = []
    if ROOT:  # root reads anything: drop the capabilities that let it
        if shutil.which("setpriv") is None:
            pytest.skip("needs setpriv to drop root's file-permission override")
        caps = "-dac_override,-dac_read_search"
        prefix = ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}"]
    run = subprocess.run([*prefix, sys.executable, "-m", "cglint", "--isolated", "--output-format", "concise", "."],
                         capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert_reported(run, "secret.py: permission denied")


def test_file_over_the_size_limit_is_a_diagnostic_not_a_read(tmp_path):
    project(tmp_path)
    with open(tmp_path / "huge.py", "wb") as fh:  # 200 MB, sparse: costs no disk
        fh.truncate(200 * 2**20)
    run = cglint(".", cwd=tmp_path)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "huge.py:1:1: CG000 cannot read: 200 MB, over cglint's 10 MB limit for one file" in run.stdout
    assert "ok.py:6:31: CG005" in run.stdout


def test_read_refuses_what_is_not_a_regular_file(tmp_path):
    os.mkfifo(tmp_path / "p.py")
    with pytest.raises(files.ReadError, match="FIFO"):
        files.read(str(tmp_path / "p.py"))
    with pytest.raises(files.ReadError, match="a directory"):
        files.read(str(tmp_path))
    (tmp_path / "big.py").write_bytes(b"x = 1\n" * 100)
    with pytest.raises(files.TooLargeError):
        files.read(str(tmp_path / "big.py"), limit=100)


# ---- writes ----------------------------------------------------------------------------------


def test_output_file_on_a_character_device_writes_in_place(tmp_path):
    project(tmp_path)
    try:
        os.mknod(tmp_path / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod needs root")
    run = cglint("--output-file", "null", "ok.py", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    assert stat.S_ISCHR(os.lstat(tmp_path / "null").st_mode)  # still the device, not a regular file


def test_output_file_on_a_fifo_is_written_in_place_or_refused(tmp_path):
    project(tmp_path)
    os.mkfifo(tmp_path / "out")
    run = cglint("--output-file", "out", "ok.py", cwd=tmp_path, timeout=30)  # nobody reads it
    assert run.returncode == 2 and "out: cannot write: a FIFO with no reader" in run.stderr
    got = []
    reader = threading.Thread(target=lambda: got.append(open(tmp_path / "out").read()))
    reader.start()
    try:
        for _ in range(100):  # the reader's open must come first
            try:
                fix.write_atomic(str(tmp_path / "out"), "report\n")
                break
            except files.ReadError:
                threading.Event().wait(0.05)
    finally:
        reader.join(10)
    assert got == ["report\n"] and stat.S_ISFIFO(os.lstat(tmp_path / "out").st_mode)


def test_output_file_through_a_symlink_keeps_the_link(tmp_path):
    project(tmp_path)
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "real.txt").write_text("old")
    os.symlink("reports/real.txt", tmp_path / "link.txt")
    run = cglint("--output-file", "link.txt", "ok.py", cwd=tmp_path)
    assert run.returncode == 1
    assert os.path.islink(tmp_path / "link.txt") and "CG005" in (tmp_path / "reports" / "real.txt").read_text()


def test_fix_never_writes_a_file_changed_or_deleted_since_it_was_read(tmp_path):
    path = tmp_path / "ops.py"
    path.write_text(BAD)
    read = files.read(str(path))
    new = fix.fix_source(read.text, str(path), unsafe=True).new_source
    path.write_text(BAD + "# edited meanwhile, and longer\n")
    with pytest.raises(files.ReadError, match="changed on disk since cglint read it; not written"):
        fix.write_back(read, new)
    assert path.read_text().endswith("# edited meanwhile, and longer\n")
    read = files.read(str(path))
    path.unlink()
    with pytest.raises(files.ReadError, match="deleted since cglint read it; not written"):
        fix.write_back(read, new)
    assert not path.exists()


def test_fix_on_a_read_only_file_is_reported_and_skipped(tmp_path):
    project(tmp_path)
    (tmp_path / "ro.py").write_text(BAD)
    (tmp_path / "ro.py").chmod(0o444)
    run = cglint("--fix", "--unsafe-fixes", ".", cwd=tmp_path)
    assert run.returncode == 2 and "cglint: error: ro.py: read-only; fixes not written" in run.stderr
    assert (tmp_path / "ro.py").read_text() == BAD  # untouched, even by root
    assert "tf.math.cos(x)" in (tmp_path / "ok.py").read_text()  # the others are fixed


def test_fix_keeps_mode_bom_and_line_endings(tmp_path):
    path = tmp_path / "ops.py"
    path.write_bytes(b"\xef\xbb\xbf" + BAD.replace("\n", "\r\n").encode())
    path.chmod(0o751)
    run = cglint("--fix", "--unsafe-fixes", "--select", "CG005", "ops.py", cwd=tmp_path)  # (CG019 after it: cos(x))
    assert run.returncode == 0, run.stderr
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") and b"tf.math.cos(x)" in data
    assert data.count(b"\r\n") == data.count(b"\n") == BAD.count("\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert [p.name for p in tmp_path.iterdir()] == ["ops.py"]  # no temporary file left behind


def test_an_imported_sibling_that_is_a_device_or_fifo_is_not_read(tmp_path):
    """The project index reads the modules a linted file imports through the guarded reader: a
    committed link to /dev/zero, or a FIFO, named like a sibling module costs nothing."""
    (tmp_path / "helpers.py").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "derivs.py")
    (tmp_path / "op.py").write_text("import tensorflow as tf\nfrom helpers import dtan\nfrom derivs import d2\n\n"
                                    "@tf.custom_gradient\ndef op(x):\n    y = tf.tan(x)\n"
                                    "    return y, lambda dy: dy * dtan(y)\n")
    run = cglint("--no-cache", "op.py", cwd=tmp_path, timeout=60)
    assert run.returncode == 0 and "All checks passed" in run.stdout, run.stderr
