"""Which files to read, and the cheap text test that decides which of them to parse."""

from __future__ import annotations

import contextlib
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


class Skipped(str):
    """A path met while walking that is not checked (a directory that cannot be listed, a
    symbolic link leading out of the directory named): a path like any other, whose read fails
    with `reason`, so that the run reports it as an error and never counts it as checked."""

    reason: str

    def __new__(cls, path: str, reason: str) -> "Skipped":
        self = super().__new__(cls, path)
        self.reason = reason
        return self

    def __reduce__(self):  # to a --jobs worker and back
        return (Skipped, (str(self), self.reason))


def _walk(root: Path, excluded: Callable[[str, bool, bool], bool] | None) -> Iterator[str]:
    """os.walk's order (a directory's files, then its subdirectories, sorted; links to
    directories not entered), without its recursion (a tree thousands of levels deep is walked
    like any other) and without its silence: a directory that cannot be listed, and a link to a
    file outside `root`, are yielded as `Skipped`."""
    top = os.path.realpath(root)
    stack: list[str] = [str(root)]
    while stack:
        dirpath = stack.pop()
        try:
            with os.scandir(dirpath) as entries:
                listed = [(e.name, _is_dir(e), e.is_symlink()) for e in entries]
        except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
            yield Skipped(os.path.normpath(dirpath), f"cannot list the directory: {_reason(exc)}")
            continue
        # A directory holding pyvenv.cfg is a virtualenv, whatever its name.
        dirnames = sorted(
            (n, link) for n, is_dir, link in listed if is_dir
            and not (excluded(os.path.join(dirpath, n), True, False) if excluded else n in DEFAULT_EXCLUDED_DIRS)
            and not os.path.exists(os.path.join(dirpath, n, "pyvenv.cfg"))
        )
        for name, _, link in sorted(e for e in listed if not e[1]):
            if name.endswith(SOURCE_SUFFIXES):
                full = os.path.join(dirpath, name)
                if excluded is None or not excluded(full, False, False):
                    if link and not inside(os.path.realpath(full), top):
                        # A checkout's link must not pull a file from outside it into the report.
                        yield Skipped(os.path.normpath(full), "a symbolic link leading out of "
                                      f"{os.path.normpath(root)}; not followed")
                    else:
                        yield os.path.normpath(full)
        stack.extend(os.path.join(dirpath, n) for n, link in reversed(dirnames) if not link)


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def may_hold_site(text: str) -> bool:
    """The prefilter: only a file that mentions `custom_gradient` or `gradient_override_map`
    (CG017, CG020), `recompute_grad` (CG021), a Defun's `python_grad_func`/`grad_func` (checked
    by `--runtime`), or one that may hold CG013's forgotten decorator, is parsed; every other
    file is read and never parsed."""
    return ("custom_gradient" in text or "gradient_override_map" in text or "grad_func" in text
            or "recompute_grad" in text or may_forget_decorator(text))


# An indented `def name(` (a nested function) and a `return value, name` naming it: the text of
# a function returning `(y, grad_fn)`. Both are anchored at a line's start (indentation, then
# the keyword), so every line is looked at once, however many `def`s or `return`s it holds.
_DEF = re.compile(r"^[ \t]+def[ \t]+(\w+)[ \t]*\(", re.MULTILINE)
# A `return` at the start of an indented line, and the rest of that line: the value is taken
# apart with string methods (a regex over the rest of the line from every `return` in it would
# scan a long line once per `return`).
_RETURN = re.compile(r"^[ \t]+return[ \t]([^\n]*)", re.MULTILINE)
_NAME = re.compile(r"\w+")


def _returned_last(rest: str) -> str | None:
    """`grad` in `return y, grad` or `return (y, grad)  # comment`: the name after the last comma
    of the returned value, or None."""
    value = rest.partition("#")[0].strip(" \t\r")
    if value.startswith("(") and value.endswith(")"):
        value = value[1:-1].rstrip(" \t")
    head, comma, name = value.rpartition(",")
    name = name.lstrip(" \t")
    return name if comma and _NAME.fullmatch(name) else None


def may_forget_decorator(text: str) -> bool:
    """The cheap text test for CG013 in files that never mention `custom_gradient`: TensorFlow
    named (`tensorflow`, or `tf.` for snippets and notebook cells), and some nested def's name
    returned as the last element of a tuple."""
    if "tensorflow" not in text and "tf." not in text:
        return False
    nested = {m.group(1) for m in _DEF.finditer(text)}
    if not nested:
        return False
    return any(_returned_last(m.group(1)) in nested for m in _RETURN.finditer(text))


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


def read_bytes(path: str, limit: int = MAX_FILE_BYTES, what: str = "a Python file; skipped",
               follow: bool = True) -> tuple[bytes, os.stat_result]:
    """The one guarded reader: every read of a path the tree or its configuration names (sources,
    notebooks, configuration, the baseline, cache entries) comes here. Regular files only: a
    FIFO is never opened (that would block), a device never read (`/dev/zero` never ends), at
    most `limit` bytes. `follow=False` refuses a symbolic link (O_NOFOLLOW: cache entries).
    Raises ReadError (naming the path and saying why, `what` the file should have been) or
    TooLargeError."""
    if isinstance(path, Skipped):
        raise ReadError(path, path.reason)
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise ReadError(path, f"dangling symbolic link (to {os.readlink(path)})") from None
        raise ReadError(path, "no such file or directory") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise ReadError(path, _reason(exc)) from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else _kind(st.st_mode)
        raise ReadError(path, f"{kind}, not {what}")
    if st.st_size > limit:
        raise TooLargeError(f"{_megabytes(st.st_size)}, over cglint's {_megabytes(limit)} limit for one file")
    try:
        # O_NONBLOCK: a FIFO put in the file's place after the stat cannot block the open.
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
        fd = os.open(path, flags | (0 if follow else getattr(os, "O_NOFOLLOW", 0)))
    except OSError as exc:
        raise ReadError(path, _reason(exc)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ReadError(path, f"{_kind(st.st_mode)}, not {what}")
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
    return b"".join(chunks), st


def read(path: str, limit: int = MAX_FILE_BYTES) -> Read:
    """A source file through `read_bytes`, decoded as Python decodes it. Raises ReadError
    (naming the path) for a missing, dangling, looping, unreadable or non-regular path;
    UndecodableError (including TooLargeError) for content cglint cannot take."""
    data, st = read_bytes(path, limit)
    decoded = pysource.decode(data)
    return Read(path, decoded.text, decoded, data, identity(st), stat.S_IMODE(st.st_mode))


def _megabytes(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n % 2**20 else f"{n // 2**20} MB"


def _reason(exc: OSError | ValueError) -> str:
    if isinstance(exc, ValueError):
        return str(exc)
    if exc.errno == errno.ELOOP:
        return "symbolic link loop (too many levels of symbolic links)"
    return (exc.strerror or type(exc).__name__).lower() if exc.strerror else str(exc)


def read_source(path: str) -> str:
    """Source text as Python reads it (BOM, coding cookie, else UTF-8). Newlines are kept as
    they are, so positions and fixes match the file on disk."""
    return read(path).text


# ---- the one guarded writer --------------------------------------------------------------------

def why(exc: OSError) -> str:
    """An OSError as the end of a one-line message."""
    return exc.reason if isinstance(exc, ReadError) else (exc.strerror or str(exc)).lower()


class WriteError(ReadError):
    """A write refused or failed: the message names the path and says why."""


# Temporary files being written: removed by the signal handlers (`guard_signals`) too, since a
# SIGTERM or SIGHUP would otherwise end the process between mkstemp and os.replace.
_PENDING: set[str] = set()


def inside(path: str, root: str) -> bool:
    """Whether absolute `path` is `root` or under it (as written)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def escapes(path: str, root: str | os.PathLike[str], follow: bool = True) -> str | None:
    """Where `path` really leads when it is inside `root` as written but a symbolic link (of
    its own or of a directory on the way) takes it out; None when it stays in (or was named
    outside `root` to begin with: a path the user names is the user's)."""
    root = str(root)
    lexical = os.path.abspath(path)
    if not (inside(lexical, os.path.abspath(root)) or inside(lexical, os.path.realpath(root))):
        return None
    # `follow=False`: the path itself is what gets replaced, so only the directories count.
    real = os.path.realpath(path) if follow else os.path.join(os.path.realpath(os.path.dirname(lexical)),
                                                              os.path.basename(lexical))
    return None if inside(real, os.path.realpath(root)) else real


def project_root(cwd: str | None = None) -> str:
    """The project root of the path policy: the checkout, i.e. the nearest directory from the
    invocation directory upward that holds `.git`, else the invocation directory itself (never
    the directory of the configuration found, which the checkout chooses)."""
    here = os.path.realpath(cwd or os.getcwd())
    directory = here
    while True:
        if os.path.lexists(os.path.join(directory, ".git")):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return here
        directory = parent


def policy(path: str, root: str | os.PathLike[str] | None = None, named: bool = False,
           follow: bool = True) -> str | None:
    """The one path policy for cglint's writes; why `path` must not be written, or None.

    - Nothing is written through a symbolic link that leads out of `root` (the directory named
      on the command line the path was found in) or out of the project root (`project_root`):
      a checkout cannot aim a write at `~/.bashrc` by committing a link, whatever directory its
      configuration sits in.
    - A path cglint chose, or that the checkout's configuration names (`baseline = "..."`, the
      cache), stays inside the project root. Only a path the user named on the command line
      (`named`: `--output-file`, `--write-baseline`, `--baseline`, `--cache-dir`, the files
      and directories to fix) may be outside it."""
    project = project_root()
    for base in ([str(root)] if root is not None else []) + [project]:
        leads = escapes(path, base, follow)
        if leads is not None:
            return f"a symbolic link to {leads}, outside {base}; not written"
    if not named:
        real = os.path.realpath(path) if follow else os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(path))),
                                                                  os.path.basename(path))
        if not inside(real, project):
            return (f"outside the project root {project} (only a path named on the command line is written "
                    "there); not written")
    return None


def write(path: str | os.PathLike[str], data: bytes | str, expect: tuple[int, int, int, int] | None = None,
          root: str | os.PathLike[str] | None = None, follow: bool = True, named: bool = True) -> None:
    """The one guarded writer: fixes, `# noqa` edits, reports, baselines and cache entries are
    written here, so that readers see the old file or the new one, never a torn one (a
    temporary file in the same directory, flushed, then `os.replace`d over it).

    - Only where the path policy (`policy`) allows: never through a symbolic link that leaves
      `root` or the project root; outside the project root only a path the user named
      (`named`, the default for the CLI's own paths; the configuration's baseline and the
      cache pass False). A link that stays inside is followed (its target replaced, the link
      kept); `follow=False` replaces the path itself (a cache entry).
    - Only a regular file (or a new one) is replaced: a character device (`/dev/null`, a
      terminal) or a FIFO is written in place.
    - What the replaced file was is kept — mode (setuid/setgid included), owner, group,
      extended attributes — or nothing is written: WriteError says why. A file with other
      hard links is not replaced (that would split them).
    - With `expect` (`identity` of the file as read), nothing is written if the file is gone
      or changed since.
    Raises WriteError (naming the path) or OSError."""
    path = os.fspath(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    refused = policy(path, root, named, follow)
    if refused is not None:
        raise WriteError(path, refused)
    target = os.path.realpath(path) if follow else os.path.abspath(path)
    try:
        st: os.stat_result | None = os.stat(target) if follow else os.lstat(target)
    except FileNotFoundError:
        st = None
    except ValueError as exc:
        raise WriteError(path, str(exc)) from None
    if expect is not None and (st is None or identity(st) != expect):
        what = "deleted" if st is None else "changed on disk"
        raise WriteError(path, f"{what} since cglint read it; not written")
    if st is not None and not stat.S_ISREG(st.st_mode) and not (not follow and stat.S_ISLNK(st.st_mode)):
        _write_in_place(path, target, st, data)
        return
    if st is not None and stat.S_ISREG(st.st_mode):
        if st.st_nlink > 1:
            raise WriteError(path, f"has {st.st_nlink} hard links (replacing it would split them); not written")
        if st.st_uid != os.geteuid() and os.geteuid() != 0:
            raise WriteError(path, "owned by another user (replacing it would change its owner); not written")
        mode = stat.S_IMODE(st.st_mode)
    else:
        st = None
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = _temporary(target)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if st is not None:
                _keep(path, target, fh.fileno(), st, mode)
            else:
                os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        if expect is not None:  # last look, as close to the replace as it gets
            try:
                now = os.stat(target)
            except FileNotFoundError:
                raise WriteError(path, "deleted since cglint read it; not written") from None
            if identity(now) != expect:
                raise WriteError(path, "changed on disk since cglint read it; not written")
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        _PENDING.discard(tmp)


@contextlib.contextmanager
def pending(path: str):
    """`path`, a file of cglint's own about to be created, is removed on a signal (as the
    writer's temporary files are) and when the block ends."""
    _PENDING.add(path)
    try:
        yield path
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
        _PENDING.discard(path)


def _temporary(target: str) -> tuple[int, str]:
    """A new file next to `target`, registered in _PENDING before it exists (so that a signal
    at any moment finds it)."""
    for _ in range(100):
        tmp = os.path.join(os.path.dirname(target) or ".", f".{os.path.basename(target)}.{os.urandom(4).hex()}.cglint-tmp")
        _PENDING.add(tmp)
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600), tmp
        except FileExistsError:
            _PENDING.discard(tmp)
        except BaseException:
            _PENDING.discard(tmp)
            raise
    raise FileExistsError(errno.EEXIST, "no unused temporary name", target)


def _keep(path: str, target: str, fd: int, st: os.stat_result, mode: int) -> None:
    """Gives the temporary file `fd` the owner, group, mode and extended attributes of `st`
    (the file it replaces), or raises WriteError. The owner first: chown clears setuid."""
    if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.fchown(fd, st.st_uid, st.st_gid)
        except OSError:
            raise WriteError(path, "its owner or group cannot be kept; not written") from None
    os.fchmod(fd, mode)
    if stat.S_IMODE(os.fstat(fd).st_mode) != mode:  # the kernel drops setgid for a foreign group
        raise WriteError(path, f"its mode {mode:o} cannot be kept; not written")
    if not hasattr(os, "listxattr"):
        return
    try:
        names = os.listxattr(target)
    except OSError:
        return  # a file system without extended attributes
    for name in names:
        try:
            value = os.getxattr(target, name)
            if name not in os.listxattr(fd) or os.getxattr(fd, name) != value:  # a label the new file got already
                os.setxattr(fd, name, value)
        except OSError:
            raise WriteError(path, f"its extended attribute {name} cannot be kept; not written") from None


def _write_in_place(path: str, target: str, st: os.stat_result, data: bytes) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise WriteError(path, "is a directory")
    if not (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
        raise WriteError(path, "not a regular file, a character device or a FIFO; not written")
    try:
        # O_NONBLOCK: a FIFO nobody reads fails at once (ENXIO) instead of blocking forever.
        flags = os.O_WRONLY | (getattr(os, "O_NONBLOCK", 0) if stat.S_ISFIFO(st.st_mode) else 0)
        fd = os.open(target, flags | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise WriteError(path, "a FIFO with no reader; not written") from None
        raise
    try:
        if stat.S_ISFIFO(st.st_mode):
            os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def guard_signals() -> None:
    """SIGINT, SIGTERM and SIGHUP (Ctrl-C, a CI job cancelled, `timeout`, a closed terminal)
    end cglint alike: temporary files are removed at once and KeyboardInterrupt unwinds the
    run (children are stopped, exit status 2)."""
    import signal

    def stop(signum, frame):
        for tmp in list(_PENDING):
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise KeyboardInterrupt

    previous = {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            try:
                previous[name] = signal.signal(getattr(signal, name), stop)
            except (ValueError, OSError):  # not the main thread
                pass

    def restore() -> None:
        # A forked worker (multiprocessing ends its pool with SIGTERM) dies as it did before,
        # even when blocked in C where a Python handler would never run.
        for name, handler in previous.items():
            try:
                signal.signal(getattr(signal, name), handler)
            except (ValueError, OSError, TypeError):
                pass

    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=restore)
