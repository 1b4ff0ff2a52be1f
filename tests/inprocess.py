"""`cglint ...` run in this process (cli.main with stdout/stderr captured and the working
directory changed): the same code path as the console script without a child's start-up cost,
for tests that run the CLI many times."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from pathlib import Path


def cglint(*args, cwd: Path | str) -> subprocess.CompletedProcess:
    from cglint import cli

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main([str(a) for a in args])
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(["cglint", *map(str, args)], code, out.getvalue(), err.getvalue())
