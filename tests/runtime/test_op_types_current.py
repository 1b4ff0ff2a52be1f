"""`cglint/gradcheck/op_types.txt` lists the op types of the installed TensorFlow
(`scripts/op_types.py` regenerates it)."""

import importlib.util
from pathlib import Path

from cglint.gradcheck.optypes import op_types

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "op_types.py"


def test_the_shipped_op_types_are_the_installed_tensorflows():
    spec = importlib.util.spec_from_file_location("op_types_script", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert set(script.installed_op_types()) == set(op_types())
