"""The prefilter is a prefilter: on a project whose files call other modules' custom gradients
through every import form (bench/synthetic_project.py), each file's findings with the prefilter
equal its findings with every file analysed in full, and the files it lets through are the ones
that hold or call a site: a file that only imports a site module and makes some other keyword
call is not parsed."""

import importlib.util
import sys
from pathlib import Path

import pytest

from cglint import files, quickscan
from cglint.engine import lint_source

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("synthetic_project", ROOT / "bench" / "synthetic_project.py")
synthetic = importlib.util.module_from_spec(spec)
sys.modules["synthetic_project"] = synthetic
spec.loader.exec_module(synthetic)


def _findings(path: Path, prefilter: bool) -> list[tuple]:
    result = lint_source(path.read_text(), str(path), prefilter=prefilter)
    return [(d.line, d.column, d.code) for d in result.diagnostics]


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return synthetic.make(tmp_path_factory.mktemp("synthetic"), files=120, site_share=0.05, caller_share=0.4)


def test_findings_equal_a_run_without_the_prefilter(project):
    paths = sorted(project.glob("*.py"))
    differ = {p.name: (_findings(p, True), _findings(p, False)) for p in paths
              if _findings(p, True) != _findings(p, False)}
    assert differ == {}
    # The project is not trivially clean: every caller form is found by a full analysis.
    callers = [p for p in paths if p.name.startswith("c") and "x=t" in p.read_text()]
    assert len(callers) >= 40 and sum(1 for p in callers if _findings(p, False)) >= len(callers) // 2


def test_only_files_that_hold_or_call_a_site_get_through(project):
    through = {p.name for p in project.glob("*.py")
               if files.may_hold_site(p.read_text()) or quickscan.calls_project_site(p.read_text(), str(p))[0]}
    plain = {p.name for p in project.glob("c*.py") if "helper_" in p.read_text()}
    callers = {p.name for p in project.glob("c*.py") if "x=t" in p.read_text()}
    sites = {p.name for p in project.glob("m*.py")}
    assert plain and not plain & through
    assert sites <= through and callers <= through


def test_exports_follow_re_exports_tables_and_factories(project):
    assert {"op_0"} <= quickscan.exports(str(project / "m0.py"))
    assert "helper_0" not in quickscan.exports(str(project / "m0.py"))
    assert {"op_0", "op_1"} <= quickscan.exports(str(project / "__init__.py"))
    assert "OPS" in quickscan.exports(str(project / "registry.py"))
    assert "make_0" in quickscan.exports(str(project / "factories.py"))
