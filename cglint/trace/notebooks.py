"""`cglint trace -- jupyter nbconvert --to notebook --execute NB.ipynb`: the kernel nbconvert
starts inherits the trace's environment, so its custom gradients are checked, but IPython
compiles each cell as a file of its own (`/tmp/ipykernel_<pid>/<hash>.py`) that exists only in
the kernel. This maps such a function back to the notebook named on the command line: the code
cell whose line `firstlineno` starts the decorated def of that name (cells are masked as cglint
lints them, so their lines are the kernel's). The event then names the notebook and the line of
its code cells as one module, as `--runtime` and the static findings count them."""

from __future__ import annotations

import os
import re

# Where IPython and ipykernel say a cell's code comes from.
_CELL_FILE = re.compile(r"(?:^|[/\\])ipykernel_\d+[/\\]\d+\.py$|^<ipython-input-\d+-[0-9a-f]+>$")
_DEF = re.compile(r"(?:async[ \t]+)?def[ \t]+(\w+)")  # matched on a stripped line (linear)


def notebooks_in(command: list[str]) -> list[str]:
    """The notebooks the command names (`jupyter nbconvert --execute NB.ipynb`, `papermill ...`)."""
    return [a for a in command if a.endswith(".ipynb") and os.path.isfile(a)]


def remap(events: list[dict], command: list[str]) -> list[dict]:
    """`events` with each function of an IPython cell moved to its notebook (in place)."""
    paths = notebooks_in(command)
    if not paths:
        return events
    books = []
    for path in paths:
        try:
            from cglint import notebook

            books.append((path, notebook.read(notebook.read_text(path))))
        except Exception:  # not a notebook cglint can read: its functions keep the kernel's paths
            continue
    for e in events:
        k = e.get("function") or {}
        if not _CELL_FILE.search(str(k.get("path", ""))):
            continue
        found = _locate(books, str(k.get("qualname", "")), k.get("firstlineno", 0))
        if found is not None:
            e["function"] = {**k, "path": found[0], "firstlineno": found[1]}
    return events


def _locate(books, qualname: str, firstlineno: int) -> tuple[str, int] | None:
    name = qualname.rsplit(".", 1)[-1]
    for path, book in books:
        for cell in book.cells:
            lines = cell.code.splitlines()
            for line in lines[firstlineno - 1:firstlineno + 19]:  # decorators, then the def
                stripped = line.strip()
                if not stripped or stripped.startswith(("@", "#")):
                    continue
                m = _DEF.match(stripped)
                if m and m.group(1) == name:
                    return os.path.abspath(path), cell.start + firstlineno - 1
                break
    return None
