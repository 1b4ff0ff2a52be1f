"""The README and the pages under docs/: CI runs the test command exactly; the demo prints what
the README quotes; the README stays short and its rule table is the rules'; every link resolves;
every `cglint` command line in a code block is one the real argument parsers accept, and every
script a code block runs takes the options it is shown with."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# The pages a user reads: the README, docs/*.md (docs/rules/ is generated and tested by
# tests/test_rule_docs.py) and ARCHITECTURE.md.
PAGES = [README, *sorted((ROOT / "docs").glob("*.md")), *[p for p in [ROOT / "ARCHITECTURE.md"] if p.exists()]]


def _blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced code block."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)


# What a command line starts with (output quoted in a block, such as a finding, is not a command).
_COMMANDS = r"(cglint|python3?|pytest|pip|cat)(\s|$)"


def _command_lines(text: str) -> list[str]:
    """The shell command lines of a page's code blocks (sh, bash and unlabelled): each line's
    command, without its comment or the description in a second column."""
    lines = []
    for lang, body in _blocks(text):
        if lang not in ("", "sh", "bash"):
            continue
        for line in body.splitlines():
            command = re.split(r"\s{2,}|\s#\s", line.strip(), maxsplit=1)[0].strip()
            if re.match(_COMMANDS, command):
                lines.append(command)
    return lines


def test_ci_runs_the_readme_test_command():
    """.ci/run runs command 2 verbatim, then the install tier the README names."""
    commands = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if "pytest" in line
                and not line.startswith("#")]
    assert len(commands) == 2, commands
    suite, install = commands
    assert suite in README.read_text() and "pytest" in suite and ".[test]" in suite
    assert install.endswith("-m install") and install in README.read_text()


def test_command_1_prints_what_the_readme_says():
    """The demo's closing lines, as the README quotes them (cglint on the bundled fixtures)."""
    readme = README.read_text()
    quoted = re.search(r"ends with\n\n```\n(Found .*?)\n```", readme, re.S).group(1)
    run = subprocess.run([sys.executable, "-m", "cglint", "--no-cache", "fixtures/"], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "NO_COLOR": "1"})
    assert run.returncode == 1
    assert run.stdout.rstrip("\n").endswith(quoted), run.stdout[-400:]


def test_the_readme_is_short():
    size = len(README.read_bytes())
    assert size <= 12_000, f"README.md is {size} bytes: move detail into docs/"


def test_the_readme_rule_table_is_the_rules():
    """One row per rule, in catalogue order, with the code, name and summary the rule module
    has (scripts/rule_docs.py writes the table; `--check` is run by tests/test_rule_docs.py)."""
    from cglint.rules import CODES, OPT_IN, rules

    readme = README.read_text()
    block = re.search(r"^<!-- rules: .*?-->\n(.*?)^<!-- /rules -->", readme, re.S | re.M)
    assert block, "the README has no generated rule table"
    rows = [r for r in block.group(1).splitlines() if r.startswith("| [")]
    wanted = rules([*CODES, *OPT_IN])
    assert len(rows) == len(wanted)
    for row, rule in zip(rows, wanted):
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert cells[0] == f"[{rule.code}](docs/rules/{rule.code}.md)"
        assert cells[1] == f"`{rule.name}`"
        assert cells[2] == rule.summary, f"{rule.code}: the README says {cells[2]!r}"


def test_a_drifted_readme_table_is_caught():
    """The generator rewrites exactly the marked block, so a hand edit there is reported."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import rule_docs
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    from cglint.rules import CODES, OPT_IN, rules

    all_rules = rules([*CODES, *OPT_IN])
    current = README.read_text()
    assert rule_docs.readme(all_rules, current) == current
    drifted = current.replace("| `output-derivative` |", "| `output-derivative` | (edited)", 1)
    assert drifted != current and rule_docs.readme(all_rules, drifted) == current


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    text = page.read_text()
    missing = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        if not (page.parent / path).exists():
            missing.append(target)
    assert not missing, f"{page.name} links to missing files: {missing}"


def _all_commands() -> list[tuple[str, str]]:
    return [(str(p.relative_to(ROOT)), c) for p in PAGES for c in _command_lines(p.read_text())]


def test_the_pages_show_commands():
    commands = [c for _, c in _all_commands()]
    # The pages moved out of the README keep their commands (and this test finds them).
    assert any(c.startswith("cglint --write-baseline") for c in commands)
    assert any(c.startswith("cglint trace --calls 3") for c in commands)
    assert any(c.startswith("python scripts/fuzz.py") for c in commands)
    assert len(commands) >= 40


def _cglint_argv(command: str) -> list[str] | None:
    """The arguments after `cglint` in a command line (`cat f | cglint ...` too), else None."""
    words = shlex.split(command)
    if "cglint" not in words:
        return None
    return words[words.index("cglint") + 1:]


@pytest.mark.parametrize("where,command", [wc for wc in _all_commands() if _cglint_argv(wc[1]) is not None],
                         ids=lambda v: v if "/" not in v or " " in v else "")
def test_every_cglint_command_is_accepted_by_its_parser(where, command, capsys):
    """Each `cglint ...` line of a code block parses with the parser the command uses; a usage
    error (an option renamed, a value no longer accepted) fails here."""
    argv = _cglint_argv(command)
    if argv[:1] == ["check"]:
        argv = argv[1:]
    if argv[:1] == ["lsp"]:
        shown = {w.split("=", 1)[0] for w in argv[1:] if w.startswith("-")}
        run = subprocess.run([sys.executable, "-m", "cglint", "lsp", "--help"], capture_output=True, text=True,
                             cwd=ROOT)
        assert run.returncode == 0 and all(o in run.stdout for o in shown), (command, run.stdout)
        return
    if argv[:1] == ["trace"]:
        from cglint.trace.command import build_parser

        assert "--" in argv, f"{where}: `{command}` has no `-- COMMAND`"
        parse = build_parser().parse_args
        own = argv[1:argv.index("--")]
    else:
        from cglint.cli import parse_args as parse

        own = argv
    try:
        parse(own)
    except SystemExit as exc:
        pytest.fail(f"{where}: `{command}` is a usage error ({exc.code}): {capsys.readouterr().err}")


@pytest.mark.parametrize("where,command",
                         [wc for wc in _all_commands() if re.match(r"python3? (scripts|bench)/\w+\.py", wc[1])],
                         ids=lambda v: v if "/" not in v or " " in v else "")
def test_every_script_command_takes_its_options(where, command):
    words = shlex.split(command)
    script = ROOT / words[1]
    assert script.is_file(), f"{where}: {words[1]} does not exist"
    run = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    shown = [w.split("=", 1)[0] for w in words[2:] if w.startswith("--")]
    assert all(o in run.stdout for o in shown), (command, run.stdout)


def test_every_pytest_command_takes_its_options():
    """`pytest --cglint...` lines: the plugin (entry point pytest11) offers each option shown."""
    commands = [c for _, c in _all_commands() if c.startswith("pytest ")]
    assert commands
    run = subprocess.run([sys.executable, "-m", "pytest", "--help"], capture_output=True, text=True, cwd=ROOT,
                         timeout=300)
    for command in commands:
        for option in (w for w in shlex.split(command) if w.startswith("--")):
            assert re.search(rf"^\s+{re.escape(option)}\b", run.stdout, re.M), (command, run.stdout[-2000:])
