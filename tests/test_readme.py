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


def test_the_layout_names_every_module_and_fixture_directory():
    """A newcomer reads the README's layout to find where a file flows: nothing in `cglint/` or
    `fixtures/` may be missing from it."""
    import re

    readme = (ROOT / "README.md").read_text()
    layout = re.search(r"## Layout\n\n```\n(.*?)```", readme, re.S).group(1)
    named = set(re.findall(r"[\w./]+", layout))
    pkg = ROOT / "cglint"
    wanted = {p.name for p in pkg.glob("*.py") if p.name not in {"__init__.py", "__main__.py"}}
    wanted |= {f"{p.name}/" for p in pkg.iterdir() if (p / "__init__.py").is_file()}
    wanted |= {p.name for p in (pkg / "model").glob("*.py") if p.name != "__init__.py"}
    wanted |= {f"{p.name}/" for p in (ROOT / "fixtures").iterdir() if p.is_dir()}
    missing = sorted(w for w in wanted if w not in named and w.rstrip("/") + "/" not in named)
    assert not missing, f"README's layout does not name: {missing}"
