"""Runtime tests need real TensorFlow; without it the whole directory is skipped."""

import importlib.util
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

collect_ignore_glob = [] if importlib.util.find_spec("tensorflow") else ["test_*.py"]
