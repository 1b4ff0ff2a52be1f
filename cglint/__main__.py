"""`python -m cglint`. Python puts the current directory first on sys.path for `-m`, so a
checkout's `dataclasses.py` or `difflib.py` would be imported in place of the standard
library's when cglint first needs them: drop it before importing anything (as pip does). cglint
itself is already imported by then, so its own modules still resolve."""

import os
import sys

if sys.path and (sys.path[0] == "" or os.path.realpath(sys.path[0]) == os.path.realpath(os.getcwd())):
    del sys.path[0]

from cglint.cli import entry  # noqa: E402

entry()
