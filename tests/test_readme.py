"""The README's two commands: CI runs the test command exactly; the demo prints what the README quotes."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci in (ROOT / "README.md").read_text()
    assert "pytest" in ci and ".[test]" in ci


def test_command_1_prints_what_the_readme_says():
    """The demo's closing lines, as the README quotes them (cglint on the bundled fixtures)."""
    import re
    import subprocess
    import sys

    readme = (ROOT / "README.md").read_text()
    quoted = re.search(r"ends with\n\n```\n(Found .*?)\n```", readme, re.S).group(1)
    run = subprocess.run([sys.executable, "-m", "cglint", "--no-cache", "fixtures/"], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "NO_COLOR": "1"})
    assert run.returncode == 1
    assert run.stdout.rstrip("\n").endswith(quoted), run.stdout[-400:]
