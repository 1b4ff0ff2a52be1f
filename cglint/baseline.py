"""Baselines: adopt cglint on an existing codebase by recording today's findings and reporting
only new ones.

`cglint --write-baseline FILE` records every current finding; `cglint --baseline FILE` (or
`[tool.cglint] baseline = "FILE"`) hides the recorded ones. A finding is keyed by its path
(relative to the baseline file's directory, `/`-separated), its code and a hash of its source
line's normalised text (whitespace runs collapsed, ends stripped) — not its line number — so
edits elsewhere in the file do not resurface it. Several findings with the same key are
counted: a baseline with two means a third one is new.

Entries that no longer match a finding in a checked file (or whose file is gone) are *stale*:
counted and reported, and `--prune-baseline` rewrites the file without them.

The same key gives GitLab Code Quality its `fingerprint` (stable under line moves).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from cglint.diagnostics import Diagnostic, FileResult

VERSION = 1
# A baseline larger than this is not read (a device or a dump named in pyproject.toml must not
# exhaust memory); about 400,000 findings.
MAX_BYTES = 64 * 2**20


def _no_constant(name: str):
    raise ValueError(f"{name} is not a count")


def _count(value) -> int:
    """An entry's `count`: a whole number (JSON's 3 or 3.0), never a bool or a non-finite one."""
    if isinstance(value, bool):
        raise TypeError(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)  # finite: is_integer() is False for inf and nan
    if not isinstance(value, int):
        raise TypeError(value)
    return value


class BaselineError(ValueError):
    """A baseline file that cannot be read: the CLI says so in one line and exits 2."""


def normalise(line: str) -> str:
    return " ".join(line.split())


def line_hash(source_lines: list[str], line: int) -> str:
    text = source_lines[line - 1] if 1 <= line <= len(source_lines) else ""
    return hashlib.sha256(normalise(text).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def relative(path: str, anchor: Path) -> str:
    """`path` relative to `anchor` with `/` separators (absolute when on another drive)."""
    absolute = os.path.abspath(path)
    try:
        return Path(os.path.relpath(absolute, anchor)).as_posix()
    except ValueError:
        return Path(absolute).as_posix()


Key = tuple[str, str, str]  # (relative path, code, line hash)


def keys(result: FileResult, anchor: Path) -> list[tuple[Key, Diagnostic]]:
    lines = result.source.splitlines()
    rel = relative(result.path, anchor)
    if result.notebook is not None:  # a notebook's lines are its cells' (cglint.notebook)
        from cglint.notebook import frame_lines

        return [((rel, d.code, line_hash(frame_lines(result, d), d.line)), d) for d in result.diagnostics]
    return [((rel, d.code, line_hash(lines, d.line)), d) for d in result.diagnostics]


def fingerprints(result: FileResult, anchor: Path) -> list[str]:
    """One stable fingerprint per diagnostic of `result`: the baseline key and its occurrence
    number among equal keys in the file (so two equal findings stay distinct)."""
    seen: Counter[Key] = Counter()
    out = []
    for key, _ in keys(result, anchor):
        seen[key] += 1
        raw = "\0".join((*key, str(seen[key])))
        out.append(hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:32])
    return out


@dataclass
class Baseline:
    path: Path
    counts: Counter[Key] = field(default_factory=Counter)

    @property
    def anchor(self) -> Path:
        return self.path.resolve().parent

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Baseline:
        from cglint import files

        path = Path(path)
        if not path.exists() and not path.is_symlink():
            raise BaselineError(f"baseline file not found: {path} (create it with --write-baseline {path})")
        try:  # the guarded reader: a regular file of sane size, never a device or a FIFO
            data = json.loads(files.read_bytes(str(path), MAX_BYTES, what="a baseline")[0].decode("utf-8"),
                              parse_constant=_no_constant)
        except files.ReadError as exc:
            raise BaselineError(str(exc)) from None
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise BaselineError(f"cannot read baseline {path}: {exc}") from None
        if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("findings"), list):
            raise BaselineError(f"{path} is not a cglint baseline (version {VERSION})")
        counts: Counter[Key] = Counter()
        for entry in data["findings"]:
            try:
                key = (str(entry["path"]), str(entry["code"]), str(entry["line_hash"]))
                count = _count(entry.get("count", 1))
            except (TypeError, KeyError, ValueError, AttributeError, OverflowError):
                shown = repr(entry)
                shown = shown if len(shown) <= 100 else shown[:97] + "..."
                raise BaselineError(f"{path}: malformed entry {shown}") from None
            counts[key] += max(count, 1)
        return cls(path, counts)

    @classmethod
    def from_results(cls, path: str | os.PathLike[str], results: Iterable[FileResult]) -> Baseline:
        baseline = cls(Path(path))
        for result in results:
            baseline.counts.update(key for key, _ in keys(result, baseline.anchor))
        return baseline

    def write(self, root: str | os.PathLike[str] | None = None, named: bool = True) -> None:
        """Through the guarded writer: never through a link leading out of `root`; outside the
        project root only when the user `named` the file (a configured baseline is not)."""
        from cglint import files

        findings = [{"path": p, "code": c, "line_hash": h, **({"count": n} if n > 1 else {})}
                    for (p, c, h), n in sorted(self.counts.items())]
        text = json.dumps({"version": VERSION, "tool": "cglint", "findings": findings}, indent=2) + "\n"
        files.write(self.path, text, root=root, named=named)

    def filter(self, results: list[FileResult]) -> Outcome:
        """Drop the findings the baseline records (in place); count what was hidden and which
        entries are stale (for the files checked here, and for files that no longer exist)."""
        budget = Counter(self.counts)
        used: Counter[Key] = Counter()
        hidden = 0
        checked: set[str] = set()
        for result in results:
            checked.add(relative(result.path, self.anchor))
            kept = []
            for key, d in keys(result, self.anchor):
                if budget[key] > 0:
                    budget[key] -= 1
                    used[key] += 1
                    hidden += 1
                else:
                    kept.append(d)
            result.diagnostics = kept
        stale: Counter[Key] = Counter()
        for key, n in self.counts.items():
            left = n - used[key]
            if left > 0 and (key[0] in checked or not (self.anchor / key[0]).exists()):
                stale[key] = left
        return Outcome(hidden, stale)

    def recorded(self, result: FileResult) -> set[int]:
        """The ids of `result`'s findings this baseline records (as `filter` would hide them,
        counting within the file): `--fix` leaves their fixes alone."""
        budget = Counter(self.counts)
        out = set()
        for key, d in keys(result, self.anchor):
            if budget[key] > 0:
                budget[key] -= 1
                out.add(id(d))
        return out

    def pruned(self, stale: Counter[Key]) -> Baseline:
        return Baseline(self.path, self.counts - stale)


@dataclass
class Outcome:
    hidden: int  # findings the baseline hid
    stale: Counter[Key]  # entries that matched nothing: key -> how many

    @property
    def stale_count(self) -> int:
        return sum(self.stale.values())
