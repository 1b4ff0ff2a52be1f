"""Markers for the whole suite, so that a subset can be chosen without reading the tests:

- `tensorflow`: needs TensorFlow (imports it, or runs code that does): everything under
  `tests/runtime/`, and the modules named in TENSORFLOW;
- `slow`: a test module that takes minutes of CPU on two cores (subprocess matrices, real
  editors and pre-commit, the fuzz and regex campaigns, TensorFlow under trace). The default
  suite (`pytest -n auto`, `.ci/run`) runs them; `pytest -m "not slow"` is the quick loop;
- `benchmark`: a measurement rather than a check of one behaviour (the metamorphic matrix over
  every rule example): not in the default suite, run by `pytest -m benchmark`.

Modules are marked by name here, in one place, rather than by decorators spread over files."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

SLOW = {
    "test_metamorphic.py", "test_round4.py", "test_regex_linear.py", "test_lsp_random_edits.py", "test_fuzz.py",
    "test_pre_commit.py", "test_install_recipes.py", "test_one_answer.py", "test_lsp_neovim.py", "test_trace.py",
    "test_realistic_corpus.py", "test_heldout_corpus.py", "test_real_reports_corpus.py", "test_op_coverage.py",
    "test_runtime_processes.py", "test_fix_verify.py", "test_example_behaviour.py", "test_rule_claims.py",
    "test_model_boundaries.py", "test_project.py", "test_html_browser.py",
}
BENCHMARK = {"test_metamorphic.py"}
TENSORFLOW = {"test_project.py", "test_model_boundaries.py", "test_pre_commit.py", "test_cross_module.py"}


def pytest_collection_modifyitems(config, items):
    wanted = "benchmark" in (config.getoption("markexpr", "") or "")
    kept, dropped = [], []
    for item in items:
        (kept if wanted or Path(str(item.fspath)).name not in BENCHMARK else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    for item in items:
        path = Path(str(item.fspath))
        if "runtime" in path.relative_to(TESTS).parts[:-1] or path.name in TENSORFLOW:
            item.add_marker(pytest.mark.tensorflow)
        if path.name in SLOW:
            item.add_marker(pytest.mark.slow)
        if path.name in BENCHMARK:
            item.add_marker(pytest.mark.benchmark)
