"""Importing cglint, or the runner's parent side, must not import TensorFlow."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_tensorflow_without_check():
    code = ("import sys, cglint, cglint.runtime, cglint.runtime.runner, cglint.runtime.spec\n"
            "from cglint.runtime import GradientReport, ArgResult\n"
            "from cglint.runtime.spec import parse_spec, candidate_specs\n"
            "parse_spec('normal(2, 3)'); candidate_specs('def f(x): ...', 'f')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('tensorflow', 'numpy')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "[]"
