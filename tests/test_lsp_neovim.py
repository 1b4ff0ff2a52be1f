"""The Neovim recipe of docs/editor.md for the Neovim installed here, run as written: `nvim --headless`
with the snippet as its init.lua opens a file with a finding and shows cglint's diagnostic.
Skipped where no Neovim is installed (`.ci/run` installs Debian's)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NVIM = shutil.which("nvim")
pytestmark = pytest.mark.skipif(NVIM is None, reason="no nvim on PATH")

PROBE = """local ok = vim.wait(30000, function() return #vim.diagnostic.get(0) > 0 end, 100)
local lines = {}
for _, d in ipairs(vim.diagnostic.get(0)) do
  table.insert(lines, string.format('%d:%d %s', d.lnum + 1, d.col + 1, d.code or ''))
end
vim.fn.writefile(lines, os.getenv('CGLINT_NVIM_OUT'))
vim.cmd('qa!')
"""


def _version() -> tuple[int, int]:
    out = subprocess.run([NVIM, "--version"], capture_output=True, text=True).stdout
    major, minor = re.search(r"NVIM v(\d+)\.(\d+)", out).groups()
    return int(major), int(minor)


def _snippet(version: tuple[int, int]) -> str:
    heading = ("**Neovim** (0.11+" if version >= (0, 11) else
               "**Neovim 0.8–0.10**" if version >= (0, 8) else "**Neovim 0.7**")
    readme = (ROOT / "docs" / "editor.md").read_text()
    start = readme.index(heading)
    return re.search(r"```lua\n(.*?)```", readme[start:], re.S).group(1)


def test_the_readme_snippet_for_this_neovim_shows_the_finding(tmp_path):
    (tmp_path / "init.lua").write_text(_snippet(_version()))
    (tmp_path / "probe.lua").write_text(PROBE)
    (tmp_path / "pyproject.toml").write_text("[tool.cglint]\n")
    shutil.copy(ROOT / "fixtures" / "rules" / "cg005_bad.py", tmp_path / "bad.py")
    bin_dir = Path(sys.executable).parent  # the `cglint` of this environment, as a user's PATH has it
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": str(ROOT),
           "CGLINT_NVIM_OUT": str(tmp_path / "out.txt"), "HOME": str(tmp_path)}
    subprocess.run([NVIM, "--headless", "-u", "init.lua", "-c", "luafile probe.lua", "bad.py"], cwd=tmp_path,
                   env=env, timeout=120, capture_output=True, stdin=subprocess.DEVNULL)
    assert (tmp_path / "out.txt").read_text().split("\n")[0] == "10:21 CG005"
