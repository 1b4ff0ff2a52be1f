"""The CLI's result cache: a file whose text, cglint version and effective configuration are
unchanged since the last run is not parsed again.

Layout (as ruff's `.ruff_cache`): `<project root>/.cglint_cache/` (the directory of the
configuration file, else the current directory; `--cache-dir DIR` or `CGLINT_CACHE_DIR` put it
elsewhere, `--no-cache` turns it off), holding a `.gitignore` that ignores everything in it, a
`CACHEDIR.TAG`, and one directory per cglint version with one small JSON entry per linted file,
named by a hash of the file's absolute path.

An entry holds the key it was made under (cglint's version and a fingerprint of its code, the
effective settings and the codes checked in that file) and the SHA-256 of the file's text, then
the diagnostics and warnings. It is used only when all of them match; anything else (another
version, another configuration, a corrupt or truncated entry, a file that is not an entry) is a
miss, and the entry is rewritten after the file is linted. Writes go through the guarded
writer (a temporary file in the same directory, then `os.replace`), so concurrent runs see a
whole entry or none.

Whoever can write the cache decides the report, so it is trusted only as far as its owner: a
cache directory that is a symbolic link, not owned by the user, or writable by others is not
used (`Cache.problem`, one warning); entries are read like linted files (regular files only,
no symbolic links, a size cap) and every field is checked before use.

Only files that mention `custom_gradient` get entries. The others are remembered in one
small index per cglint code version (`quiet/`), by identity (device, inode, size, modification
and change times), so a warm run stats them instead of reading them (see `Cache.quiet`). The cache holds what reports print, not the parse:
`--fix`, `--diff`, `--add-noqa`, `--runtime` and SARIF output need the tree, so the CLI lints
without the cache for them (`usable_for`); JSON's text edits of each fix are stored with it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import time
from dataclasses import fields
from pathlib import Path
from typing import Any, Iterable

from cglint import __version__, files
from cglint.diagnostics import APPLICABILITIES, Diagnostic, FileResult, Fix

CACHE_DIR_NAME = ".cglint_cache"
ENV_VAR = "CGLINT_CACHE_DIR"
_GITIGNORE = "# Automatically created by cglint.\n*\n"
_CACHEDIR_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
                 "# This file is a cache directory tag created by cglint.\n"
                 "# For information about cache directory tags, see: https://bford.info/cachedir/\n")
_FORMAT = 2
# An entry or the quiet index larger than this is not read (a planted /dev/zero-like file).
_MAX_ENTRY_BYTES = 8 * 2**20


def directory_for(root: Path, option: str | None = None) -> Path:
    """Where the cache lives: `--cache-dir`, else $CGLINT_CACHE_DIR, else `.cglint_cache` in
    the project root."""
    chosen = option or os.environ.get(ENV_VAR)
    return Path(chosen).expanduser() if chosen else root / CACHE_DIR_NAME


def code_fingerprint() -> str:
    """cglint's version and the sizes and modification times of its modules, so that a cache
    made by other code (an upgrade, or an edited checkout) is never trusted."""
    package = Path(__file__).resolve().parent
    h = hashlib.sha256(f"{_FORMAT}:{__version__}".encode())
    for dirpath, dirnames, filenames in os.walk(package):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                st = os.stat(os.path.join(dirpath, name))
                h.update(f"{os.path.relpath(os.path.join(dirpath, name), package)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()


class Cache:
    def __init__(self, directory: Path, settings_key: str, named: bool = True) -> None:
        self.root = directory
        # The user's choice (--cache-dir, $CGLINT_CACHE_DIR, a library caller's directory): anywhere.
        # The CLI's default (`.cglint_cache` next to the configuration) passes False: inside the
        # project root only (files.policy).
        self.named = named
        self.directory = directory / __version__
        fingerprint = code_fingerprint()
        self.key = hashlib.sha256(f"{fingerprint}|{settings_key}".encode()).hexdigest()
        self._quiet_path = self.directory / "quiet" / f"{fingerprint[:20]}.json"
        self._quiet: dict[str, list[int]] | None = None
        self._quiet_changed = False
        # Quiet files that import project modules: quiet while every file and directory the
        # project index read is unchanged (`quickscan.snapshot`).
        self._project_path = self.directory / "quiet" / f"{fingerprint[:20]}-project.json"
        self._project: tuple[dict[str, list[int] | None], dict[str, list[int]]] | None = None
        self._project_new: dict[str, list[int]] = {}
        self._ready = False
        self._refused = False
        self.hits = self.misses = 0
        self._digests: dict[str, str | None] = {}

    def problem(self) -> str | None:
        """Why this cache must not be used (a warning to print), or None. A directory someone
        else owns or can write lets them hide findings or inject fake ones; a symbolic link
        sends writes elsewhere. After this says so, the cache is neither read nor written."""
        for directory in (self.root, self.directory, self._quiet_path.parent):
            try:
                st = os.lstat(directory)
            except FileNotFoundError:
                break  # made by this run (`_prepare` looks again)
            except (OSError, ValueError) as exc:
                why = f"cannot be used ({exc})"
            else:
                why = _untrusted(st)
            if why:
                self._refused = True
                return f"cache directory {directory} {why}; not used (--cache-dir or --no-cache)"
        why = _not_dedicated(self.root)
        if why:
            self._refused = True
            return f"cache directory {self.root} {why}; not used (--cache-dir or --no-cache)"
        return None

    # -- lookups -------------------------------------------------------------------------

    def _entry(self, path: str) -> Path:
        # One entry per file: every output format reads the same findings (with their fixes'
        # text edits, for JSON), so pre-commit's text and CI's JSON share it.
        name = hashlib.sha256(os.path.abspath(path).encode("utf-8", "surrogatepass")).hexdigest()
        return self.directory / f"{name}.json"

    def _file_key(self, codes: Iterable[Any]) -> str:
        return self.key + ":" + ",".join(c if isinstance(c, str) else c.code for c in codes)

    def get(self, path: str, source: str, codes: Iterable[Any]) -> FileResult | None:
        """The cached result for `path` with this text and these codes, or None."""
        try:
            if self._refused:
                raise LookupError
            entry = json.loads(_read(self._entry(path)))
            if (entry.get("key") != self._file_key(codes) or entry.get("content") != _digest(source)
                    or any(self._digest_of(dep) != digest for dep, digest in entry.get("dependencies", {}).items())):
                raise LookupError  # stale: the file, or a project module it imports, changed
            codes = {c if isinstance(c, str) else c.code for c in codes} | {"CG000"}
            diagnostics = [_diagnostic(_valid(d, codes), path) for d in entry["diagnostics"]]
            if not isinstance(entry["warnings"], list) or not all(isinstance(w, str) for w in entry["warnings"]):
                raise TypeError
            result = FileResult(path, source, diagnostics, parsed=bool(entry["parsed"]), warnings=entry["warnings"],
                                dependencies=entry.get("dependencies", {}))
        except (OSError, ValueError, LookupError, TypeError, AttributeError, RecursionError):
            self.misses += 1  # absent, foreign, stale or corrupt: lint, then rewrite it
            return None
        self.hits += 1
        return result

    def _digest_of(self, path: Any) -> str | None:
        """`_file_digest`, once per path and run (the files of a package share their imports)."""
        if not isinstance(path, str):
            raise TypeError
        if path not in self._digests:
            self._digests[path] = _file_digest(path)
        return self._digests[path]

    def put(self, path: str, source: str, codes: Iterable[Any], result: FileResult) -> None:
        entry = {"key": self._file_key(codes), "content": _digest(source), "dependencies": result.dependencies,
                 "parsed": result.parsed,
                 "warnings": list(result.warnings), "diagnostics": [_stored(d, result) for d in result.diagnostics]}
        try:
            self._prepare()
            self._write(self._entry(path), json.dumps(entry, separators=(",", ":")).encode())
        except OSError:
            pass  # a read-only or full disk makes the cache useless, never the run wrong

    # -- files with nothing to lint ------------------------------------------------------
    # Most files never mention `custom_gradient`: a warm run would still read and test each of
    # them, which is most of its time on a large tree. The quiet index remembers which files
    # failed the prefilter, by identity (device, inode, size, modification time), so a warm run
    # only stats them, as ruff checks a file's mtime. The prefilter depends on cglint's code
    # alone, so the index is kept per code fingerprint, not per configuration.

    def quiet(self, path: str) -> bool:
        """Whether `path` is, by its identity, the file that failed the prefilter last time."""
        if self._quiet is None:
            self._quiet = self._load_quiet()
        known = self._quiet.get(os.path.abspath(path))
        if known is None:
            if self._project is None:
                self._project = self._load_project()
            known = self._project[1].get(os.path.abspath(path))
            if known is None:
                return False
        try:
            return known == _identity(os.stat(path))
        except OSError:
            return False  # the read says what is wrong

    def remember_quiet(self, path: str, identity: tuple[int, int, int, int], project: bool = False) -> None:
        """`path`, read with `identity` (files.Read.identity), failed the prefilter; `project`:
        by what the project index says of the modules it imports (kept only with the index's
        snapshot, `save`)."""
        try:
            now = _identity(os.stat(path))
        except OSError:
            return
        # Changed since it was read, or written within the last seconds (it may change again
        # within the clock's resolution without its mtime moving: git's "racy" case): not
        # remembered yet. The change time also covers a chmod (an unreadable file is read again).
        if tuple(now[:4]) != tuple(identity) or time.time_ns() - now[3] < 2_000_000_000:
            return
        if project:
            self._project_new[os.path.abspath(path)] = now
            return
        if self._quiet is None:
            self._quiet = self._load_quiet()
        self._quiet[os.path.abspath(path)] = now
        self._quiet_changed = True

    def save(self, snapshot: dict[str, list[int] | None] | None = None) -> None:
        """Writes the quiet index if this run added to it (atomically: a concurrent run reads
        the old or the new index, never a torn one). `snapshot`: the project index's, under
        which this run's `remember_quiet(..., project=True)` files were decided (None: they
        are not kept)."""
        if snapshot is not None and self._project_new:
            self._save_project(snapshot)
        if not self._quiet_changed or self._quiet is None:
            return
        try:
            self._prepare()
            self._quiet_path.parent.mkdir(exist_ok=True)
            if self.problem():
                return
            self._write(self._quiet_path, json.dumps(self._quiet, separators=(",", ":")).encode())
            self._quiet_changed = False
        except OSError:
            pass

    def _load_project(self) -> tuple[dict[str, list[int] | None], dict[str, list[int]]]:
        """The last snapshot and its quiet files, if every file and directory in it is unchanged
        (checked once per run: a stat each); else nothing."""
        try:
            if not self._refused:
                data = json.loads(_read(self._project_path))
                snapshot, quiet = data["snapshot"], data["files"]
                if not (isinstance(snapshot, dict) and isinstance(quiet, dict)
                        and all(v is None or _is_identity(v) for v in snapshot.values())
                        and all(_is_identity(v) for v in quiet.values())):
                    raise TypeError
                from cglint import quickscan

                if quickscan.unchanged(snapshot):
                    return snapshot, quiet
        except (OSError, ValueError, LookupError, TypeError, RecursionError):
            pass
        return {}, {}

    def _save_project(self, snapshot: dict[str, list[int] | None]) -> None:
        if self._project is None:
            self._project = self._load_project()
        old, quiet = self._project
        # Entries of the last snapshot still stand (it was unchanged when loaded): kept beside
        # this run's, under both snapshots at once; where they disagree, this run's alone.
        if any(path in old and old[path] != identity for path, identity in snapshot.items()):
            old, quiet = {}, {}
        merged = ({**old, **snapshot}, {**quiet, **self._project_new})
        try:
            self._prepare()
            self._project_path.parent.mkdir(exist_ok=True)
            if self.problem():
                return
            self._write(self._project_path, json.dumps({"snapshot": merged[0], "files": merged[1]},
                                                       separators=(",", ":")).encode())
            self._project, self._project_new = merged, {}
        except OSError:
            pass

    def _load_quiet(self) -> dict[str, list[int]]:
        try:
            if not self._refused:
                data = json.loads(_read(self._quiet_path))
                if isinstance(data, dict):
                    return data
        except (OSError, ValueError, RecursionError):
            pass
        return {}

    def _prepare(self) -> None:
        if self._ready:
            return
        if self._refused:
            raise PermissionError("cache not used")
        # The cache directory is cglint's alone: made here, fresh (or found empty, or holding
        # cglint's CACHEDIR.TAG), never a directory of other files (`CGLINT_CACHE_DIR=/`).
        self.root.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.root.mkdir()
        except FileExistsError:
            pass
        if self.problem():  # someone else's all along, or swapped since the first look
            raise PermissionError("cache not used")
        for name, body in (("CACHEDIR.TAG", _CACHEDIR_TAG), (".gitignore", _GITIGNORE)):
            target = self.root / name
            if not target.exists():
                self._write(target, body.encode())
        self.directory.mkdir(exist_ok=True)
        if self.problem():
            raise PermissionError("cache not used")
        self._ready = True

    def _write(self, target: Path, data: bytes) -> None:
        # The path itself is replaced, never a link's target; nothing is written outside the cache.
        files.write(target, data, root=self.root, follow=False, named=self.named)


def _not_dedicated(root: Path) -> str | None:
    """Why the existing directory `root` is not a cache of cglint's (None: it is, it is empty,
    or it does not exist yet): only a directory holding cglint's CACHEDIR.TAG, or nothing, is
    ever written into."""
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return f"cannot be used ({exc})"
    if not names:
        return None
    try:
        tag = files.read_bytes(str(root / "CACHEDIR.TAG"), 4096, what="a cache tag", follow=False)[0]
    except (OSError, ValueError):
        tag = b""
    if tag != _CACHEDIR_TAG.encode():
        return "holds other files and no CACHEDIR.TAG of cglint's (a cache directory must be cglint's alone)"
    return None


def usable_for(*, fixing: bool, runtime: bool, add_noqa: bool, output_format: str, unused_noqa: bool = False) -> bool:
    """Whether a run only reports (what the cache holds) rather than needing the parse.
    `--report-unused-noqa` judges `# noqa` comments in files that never mention
    `custom_gradient` too, which the cache and the pool skip."""
    return not (fixing or runtime or add_noqa or unused_noqa or output_format == "sarif")


# Settings fields that cannot change a file's findings once its codes are known (the codes are
# part of each entry's key): selection layers, file discovery, the runtime check.
_NOT_ANALYSIS = frozenset({"root", "config_file", "select", "ignore", "extend_select", "layers", "per_file_ignores",
                           "exclude", "extend_exclude", "force_exclude", "runtime", "baseline"})


def settings_key(settings: Any) -> str:
    """The effective configuration, as far as it can change findings beyond the codes: every
    other field of the (frozen) settings, so an analysis option added later is covered
    without a change here."""
    return repr(sorted((f.name, getattr(settings, f.name)) for f in fields(settings) if f.name not in _NOT_ANALYSIS))


# -- entries ------------------------------------------------------------------------------

def _digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()


def _file_digest(path: str) -> str | None:
    """A file's bytes hashed as cglint.model.project hashes an imported module. The path comes
    from a cache entry: read through the guarded reader (a regular file within the size limit)."""
    try:
        return hashlib.sha256(files.read_bytes(str(path), what="a module the cached file imports")[0]).hexdigest()
    except (OSError, ValueError):
        return None


class StoredFix(Fix):
    """A fix as reports need it (applicability, description, JSON's text edits) without the
    tree it edits: what the cache and the worker processes hand back. Never applied."""

    __slots__ = ("json_edits",)

    def __init__(self, applicability: str, description: str, json_edits: list[dict[str, Any]]) -> None:
        super().__init__([], applicability=applicability, description=description)
        self.json_edits = json_edits


def strip(result: FileResult) -> FileResult:
    """`result` as the cache (or another process) hands it back: diagnostics with StoredFixes,
    no module or model."""
    diagnostics = [_diagnostic(_stored(d, result), result.path) for d in result.diagnostics]
    return FileResult(result.path, result.source, diagnostics, parsed=result.parsed, warnings=list(result.warnings),
                      dependencies=dict(result.dependencies))


_FIELDS = ("line", "column", "end_line", "end_column", "code", "name", "severity", "message")


def _stored(d: Diagnostic, result: FileResult) -> dict[str, Any]:
    out = {name: getattr(d, name) for name in _FIELDS}
    out.update({k: v for k, v in d.to_dict().items() if k not in _FIELDS and k not in ("path", "fixable", "fix", "runtime")})
    if d.fix is not None:
        edits = getattr(d.fix, "json_edits", None)
        if edits is None:
            edits = []
            if result.module is not None and d.cell is not None:  # a notebook's cell: rows of the cell
                from cglint.fix import notebook_json_edits

                edits = notebook_json_edits(result, d)
            elif result.module is not None:
                from cglint.fix import json_edits

                edits = json_edits(result.source, result.module, d.fix)
        out["fix"] = {"applicability": d.fix.applicability, "description": d.fix.description, "json_edits": edits}
    return out


def _diagnostic(stored: dict[str, Any], path: str) -> Diagnostic:
    stored = dict(stored)
    fix = stored.pop("fix", None)
    d = Diagnostic(path=path, **stored)
    if fix is not None:
        d.fix = StoredFix(**fix)
    return d


def _is_identity(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 5 and all(type(v) is int for v in value)


def _identity(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _read(path: Path) -> bytes:
    return files.read_bytes(str(path), _MAX_ENTRY_BYTES, what="a cache entry", follow=False)[0]


def _untrusted(st: os.stat_result) -> str | None:
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != os.geteuid():
        return "is not owned by you"
    # Group-writable is fine for the user's own group (the usual umask 002 with per-user groups).
    if st.st_mode & stat.S_IWOTH or (st.st_mode & stat.S_IWGRP and st.st_gid != os.getegid()):
        return "is writable by others"
    return None


_CODE = re.compile(r"CG\d{3}\Z")
_POSITIONS = ("line", "column", "end_line", "end_column")


def _valid(stored: Any, codes: set[str]) -> dict[str, Any]:
    """A stored diagnostic checked field by field (TypeError otherwise): positions are small
    integers, the code one of those checked in this file, texts are strings, a fix's edits are
    well-formed. What reports print is escaped there, whatever its origin."""
    if not isinstance(stored, dict) or not set(_FIELDS) <= stored.keys():
        raise TypeError
    if not all(type(stored[k]) is int and 0 <= stored[k] < 2**31 for k in _POSITIONS):
        raise TypeError
    if not (isinstance(stored["code"], str) and _CODE.match(stored["code"]) and stored["code"] in codes):
        raise TypeError
    if not all(isinstance(stored[k], str) for k in ("name", "severity", "message")):
        raise TypeError
    if "cell" in stored and not (type(stored["cell"]) is int and 0 < stored["cell"] < 2**31):
        raise TypeError
    fix = stored.get("fix")
    if fix is not None:
        if not (isinstance(fix, dict) and fix.get("applicability") in APPLICABILITIES
                and isinstance(fix.get("description"), str) and isinstance(fix.get("json_edits"), list)):
            raise TypeError
        for edit in fix["json_edits"]:
            if not (isinstance(edit, dict) and isinstance(edit.get("content"), str)
                    and all(isinstance(edit.get(k), dict) and type(edit[k].get("row")) is int
                            and type(edit[k].get("column")) is int for k in ("location", "end_location"))):
                raise TypeError
    return stored
