"""Which files to read, and the cheap text test that decides which of them to parse."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable, Iterable, Iterator

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
    """Python files and Jupyter notebooks (`.ipynb`) under `paths`, in a stable order. Raises FileNotFoundError for a path
    that does not exist (a usage error, reported by the CLI in one line).

    `excluded(path, is_dir, parents)` (e.g. `Settings.is_excluded`) decides what to skip while
    walking; without it, DEFAULT_EXCLUDED_DIRS. A path named on the command line is linted
    even when excluded, unless `force_exclude` (pre-commit passes every staged file by name)."""
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise FileNotFoundError(raw)
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
    """The prefilter: only a file that mentions `custom_gradient`, or one that may hold CG013's
    forgotten decorator, is parsed; every other file is read and never parsed."""
    return "custom_gradient" in text or may_forget_decorator(text)


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


class UndecodableError(ValueError):
    pass


def read_source(path: str) -> str:
    """Source text as Python reads it: UTF-8 (with or without BOM). Newlines are kept as they
    are, so positions and fixes match the file on disk."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UndecodableError(f"not valid UTF-8 (byte {exc.start})") from None
    return text
