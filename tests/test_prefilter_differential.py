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


def test_a_warm_run_answers_as_a_cold_one_and_sees_a_changed_import(tmp_path):
    """Files quiet by the project index are remembered with the index's snapshot: a warm run
    stats them, gives the findings a run without the cache gives, and a module they import
    that starts defining a custom gradient makes them candidates again."""
    import os
    import time

    from cglint import batch
    from cglint.cache import Cache
    from cglint.rules import CODES

    pkg = synthetic.make(tmp_path / "tree", files=24, site_share=0.1, caller_share=0.3)
    past = time.time() - 60  # older than the index's racy window
    for p in [*pkg.rglob("*"), pkg, pkg.parent]:
        os.utime(p, (past, past))
    paths = sorted(str(p) for p in pkg.glob("*.py"))
    plain = [p for p in paths if "helper_" in open(p).read() and os.path.basename(p).startswith("c")]

    def run(cache):
        return {r.path: [(d.line, d.column, d.code) for d in r.diagnostics]
                for r in batch.lint_paths(paths, lambda _: list(CODES), cache=cache, jobs=1)}

    cold = run(None)
    assert any(cold.values()) and plain
    assert run(Cache(tmp_path / "cache", "k")) == cold
    warm = Cache(tmp_path / "cache", "k")
    assert all(warm.quiet(p) for p in plain)  # by the snapshot: nothing imported changed
    assert run(warm) == cold
    # A helper that the plain files call by keyword becomes a custom gradient.
    k = open(plain[0]).read().split("helper_")[1].split()[0]
    site = pkg / f"m{k}.py"
    site.write_text(site.read_text().replace(f"def helper_{k}", f"@tf.custom_gradient\ndef helper_{k}"))
    os.utime(site, (past + 1, past + 1))
    later = Cache(tmp_path / "cache", "k")
    assert not later.quiet(plain[0])
    assert run(later) == run(None)
