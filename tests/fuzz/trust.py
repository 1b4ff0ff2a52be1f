"""Fuzz classes for the trust boundaries (docs/threat-model.md): a random hostile environment,
the CLI run in this process on it, and the rules checked. `check(r)` picks one class:

- symlinks: a tree with links to files and directories inside and outside it; `--fix DIR`,
  `--output-file` and `--write-baseline` through them: nothing outside the tree changes;
- config: random `[tool.cglint]` globs and baselines (devices, FIFOs, directories, junk);
- cache: a cache directory with junk, links and forged entries: the report is the one
  `--no-cache` gives, or the cache is refused;
- stdin: a seed in a random encoding (cookie, BOM, CRLF): `cglint - --fix` gives the bytes a
  path fix writes, and the input unchanged when nothing is fixed;
- notebook: hostile notebook JSON (duplicate keys, huge numbers, NaN, truncation, nesting):
  `--fix` never writes a notebook it reports as unreadable.

Each raises harness.PropertyFailed (prop `trust-<class>`) when a rule breaks; an exception
escaping `cli.main` is a failure too."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

from tests.fuzz import harness

OP = ("import tensorflow as tf\n\n@tf.custom_gradient\ndef op(x):\n    y = tf.math.tan(x)\n"
      "    def grad(dy):\n        return dy * tf.math.cos(y)\n    return y, grad\n")


def _run(args: list[str], cwd: Path, stdin: bytes | None = None) -> tuple[int, bytes, str]:
    from cglint import cli

    out, err = io.StringIO(), io.StringIO()
    here, saved = os.getcwd(), sys.stdin
    os.chdir(cwd)
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(args)
    except BaseException as exc:  # noqa: BLE001 - what escapes is the failure
        raise harness.PropertyFailed("trust-exception", f"{type(exc).__name__}: {exc} in {args}") from None
    finally:
        os.chdir(here)
        sys.stdin = saved
    if code not in (0, 1, 2):
        raise harness.PropertyFailed("trust-exit", f"exit status {code} for {args}")
    return code, out.getvalue().encode("utf-8", "surrogateescape"), err.getvalue()


def _digest(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            p = Path(dirpath, name)
            if not p.is_symlink() and p.is_file():
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def symlinks(d: Path, r: random.Random) -> None:
    tree, outside = d / "tree", d / "outside"
    (tree / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "target.py").write_text(OP)
    (outside / "report.txt").write_text("keep\n")
    (tree / "own.py").write_text(OP)
    links = {"link.py": "../outside/target.py", "sub/up.py": "../../outside/target.py", "alias.py": "own.py",
             "out.sarif": "../outside/report.txt", "dirlink": "../outside", "sub/loop.py": "loop.py"}
    for name in r.sample(sorted(links), r.randint(1, len(links))):
        (tree / name).symlink_to(links[name])
    before = _digest(outside)
    args = r.choice([["--fix", "tree"], ["--fix", "--unsafe-fixes", "tree"], ["--output-file", "tree/out.sarif", "tree"],
                     ["--write-baseline", "tree/out.sarif", "tree"], ["--add-noqa", "tree"]])
    (tree / "pyproject.toml").write_text("[tool.cglint]\n")
    _run(["--no-cache", *args], d)
    if _digest(outside) != before:
        raise harness.PropertyFailed("trust-symlinks", f"a file outside the tree changed: {args}, links in "
                                     f"{sorted(str(p.relative_to(tree)) for p in tree.rglob('*') if p.is_symlink())}")


_GLOB_ALPHABET = "ab*?[]!-/\\.{}^:"


def config(d: Path, r: random.Random) -> None:
    (d / "op.py").write_text(OP)
    globs = ["".join(r.choice(_GLOB_ALPHABET) for _ in range(r.randint(1, 12))) for _ in range(r.randint(1, 4))]
    lines = ["[tool.cglint]", f"extend-exclude = {json.dumps(globs)}"]
    kind = r.choice(["none", "device", "fifo", "dir", "junk", "missing", "deep"])
    if kind == "device":
        lines.append('baseline = "/dev/zero"')
    elif kind == "fifo":
        os.mkfifo(d / "base.json")
        lines.append('baseline = "base.json"')
    elif kind == "dir":
        lines.append('baseline = "."')
    elif kind == "junk":
        (d / "base.json").write_bytes(bytes(r.randrange(256) for _ in range(r.randint(0, 200))))
        lines.append('baseline = "base.json"')
    elif kind == "missing":
        lines.append('baseline = "nope.json"')
    elif kind == "deep":
        (d / "base.json").write_text("[" * 100_000)
        lines.append('baseline = "base.json"')
    if r.random() < 0.5:
        lines += ["[tool.cglint.per-file-ignores]", f"{json.dumps(globs[0])} = [\"CG005\"]"]
    (d / "pyproject.toml").write_text("\n".join(lines) + "\n")
    _run(["--no-cache", "."], d)  # no exception, no hang, exit 0/1/2


def cache(d: Path, r: random.Random) -> None:
    from cglint import cache as caching, config as configuration

    (d / "pkg").mkdir()
    for i in range(3):
        (d / "pkg" / f"op{i}.py").write_text(OP.replace("def op", f"def op{i}"))
    (d / "pyproject.toml").write_text("[tool.cglint]\n")
    honest = _run(["--no-cache", "--output-format", "json", "pkg"], d)[1]
    settings = configuration.load(d)
    store = caching.Cache(d / ".cglint_cache", caching.settings_key(settings))
    store.directory.mkdir(parents=True)
    for i in range(3):
        entry = store._entry(str(d / "pkg" / f"op{i}.py"))
        what = r.choice(["devzero", "junk", "forged-types", "dir", "fifo", "none"])
        if what == "devzero":
            entry.symlink_to("/dev/zero")
        elif what == "junk":
            entry.write_bytes(bytes(r.randrange(256) for _ in range(r.randint(0, 300))))
        elif what == "forged-types":
            entry.write_text(json.dumps({"key": store._file_key(settings.codes_for(str(d / "pkg" / f"op{i}.py"))),
                                         "content": caching._digest(OP.replace("def op", f"def op{i}")),
                                         "parsed": True, "warnings": [r.choice([1, None, "w"])],
                                         "diagnostics": [{"line": r.choice(["1", -1, 2**40, None])}]}))
        elif what == "dir":
            entry.mkdir()
        elif what == "fifo":
            os.mkfifo(entry)
    if r.random() < 0.3:
        os.chmod(d / ".cglint_cache", 0o777)
    for _ in range(2):
        got = _run(["--output-format", "json", "pkg"], d)[1]
        if json.loads(got)["diagnostics"] != json.loads(honest)["diagnostics"]:
            raise harness.PropertyFailed("trust-cache", "a hostile cache changed the report")


def stdin(d: Path, r: random.Random) -> None:
    source = r.choice(harness.seeds())
    encoding = r.choice(["utf-8", "utf-8-bom", "latin-1", "cp1252"])
    if r.random() < 0.5:
        source = source.replace("\n", "\r\n")
    if encoding in ("latin-1", "cp1252"):
        source = f"# -*- coding: {encoding} -*-\n" + source + "\nNAME = 'caf\xe9'\n"
    try:
        data = (b"\xef\xbb\xbf" if encoding == "utf-8-bom" else b"") + source.encode(
            "utf-8" if encoding == "utf-8-bom" else encoding)
    except UnicodeEncodeError:
        return
    code, out, _ = _run(["-", "--fix", "--no-cache", "--stdin-filename", "m.py"], d, stdin=data)
    (d / "m.py").write_bytes(data)
    _run(["--fix", "--no-cache", "m.py"], d)
    if out != (d / "m.py").read_bytes():
        raise harness.PropertyFailed("trust-stdin", f"stdin --fix ({encoding}) differs from the path fix")


def notebook(d: Path, r: random.Random) -> None:
    cell = {"cell_type": "code", "id": "a", "metadata": {}, "execution_count": None, "outputs": [],
            "source": [line + "\n" for line in OP.splitlines()]}
    text = json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [cell]}, indent=1)
    how = r.choice(["dup-cells", "dup-source", "bignum", "nan", "truncate", "deep", "junk"])
    if how == "dup-cells":
        text = text[:-2] + ', "cells": [' + json.dumps(dict(cell, source=["x = 1\n"])) + "]}"
    elif how == "dup-source":
        text = text.replace('"source": [', '"source": ["y = 2\\n"], "source": [', 1)
    elif how == "bignum":
        text = text[:-2] + ', "n": ' + "9" * r.randint(4301, 6000) + "}"
    elif how == "nan":
        text = text.replace('"execution_count": null', '"execution_count": NaN')
    elif how == "truncate":
        text = text[:r.randrange(len(text))]
    elif how == "deep":
        text = text[:-2] + ', "n": ' + "[" * 5000 + "]" * 5000 + "}"
    else:
        i = r.randrange(len(text))
        text = text[:i] + r.choice(['"', "{", "}", ",", "\\", "\x00"]) + text[i:]
    (d / "nb.ipynb").write_text(text)
    code, out, _ = _run(["--no-cache", "--fix", "--output-format", "concise", "nb.ipynb"], d)
    if b"cannot read notebook" in out and (d / "nb.ipynb").read_text() != text:
        raise harness.PropertyFailed("trust-notebook", f"an unreadable notebook was written ({how})")


CLASSES = {"symlinks": symlinks, "config": config, "cache": cache, "stdin": stdin, "notebook": notebook}


def check(r: random.Random) -> str:
    """One hostile environment of a random class, in a directory of its own; returns the class."""
    name = r.choice(sorted(CLASSES))
    d = Path(tempfile.mkdtemp(prefix="cglint-fuzz-trust-"))
    try:
        CLASSES[name](d, r)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return name
