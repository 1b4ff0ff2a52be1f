"""Runtime tests need real TensorFlow; without it the whole directory is skipped."""

import importlib.util
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# tests/support.py for every test here, whichever file pytest happens to import first.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

collect_ignore_glob = [] if importlib.util.find_spec("tensorflow") else ["test_*.py"]
