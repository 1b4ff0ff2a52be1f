"""Which files to read, and the cheap text test that decides which of them to parse."""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from cglint import source as pysource

# Skipped when met while recursing; still linted when named on the command line.
DEFAULT_EXCLUDED_DIRS = frozenset(
    {".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "env", ".env", "__pycache__",
     "site-packages", "build", "dist", "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
)

# What a directory walk lints: Python sources and, as ruff does by default, notebooks.
SOURCE_SUFFIXES = (".py", ".pyi", ".ipynb")


def discover(
    paths: Iterable[str],
    excluded: Callable[[str, bool, bool], bool] | None = None,
    force_exclude: bool = False,
) -> Iterator[str]:
    """Python files and Jupyter notebooks (`.ipynb`) under `paths`, in a stable order. A named
    path that does not exist, and anything met while walking that is not a plain file (FIFOs,
    devices, dangling links), is yielded too: `read` says what is wrong with it, naming it, and
    the run goes on.

    `excluded(path, is_dir, parents)` (e.g. `Settings.is_excluded`) decides what to skip while
    walking; without it, DEFAULT_EXCLUDED_DIRS. A path named on the command line is linted
    even when excluded, unless `force_exclude` (pre-commit passes every staged file by name)."""
    for raw in paths:
        path = Path(raw)
        if force_exclude and excluded is not None and excluded(raw, path.is_dir(), True):
            continue
        if path.is_dir():
            yield from _walk(path, excluded)
        else:
            yield str(path)


def _walk(root: Path, excluded: Callable[[str, bool, bool], bool] | None) -> Iterator[str]:
    for dirpath, dirnames, filenames in os.walk(root):
        # A directory holding pyvenv.cfg is a virtualenv, whatever its name.
        dirnames[:] = sorted(
            d for d in dirnames
            if not (excluded(os.path.join(dirpath, d), True, False) if excluded else d in DEFAULT_EXCLUDED_DIRS)
            and not os.path.exists(os.path.join(dirpath, d, "pyvenv.cfg"))
        )
        for name in sorted(filenames):
            if name.endswith(SOURCE_SUFFIXES):
                full = os.path.join(dirpath, name)
                if excluded is None or not excluded(full, False, False):
                    yield os.path.normpath(full)


def may_hold_site(text: str) -> bool:
    """The prefilter: only a file that mentions `custom_gradient` or `gradient_override_map`
    (CG017), or one that may hold CG013's forgotten decorator, is parsed; every other file is
    read and never parsed."""
    return "custom_gradient" in text or "gradient_override_map" in text or may_forget_decorator(text)


# An indented `def name(` (a nested function) and a `return value, name` naming it: the text of
# a function returning `(y, grad_fn)`. Both patterns start with a literal word, which `re`
# finds with a fast substring scan; the indentation is checked on the few matches.
_DEF = re.compile(r"def[ \t]+(\w+)[ \t]*\(")
_RETURN = re.compile(r"return[ \t]+(?:\([^\n#]*,[ \t]*(\w+)[ \t]*\)|[^\n#]*,[ \t]*(\w+))[ \t]*(?:#[^\n]*)?(?=\r?\n|$)")


def may_forget_decorator(text: str) -> bool:
    """The cheap text test for CG013 in files that never mention `custom_gradient`: TensorFlow
    named (`tensorflow`, or `tf.` for snippets and notebook cells), and some nested def's name
    returned as the last element of a tuple."""
    if "tensorflow" not in text and "tf." not in text:
        return False
    nested = {m.group(1) for m in _DEF.finditer(text) if _indented(text, m.start())}
    if not nested:
        return False
    return any((m.group(1) or m.group(2)) in nested for m in _RETURN.finditer(text) if _indented(text, m.start()))


def _indented(text: str, at: int) -> bool:
    """Whether only spaces and tabs, at least one, stand between the line's start and `at`."""
    line = text.rfind("\n", 0, at) + 1
    return line < at and not text[line:at].strip(" \t")


UndecodableError = pysource.UndecodableError

# Larger files are reported (CG000 "cannot read"), not read: generated tables and data dumps
# never hold custom gradients, and reading /dev/zero-like files must end.
MAX_FILE_BYTES = 10 * 1024 * 1024


class ReadError(OSError):
    """A path that cannot be read as a file: the message names it and says why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(reason)
        self.path, self.reason = path, reason

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class TooLargeError(UndecodableError):
    pass


@dataclass(frozen=True)
class Read:
    """A file as read: its text, how to write it back, and what it was on disk (so a write can
    tell that it changed meanwhile)."""

    path: str
    text: str
    decoded: pysource.Decoded
    raw: bytes
    identity: tuple[int, int, int, int]  # st_dev, st_ino, st_size, st_mtime_ns
    mode: int


_KINDS = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory"}


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def read(path: str, limit: int = MAX_FILE_BYTES) -> Read:
    """Reads a regular file, never anything else: a FIFO is never opened (that would block),
    a device is never read (`/dev/zero` never ends). Raises ReadError (naming the path) for a
    missing, dangling, looping, unreadable or non-regular path; UndecodableError (including
    TooLargeError) for content cglint cannot take."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise ReadError(path, f"dangling symbolic link (to {os.readlink(path)})") from None
        raise ReadError(path, "no such file or directory") from None
    except OSError as exc:
        raise ReadError(path, _reason(exc)) from None
    if not stat.S_ISREG(st.st_mode):
        raise ReadError(path, f"{_kind(st.st_mode)}, not a Python file; skipped")
    if st.st_size > limit:
        raise TooLargeError(f"{_megabytes(st.st_size)}, over cglint's {_megabytes(limit)} limit for one file")
    try:
        # O_NONBLOCK: a FIFO put in the file's place after the stat cannot block the open.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise ReadError(path, _reason(exc)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ReadError(path, f"{_kind(st.st_mode)}, not a Python file; skipped")
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except ReadError:
        raise
    except OSError as exc:
        raise ReadError(path, _reason(exc)) from None
    finally:
        os.close(fd)
    if total > limit:
        raise TooLargeError(f"more than {_megabytes(limit)}, cglint's limit for one file")
    data = b"".join(chunks)
    decoded = pysource.decode(data)
    return Read(path, decoded.text, decoded, data, identity(st), stat.S_IMODE(st.st_mode))


def _megabytes(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n % 2**20 else f"{n // 2**20} MB"


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symbolic link loop (too many levels of symbolic links)"
    return (exc.strerror or type(exc).__name__).lower() if exc.strerror else str(exc)


def read_source(path: str) -> str:
    """Source text as Python reads it (BOM, coding cookie, else UTF-8). Newlines are kept as
    they are, so positions and fixes match the file on disk."""
    return read(path).text
