"""[tool.cglint] in pyproject.toml: discovery, selection layers, excludes, per-file-ignores,
runtime settings, and one-line errors (exit 2) for anything wrong."""

import json
import os

import pytest
from support import BAD, cglint

from cglint import config


def findings(*args, cwd):
    run = cglint("--output-format", "json", *args, cwd=cwd)
    assert run.returncode in (0, 1), run.stderr
    return sorted((d["path"], d["code"]) for d in json.loads(run.stdout)["diagnostics"])


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "ops.py").write_text(BAD)
    return tmp_path


def write_config(root, body):
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n\n[tool.cglint]\n" + body)


def test_found_upward_from_the_first_path_and_select_ignore(project):
    write_config(project, 'ignore = ["CG004"]\n')
    # A pyproject without [tool.cglint] in between is passed over.
    (project / "pkg" / "pyproject.toml").write_text("[project]\nname = 'inner'\n")
    assert findings("pkg/ops.py", cwd=project) == [("pkg/ops.py", "CG005")]
    assert findings("ops.py", cwd=project / "pkg") == [("ops.py", "CG005")]
    assert findings("--isolated", "ops.py", cwd=project / "pkg") == [("ops.py", "CG004"), ("ops.py", "CG005")]


def test_cli_select_starts_over_and_extend_select_adds(project):
    write_config(project, 'select = ["CG005"]\nignore = ["CG004"]\n')
    assert findings("pkg", cwd=project) == [("pkg/ops.py", "CG005")]
    # --select replaces the file's selection *and* its ignore, as in ruff.
    assert findings("--select", "CG004", "pkg", cwd=project) == [("pkg/ops.py", "CG004")]
    assert findings("--extend-select", "CG004", "pkg", cwd=project) == [("pkg/ops.py", "CG004"), ("pkg/ops.py", "CG005")]
    assert findings("--ignore", "CG005", "pkg", cwd=project) == []


def test_per_file_ignores(project):
    (project / "tests").mkdir()
    (project / "tests" / "test_ops.py").write_text(BAD)
    write_config(project, '[tool.cglint.per-file-ignores]\n"tests/**" = ["CG005"]\n"ops.py" = ["CG004"]\n')
    assert findings(".", cwd=project) == [("pkg/ops.py", "CG005"), ("tests/test_ops.py", "CG004")]


def test_exclude_extend_exclude_and_force_exclude(project):
    (project / "gen").mkdir()
    (project / "gen" / "ops_pb.py").write_text(BAD)
    (project / "build").mkdir()
    (project / "build" / "ops.py").write_text(BAD)
    write_config(project, 'extend-exclude = ["gen/", "*_pb.py"]\n')
    assert {p for p, _ in findings(".", cwd=project)} == {"pkg/ops.py"}
    # Named explicitly: linted, unless --force-exclude (what pre-commit hooks pass).
    assert {p for p, _ in findings("gen/ops_pb.py", cwd=project)} == {"gen/ops_pb.py"}
    run = cglint("--force-exclude", "gen/ops_pb.py", "build/ops.py", "pkg/ops.py", cwd=project)
    assert "gen/" not in run.stdout and "build/" not in run.stdout and "pkg/ops.py" in run.stdout
    # `exclude` replaces the defaults: build/ is linted again.
    write_config(project, 'exclude = ["gen"]\n')
    assert {p for p, _ in findings(".", cwd=project)} == {"pkg/ops.py", "build/ops.py"}
    assert {p for p, _ in findings("--extend-exclude", "pkg", ".", cwd=project)} == {"build/ops.py"}


def test_runtime_settings_are_parsed_and_exposed(project):
    write_config(project, "[tool.cglint.runtime]\ntimeout = 30\nrtol = 1e-4\natol = 0\nprobes = 5\n")
    settings = config.load(project / "pkg" / "ops.py")
    assert settings.runtime == config.RuntimeSettings(timeout=30.0, rtol=1e-4, atol=0.0, probes=5)
    assert settings.config_file == project / "pyproject.toml"
    assert config.RuntimeSettings() == config.RuntimeSettings(timeout=120.0, rtol=None, atol=None, probes=3)


def test_library_settings_rules_for(project):
    write_config(project, 'select = ["CG00"]\nignore = ["CG001"]\n[tool.cglint.per-file-ignores]\n"pkg/*" = ["CG005"]\n')
    settings = config.load(project)
    codes = lambda path: [r.code for r in settings.rules_for(path)]
    prefix = [f"CG00{i}" for i in range(10) if i != 1]  # "CG00" is a prefix: CG000-CG009
    assert codes(project / "other.py") == prefix
    assert codes(project / "pkg" / "ops.py") == [c for c in prefix if c != "CG005"]
    assert settings.with_overrides(select=["CG001"]).rules_for(project / "other.py")[0].code == "CG001"
    assert settings.is_excluded(project / ".venv", is_dir=True)


def test_config_file_option_reads_cglint_toml_at_top_level(project):
    (project / "cglint.toml").write_text('select = ["CG004"]\n')
    assert findings("--config", "cglint.toml", "pkg", cwd=project) == [("pkg/ops.py", "CG004")]


@pytest.mark.parametrize("body,message", [
    ('extend_select = ["CG001"]\n', "unknown key `extend_select` in [tool.cglint] in {}pyproject.toml (did you mean `extend-select`?)"),
    ('line-length = 88\n', "unknown key `line-length` in [tool.cglint] in {}pyproject.toml"),
    ('select = ["CG999"]\n', "unknown rule code or prefix: 'CG999' (in `select` in [tool.cglint] in {}pyproject.toml"),
    ('ignore = "CG001"\n', "`ignore` in [tool.cglint] in {}pyproject.toml must be a list of strings"),
    ('[tool.cglint.runtime]\ntimeout = -1\n', "`timeout` in [tool.cglint].runtime in {}pyproject.toml must be positive"),
    ('[tool.cglint.runtime]\nprobes = 1.5\n', "`probes` in [tool.cglint].runtime in {}pyproject.toml must be a positive integer"),
    ('[tool.cglint.runtime]\norder = 3\n', "`order` in [tool.cglint].runtime in {}pyproject.toml must be 1 or 2, not 3"),
    ('[tool.cglint.runtime]\nmemory-limit = "2GB"\n', "`memory-limit` in [tool.cglint].runtime in {}pyproject.toml must be a whole number of MiB (0: no limit), not '2GB'"),
    ('[tool.cglint.runtime]\nseed = 1\n', "unknown key `seed` in [tool.cglint].runtime in {}pyproject.toml"),
    ('select = [\n', "{}pyproject.toml: invalid TOML"),
])
def test_bad_configuration_is_one_line_and_exit_2(project, body, message):
    write_config(project, body)
    run = cglint("pkg", cwd=project)
    assert run.returncode == 2, run.stdout
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert message.format(str(project.resolve()) + os.sep) in run.stderr, run.stderr


def test_missing_config_file_is_exit_2(project):
    run = cglint("--config", "nope.toml", "pkg", cwd=project)
    assert run.returncode == 2 and "nope.toml: configuration file not found" in run.stderr


@pytest.mark.parametrize("pattern,path,is_dir,expected", [
    ("build", "build", True, True),
    ("build", "src/build/x.py", False, True),
    ("build/", "build", False, False),
    ("*.pyi", "a/b/c.pyi", False, True),
    ("src/gen/*.py", "src/gen/x.py", False, True),
    ("src/gen/*.py", "other/src/gen/x.py", False, False),
    ("/setup.py", "setup.py", False, True),
    ("/setup.py", "pkg/setup.py", False, False),
    ("**/migrations/*.py", "a/b/migrations/m.py", False, True),
    ("tests/**", "tests/a/b.py", False, True),
    ("test_[ab].py", "x/test_a.py", False, True),
    ("test_[!ab].py", "x/test_a.py", False, False),
])
def test_gitignore_style_globs(tmp_path, pattern, path, is_dir, expected):
    settings = config.Settings(root=tmp_path, exclude=(pattern,))
    assert settings.is_excluded(tmp_path / path, is_dir=is_dir, parents=True) is expected


def test_exclude_matching_by_name_agrees_with_the_glob_on_the_whole_path(tmp_path):
    """The exclusion matcher's shortcut (unanchored patterns tested on path components) gives
    what each glob gives on the whole relative path and its parents."""
    import itertools

    from cglint.config import Glob, _Matcher

    patterns = [".venv", "build/", "*.pyi", "gen_*", "a?c", "docs/*.py", "**/tests", "x[0-9]", "/top", "sub/dir/"]
    paths = ["a.py", ".venv/lib/x.py", "pkg/build/m.py", "build", "pkg/m.pyi", "gen_ops.py", "pkg/gen_x/y.py",
             "abc/d.py", "docs/a.py", "pkg/docs/a.py", "pkg/tests/t.py", "x1/y.py", "top/a.py", "pkg/top/a.py",
             "sub/dir/a.py", "q/sub/dir/a.py"]
    for k in (1, 2, 3):
        for chosen in itertools.combinations(patterns, k):
            matcher = _Matcher(tmp_path, tuple(chosen))
            globs = [Glob(p) for p in chosen]
            for rel, is_dir, parents in itertools.product(paths, (False, True), (False, True)):
                parts = rel.split("/")
                candidates = [("/".join(parts[: i + 1]), True) for i in range(len(parts) - 1)] if parents else []
                candidates.append((rel, is_dir))
                expected = any(g.matches(p, d) for p, d in candidates for g in globs)
                assert matcher.matches(str(tmp_path / rel), is_dir, parents) == expected, (chosen, rel, is_dir, parents)
