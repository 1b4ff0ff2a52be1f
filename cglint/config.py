"""Configuration: `[tool.cglint]` in the nearest `pyproject.toml`, then command-line overrides.

    [tool.cglint]
    select = ["CG"]                 # codes or prefixes; default: every rule
    extend-select = []              # added to whatever `select` chose
    ignore = ["CG001"]
    exclude = [...]                 # gitignore-style globs; replaces the default list
    extend-exclude = ["gen/"]       # added to the default list (usually what you want)
    per-file-ignores = { "tests/**" = ["CG005"] }

    [tool.cglint.runtime]
    timeout = 120.0                 # seconds per module (--runtime-timeout)
    rtol = 1e-5                     # default: by dtype
    atol = 0.0
    probes = 3                      # random upstream gradients per check
    order = 1                       # 2: second derivatives and JVPs too (--runtime-order)
    memory-limit = 4096             # MiB per module's child; default half the machine, 0: none

Library entry points (the language server uses them too): `load(start, config_file=None)` ->
`Settings`; `Settings.with_overrides(...)` for command-line options; `Settings.rules_for(path)`;
`Settings.is_excluded(path, ...)`. Every problem in a file is a `ConfigError` whose message is
one line naming the file and the key.
"""

from __future__ import annotations

import math
import os
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

# Skipped while walking directories unless `exclude` is set (as in ruff); named paths are linted
# anyway unless --force-exclude.
DEFAULT_EXCLUDE: tuple[str, ...] = (
    ".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "env", ".env", "__pycache__",
    "site-packages", "build", "dist", "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache",
)

_KEYS = ("select", "ignore", "extend-select", "exclude", "extend-exclude", "per-file-ignores", "runtime", "baseline",
         "tensorflow-aliases")
_RUNTIME_KEYS = ("timeout", "rtol", "atol", "probes", "order", "memory-limit")
# The settings by table, for the command line's tip on an option that is a setting (`--rtol`).
SETTING_NAMES = {"tool.cglint": _KEYS, "tool.cglint.runtime": _RUNTIME_KEYS}


class ConfigError(ValueError):
    """A configuration problem; `str()` is one line naming the file and the key."""


@dataclass(frozen=True)
class RuntimeSettings:
    """`[tool.cglint.runtime]`. `rtol`/`atol` None means "by dtype" / 0."""

    timeout: float = 120.0
    rtol: float | None = None
    atol: float | None = None
    probes: int = 3
    order: int = 1  # 2: also the second derivative and forward mode (--runtime-order)
    memory_limit: int | None = None  # MiB per child process; None: the runner's default, 0: none


@dataclass(frozen=True)
class _Selection:
    """One layer of rule selection. Layers apply in order (configuration, then command line):
    a layer with `select` starts over from it, then adds `extend_select`, then drops `ignore`."""

    select: tuple[str, ...] | None
    extend_select: tuple[str, ...]
    ignore: tuple[str, ...]


@dataclass(frozen=True)
class Settings:
    root: Path  # globs are relative to this: the configuration file's directory, else the cwd
    config_file: Path | None = None
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    per_file_ignores: dict[str, tuple[str, ...]] = field(default_factory=dict)
    runtime: RuntimeSettings = RuntimeSettings()
    force_exclude: bool = False
    layers: tuple[_Selection, ...] = ()
    baseline: Path | None = None  # `baseline = "..."`, resolved against the configuration's directory
    # Modules that re-export TensorFlow (`lingvo.compat`): `from lingvo import compat as tf` is TensorFlow.
    tensorflow_aliases: tuple[str, ...] = ()

    # ---- command line --------------------------------------------------------------------

    def with_overrides(
        self,
        *,
        select: Iterable[str] | None = None,
        ignore: Iterable[str] | None = None,
        extend_select: Iterable[str] | None = None,
        exclude: Iterable[str] | None = None,
        extend_exclude: Iterable[str] | None = None,
        per_file_ignores: dict[str, Iterable[str]] | None = None,
        force_exclude: bool | None = None,
    ) -> Settings:
        """Command-line options on top of the file, as in ruff: `--select` starts over (the
        file's `ignore` no longer applies), `--extend-select` and `--ignore` add to it,
        `--exclude` replaces the exclusion list and `--extend-exclude` adds to it. Unknown
        codes raise ConfigError."""
        where = "the command line"
        changes: dict[str, Any] = {}
        if select is not None or ignore is not None or extend_select is not None:
            layer = _Selection(
                _codes(select, "--select", where) if select is not None else None,
                _codes(extend_select or (), "--extend-select", where),
                _codes(ignore or (), "--ignore", where),
            )
            changes["layers"] = self.layers + (layer,)
        if exclude is not None:
            check_globs(exclude, "--exclude", where)
            changes["exclude"] = tuple(exclude)
        if extend_exclude is not None:
            check_globs(extend_exclude, "--extend-exclude", where)
            changes["extend_exclude"] = self.extend_exclude + tuple(extend_exclude)
        if per_file_ignores is not None:
            merged = dict(self.per_file_ignores)
            for pattern, codes in per_file_ignores.items():
                merged[pattern] = merged.get(pattern, ()) + _codes(codes, "--per-file-ignores", where)
            changes["per_file_ignores"] = merged
        if force_exclude is not None:
            changes["force_exclude"] = force_exclude
        return replace(self, **changes) if changes else self

    # ---- questions -----------------------------------------------------------------------

    @property
    def codes(self) -> list[str]:
        """The codes selected for every file (before per-file-ignores); imports no rule."""
        from cglint.rules import CODES, OPT_IN, select_codes

        chosen = set(CODES)
        for layer in self.layers:
            if layer.select is not None:
                chosen = set(select_codes(list(layer.select))) if layer.select else set()
            if layer.extend_select:
                chosen |= set(select_codes(list(layer.extend_select)))
            if layer.ignore:
                chosen -= set(select_codes(list(layer.ignore)))
        return [c for c in (*CODES, *OPT_IN) if c in chosen]  # CG100 when selected by its code

    def codes_for(self, path: str | os.PathLike[str]) -> list[str]:
        """The codes to check in `path`: the selection minus its per-file-ignores."""
        codes = self.codes
        if not self.per_file_ignores:
            return codes
        from cglint.rules import select_codes

        dropped: set[str] = set()
        for pattern, ignored in self.per_file_ignores.items():
            if _matcher(self.root, (pattern,)).matches(path, is_dir=False, parents=True):
                dropped |= set(select_codes(list(ignored)))
        return [c for c in codes if c not in dropped]

    @property
    def rules(self) -> list:
        """The rule classes selected for every file (before per-file-ignores)."""
        from cglint.rules import rules

        return rules(self.codes)

    def rules_for(self, path: str | os.PathLike[str]) -> list:
        """The rule classes to run on `path`: the selection minus its per-file-ignores."""
        from cglint.rules import rules

        return rules(self.codes_for(path))

    def is_excluded(self, path: str | os.PathLike[str], is_dir: bool = False, parents: bool = False) -> bool:
        """Does `exclude`/`extend-exclude` match `path` (and, with `parents`, any directory
        above it, inside the root)?"""
        return _matcher(self.root, self.exclude + self.extend_exclude).matches(path, is_dir, parents)


# ---- loading -------------------------------------------------------------------------------


CONFIG_FILES = ("pyproject.toml",)


def config_key(directory: str | Path) -> tuple[tuple[str, int, int], ...]:
    """What the configuration found from `directory` depends on: the config files in it and
    above it, with their modification times and sizes. A changed key means the configuration
    must be read again (the language server, a long-lived host); computing it is stats only."""
    key = []
    try:
        here = Path(directory)
        folders = (here, *here.parents)
    except (OSError, ValueError):
        return ()
    for folder in folders:
        for name in CONFIG_FILES:
            candidate = folder / name
            try:
                st = candidate.stat()
            except (OSError, ValueError):
                continue
            key.append((str(candidate), st.st_mtime_ns, st.st_size))
    return tuple(key)


def find_config(start: Path) -> Path | None:
    """The nearest `pyproject.toml` with a `[tool.cglint]` table, searching upward from `start`
    (a file's directory, or the directory itself). Files without the table are passed over,
    so a package's own pyproject does not hide the repository's configuration."""
    start = Path(start).resolve()
    here = start if start.is_dir() else start.parent
    for directory in (here, *here.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            foreign = _foreign(candidate)
            if foreign:
                _warn_once(f"{candidate}: {foreign}; ignored (name it with --config to use it)")
                continue
            try:
                data = _read_toml(candidate)
            except ConfigError:
                return candidate  # broken, but ours to report: load() says what is wrong
            if isinstance(data.get("tool"), dict) and "cglint" in data["tool"]:
                return candidate
    return None


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    """A configuration file passed over, said once per process on stderr (the CLI's, the
    language server's log, pytest's)."""
    if message not in _WARNED:
        _WARNED.add(message)
        from cglint.escape import printable

        print(f"cglint: warning: {printable(message)}", file=sys.stderr)


def _foreign(candidate: Path) -> str | None:
    """Why a configuration file found by searching must not configure this run (git's
    `safe.directory` rule): it is owned by neither this user nor root and it lies outside the
    project root (the checkout, see files.project_root). A configuration inside the checkout
    is the checkout's, as its code is; one above it in a shared directory (/tmp, /srv, a
    colleague's home) is whoever planted it."""
    if not hasattr(os, "geteuid"):
        return None
    try:
        owner = os.stat(candidate).st_uid
    except OSError:
        return None
    if owner in (os.geteuid(), 0):
        return None
    from cglint import files

    if files.inside(os.path.realpath(candidate), files.project_root()):
        return None
    return f"owned by another user (uid {owner}) outside the project root {files.project_root()}"


def load(start: Path | str | None = None, config_file: Path | str | None = None) -> Settings:
    """Settings for a run starting at `start` (the first path given, or the cwd). With
    `config_file`, read that file instead of searching: a `pyproject.toml` contributes its
    `[tool.cglint]` table, any other TOML file (e.g. `cglint.toml`) its top level."""
    if config_file is not None:
        path = Path(config_file)
        if not path.is_file():
            raise ConfigError(f"{config_file}: configuration file not found")
        data = _read_toml(path)
        table = data.get("tool", {}).get("cglint", {}) if path.name == "pyproject.toml" else data
        return _from_table(table, path.resolve(), "[tool.cglint]" if path.name == "pyproject.toml" else "")
    found = find_config(Path(start) if start is not None else Path.cwd())
    if found is None:
        return Settings(root=Path.cwd().resolve())
    data = _read_toml(found)
    return _from_table(data.get("tool", {}).get("cglint", {}), found, "[tool.cglint]")


def _read_toml(path: Path) -> dict[str, Any]:
    from cglint import files

    try:
        # TOML is UTF-8 by definition: a comment that looks like a coding cookie is a comment.
        data, _ = files.read_bytes(str(path), limit=1 << 20, what="a configuration file")
        return tomllib.loads(data.decode("utf-8"))
    except files.ReadError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.reason}") from None
    except files.UndecodableError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except (RecursionError, MemoryError):  # tomllib recurses per nesting level
        raise ConfigError(f"{path}: invalid TOML: arrays or tables nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read: not valid UTF-8 (byte {exc.start})") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None


def _from_table(table: Any, path: Path, section: str) -> Settings:
    where = f"{section} in {path}" if section else str(path)
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table")
    _check_keys(table, _KEYS, where)

    select = _codes(table["select"], "select", where) if "select" in table else None
    extend_select = _codes(table.get("extend-select", ()), "extend-select", where)
    ignore = _codes(table.get("ignore", ()), "ignore", where)
    pfi_raw = table.get("per-file-ignores", {})
    if not isinstance(pfi_raw, dict):
        raise ConfigError(f"`per-file-ignores` in {where} must be a table of glob = [codes]")
    per_file_ignores = {
        str(pattern): _codes(codes, f"per-file-ignores.{pattern!r}", where) for pattern, codes in pfi_raw.items()
    }
    exclude = _strings(table["exclude"], "exclude", where) if "exclude" in table else DEFAULT_EXCLUDE
    extend_exclude = _strings(table.get("extend-exclude", ()), "extend-exclude", where)
    if exclude is not DEFAULT_EXCLUDE:  # the defaults are known good
        check_globs(exclude, "exclude", where)
    check_globs(extend_exclude, "extend-exclude", where)
    check_globs(per_file_ignores, "per-file-ignores", where)

    return Settings(
        root=path.parent,
        config_file=path,
        select=select,
        ignore=ignore,
        extend_select=extend_select,
        exclude=exclude,
        extend_exclude=extend_exclude,
        per_file_ignores=per_file_ignores,
        runtime=_runtime(table.get("runtime", {}), f"{section}.runtime in {path}" if section else f"[runtime] in {path}"),
        layers=(_Selection(select, extend_select, ignore),),
        baseline=_baseline(table, path.parent, where),
        tensorflow_aliases=_module_names(table.get("tensorflow-aliases", ()), "tensorflow-aliases", where),
    )


def _module_names(value: Any, key: str, where: str) -> tuple[str, ...]:
    """Dotted module names (`lingvo.compat`), as a list of strings."""
    names = _strings(list(value) if isinstance(value, tuple) else value, key, where)
    for name in names:
        if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", name):
            raise ConfigError(f"`{key}` in {where} must list dotted module names, not {name!r}")
    return names


def _baseline(table: dict[str, Any], root: Path, where: str) -> Path | None:
    if "baseline" not in table:
        return None
    value = table["baseline"]
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"`baseline` in {where} must be a file name (a string), not {value!r}")
    return root / value


def _runtime(table: Any, where: str) -> RuntimeSettings:
    if not isinstance(table, dict):
        raise ConfigError(f"`runtime` in {where} must be a table")
    _check_keys(table, _RUNTIME_KEYS, where)
    values: dict[str, Any] = {}
    for key in ("timeout", "rtol", "atol"):
        if key in table:
            value = table[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"`{key}` in {where} must be a number, not {value!r}")
            if value < 0 or (key == "timeout" and value == 0):
                raise ConfigError(f"`{key}` in {where} must be {'positive' if key == 'timeout' else '>= 0'}, not {value!r}")
            values[key] = float(value)
    if "order" in table:
        if table["order"] not in (1, 2) or isinstance(table["order"], bool):
            raise ConfigError(f"`order` in {where} must be 1 or 2, not {table['order']!r}")
        values["order"] = table["order"]
    if "probes" in table:
        value = table["probes"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"`probes` in {where} must be a positive integer, not {value!r}")
        values["probes"] = value
    if "memory-limit" in table:
        value = table["memory-limit"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"`memory-limit` in {where} must be a whole number of MiB (0: no limit), not {value!r}")
        values["memory_limit"] = value
    return RuntimeSettings(**values)


def _check_keys(table: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    for key in table:
        if key not in known:
            import difflib

            close = difflib.get_close_matches(key.replace("_", "-"), known, n=1)
            hint = f" (did you mean `{close[0]}`?)" if close else f" (known: {', '.join(known)})"
            raise ConfigError(f"unknown key `{key}` in {where}{hint}")


def _strings(value: Any, key: str, where: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"`{key}` in {where} must be a list of strings, not {value!r}")
    return tuple(value)


def _codes(value: Any, key: str, where: str) -> tuple[str, ...]:
    from cglint.rules import UnknownCodeError, select_codes

    codes = tuple(c.strip().upper() for c in _strings(list(value) if isinstance(value, tuple) else value, key, where))
    for code in codes:
        try:
            select_codes([code])
        except UnknownCodeError:
            place = f"in {key}" if key.startswith("--") else f"in `{key}` in {where}"
            raise ConfigError(f"unknown rule code or prefix: {code!r} ({place}; see --list-rules)") from None
    return codes


# ---- gitignore-style globs -----------------------------------------------------------------


class Glob:
    """One gitignore-style pattern: `build` or `*.pyi` match at any depth; a pattern with a
    `/` before its end (`src/gen/*.py`, `/setup.py`) is anchored at the root; `**` crosses
    directories; a trailing `/` matches directories only. An invalid class (`[z-a]`) raises
    ValueError. Matching is linear in the path: patterns with more than two unbounded
    wildcards (`**a**a**b`, which a backtracking regex takes exponential time on) are run as a
    set of states over the path instead of as a regex."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        text = pattern.strip()
        if text.startswith("./"):
            text = text[2:]
        self.dir_only = text.endswith("/")
        text = text.rstrip("/")
        self.anchored = "/" in text
        tokens = ([] if self.anchored else list(_ANY_DIRS)) + _tokens(text.lstrip("/"))
        # Compiled on first use: a one-file run checks few of the defaults' 17 patterns, and
        # compiling them all cost it as much as the lint.
        self._source: str | None = None
        self._compiled: re.Pattern | None = None
        if sum(1 for t in tokens if t[0] == "star") <= 2:
            self._source = _regex(tokens) + r"\Z"
        else:
            self.tokens = tokens

    @property
    def regex(self) -> re.Pattern | None:
        if self._compiled is None and self._source is not None:
            self._compiled = re.compile(self._source, re.DOTALL)
        return self._compiled

    def matches(self, rel: str, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        if self.regex is not None:
            return self.regex.match(rel) is not None
        return _run(self.tokens, rel)


# A pattern as tokens: ("lit", c), ("one",) any character but `/`, ("class", regex), ("star",
# crosses_slash), ("opt", n): the next n tokens may be skipped. `(?:.*/)?` is _ANY_DIRS.
_ANY_DIRS = (("opt", 2), ("star", True), ("lit", "/"))


def _tokens(pattern: str) -> list[tuple]:
    out: list[tuple] = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern.startswith("**/", i):
            out += _ANY_DIRS
            i += 3
        elif pattern.startswith("**", i):
            out.append(("star", True))
            i += 2
        elif pattern[i] == "*":
            out.append(("star", False))
            i += 1
        elif pattern[i] == "?":
            out.append(("one",))
            i += 1
        elif pattern[i] == "[" and (end := _class_end(pattern, i)) > 0:
            out.append(("class", _class(pattern[i + 1:end])))
            i = end + 1
        else:
            out.append(("lit", pattern[i]))
            i += 1
    return out


def _class_end(pattern: str, i: int) -> int:
    """Where the class opened at `i` closes (a `]` first, after an optional `!`, is literal);
    -1 when it never does (then `[` is literal)."""
    j = i + 1
    if pattern.startswith(("!", "^"), j):
        j += 1
    return pattern.find("]", j + 1) if j < len(pattern) else -1


def _class(inner: str) -> str:
    negate = inner[:1] in ("!", "^")
    body = inner[1:] if negate else inner
    parts, k = [], 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            lo, hi = body[k], body[k + 2]
            if lo > hi:
                raise ValueError(f"bad character range {lo}-{hi}")
            parts.append(f"{re.escape(lo)}-{re.escape(hi)}")
            k += 3
        else:
            parts.append(re.escape(body[k]))  # `[`, `^`, `\\` and the like stand for themselves
            k += 1
    return ("[^/" if negate else "[") + "".join(parts) + "]"


def _regex(tokens: list[tuple]) -> str:
    out, i = [], 0
    while i < len(tokens):
        kind = tokens[i][0]
        if kind == "opt":
            n = tokens[i][1]
            out.append("(?:" + _regex(tokens[i + 1:i + 1 + n]) + ")?")
            i += n + 1
            continue
        out.append(re.escape(tokens[i][1]) if kind == "lit" else "[^/]" if kind == "one" else tokens[i][1]
                   if kind == "class" else ".*" if tokens[i][1] else "[^/]*")
        i += 1
    return "".join(out)


def _run(tokens: list[tuple], text: str) -> bool:
    """Whether `tokens` match all of `text`: a set of token positions, one pass over the text."""
    classes = {i: re.compile(t[1]) for i, t in enumerate(tokens) if t[0] == "class"}
    end = len(tokens)

    def closure(states: set[int]) -> set[int]:
        todo, seen = list(states), set(states)
        while todo:
            i = todo.pop()
            if i == end:
                continue
            t = tokens[i]
            nxt = [i + 1] if t[0] == "star" else [i + 1, i + 1 + t[1]] if t[0] == "opt" else []
            for j in nxt:
                if j not in seen:
                    seen.add(j)
                    todo.append(j)
        return seen

    states = closure({0})
    for c in text:
        step = set()
        for i in states:
            if i == end:
                continue
            kind = tokens[i][0]
            if kind == "star":
                if tokens[i][1] or c != "/":
                    step.add(i)
            elif (kind == "lit" and tokens[i][1] == c or kind == "one" and c != "/"
                  or kind == "class" and classes[i].match(c)):
                step.add(i + 1)
        if not step:
            return False
        states = closure(step)
    return end in states


def check_globs(patterns: Iterable[str], key: str, where: str) -> None:
    """ConfigError naming the pattern, the key and the file for a glob that cannot be used."""
    for pattern in patterns:
        try:
            Glob(pattern).regex  # compiled here, so an invalid one is named at load
        except ValueError as exc:
            raise ConfigError(f"invalid glob {pattern!r} in `{key}` in {where}: {exc}") from None


class _Matcher:
    def __init__(self, root: Path, patterns: tuple[str, ...]) -> None:
        self.root = str(root)
        self.globs = [Glob(p) for p in patterns if p.strip()]
        # Unanchored patterns without `**` or `[` match a path by its last component alone
        # (`.venv`, `*.pyi`): literal ones by a set lookup, the others by one regex over the
        # name, so a walk of thousands of files does not run every pattern on every path.
        simple = [g for g in self.globs if not g.anchored and "**" not in g.pattern and "[" not in g.pattern]
        self._names = {(g.pattern.strip().rstrip("/"), g.dir_only) for g in simple
                       if not any(c in g.pattern for c in "*?")}
        wild = [g for g in simple if any(c in g.pattern for c in "*?")]
        self._wild = [Glob(g.pattern.strip()) for g in wild]
        self._rest = [g for g in self.globs if g not in simple]

    def _by_name(self, name: str, is_dir: bool) -> bool:
        if (name, False) in self._names or (is_dir and (name, True) in self._names):
            return True
        return any(g.matches(name, is_dir) for g in self._wild)

    def matches(self, path: str | os.PathLike[str], is_dir: bool, parents: bool = False) -> bool:
        if not self.globs:
            return False
        absolute = os.path.abspath(path)
        if absolute.startswith(self.root + os.sep):
            rel, inside = absolute[len(self.root) + 1:], True
        else:
            rel = os.path.relpath(absolute, self.root) if absolute.startswith(self.root) else None
            inside = not (rel is None or rel == "." or rel.startswith(".."))
        if not inside:
            # Outside the root only unanchored patterns can apply (`build`, `*.pyi`).
            rest = [g for g in self._rest if not g.anchored]
            rel = absolute.lstrip("/")
        else:
            rest = self._rest
        rel = rel.replace(os.sep, "/")  # type: ignore[union-attr]
        parts = rel.split("/")
        candidates = [("/".join(parts[: i + 1]), True) for i in range(len(parts) - 1)] if parents else []
        candidates.append((rel, is_dir))
        if self._names or self._wild:
            names = list(zip(parts[:-1], [True] * (len(parts) - 1))) if parents else []
            names.append((parts[-1], is_dir))
            if any(self._by_name(n, d) for n, d in names):
                return True
        return bool(rest) and any(g.matches(p, d) for p, d in candidates for g in rest)


_MATCHERS: dict[tuple[str, tuple[str, ...]], _Matcher] = {}


def _matcher(root: Path, patterns: tuple[str, ...]) -> _Matcher:
    key = (str(root), patterns)
    if key not in _MATCHERS:
        _MATCHERS[key] = _Matcher(root, patterns)
    return _MATCHERS[key]
