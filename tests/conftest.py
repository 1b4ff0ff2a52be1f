"""Markers for the whole suite, so that a subset can be chosen without reading the tests:

- `tensorflow`: needs TensorFlow (imports it, or runs code that does): everything under
  `tests/runtime/`, and the modules named in TENSORFLOW;
- `slow`: a test module (or, in SLOW_TESTS, one test) that takes tens of seconds to minutes of
  CPU (subprocess matrices, real editors and pre-commit, the fuzz and regex campaigns, whole
  corpora linted several ways, TensorFlow started in child processes). The default suite
  (`pytest -n auto`, `.ci/run`) runs them; `pytest -m "not slow"` is the quick loop (the rules,
  the model, the evaluator, fixes, the CLI, the server, TensorFlow in process);
- `benchmark`: a measurement rather than a check of one behaviour (the metamorphic matrix over
  every rule example): not in the default suite, run by `pytest -m benchmark`;
- `install`: the install and CI recipes run verbatim, each installing cglint and TensorFlow into
  a fresh virtual environment from a clone (pip's work, not cglint's: minutes of disk and CPU):
  not in the default suite, run by `pytest -m install` (`.ci/run` runs it after the suite).

`-n auto` starts twice as many workers as CPUs (at most four more): most tests wait on a child
process (cglint, TensorFlow, pip, an editor) for much of their time, so one worker per CPU
leaves the CPUs idle for a third of the run.

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
    "test_cache.py", "test_trust.py", "test_robustness_parse.py", "test_robustness_paths.py", "test_flake8.py",
    "test_channels.py", "test_runtime_cli.py", "test_runtime_fixtures.py", "test_runtime_hostile.py",
    "test_fix_then_runtime.py", "test_upstream_shape_only.py", "test_runtime_import_failure.py",
    "test_keras_fixes.py", "test_trace_memory.py", "test_runtime_runner.py",
}
SLOW_TESTS = {"test_fix.py::test_fix_every_fixture", "test_rule_docs.py::test_a_stale_page_is_caught"}
BENCHMARK = {"test_metamorphic.py", "test_metamorphic_runtime.py"}
INSTALL = {"test_install_recipes.py"}
APART = {"benchmark": BENCHMARK, "install": INSTALL}  # tiers run only when their marker is asked for


def pytest_xdist_auto_num_workers(config):
    import os

    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return min(2 * cpus, cpus + 4)
TENSORFLOW = {"test_project.py", "test_model_boundaries.py", "test_pre_commit.py", "test_cross_module.py"}


def pytest_collection_modifyitems(config, items):
    asked = config.getoption("markexpr", "") or ""
    apart = set().union(*(names for marker, names in APART.items() if marker not in asked))
    kept, dropped = [], []
    for item in items:
        (kept if Path(str(item.fspath)).name not in apart else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    for item in items:
        path = Path(str(item.fspath))
        if "runtime" in path.relative_to(TESTS).parts[:-1] or path.name in TENSORFLOW:
            item.add_marker(pytest.mark.tensorflow)
        if path.name in SLOW or f"{path.name}::{item.originalname}" in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
        if path.name in BENCHMARK:
            item.add_marker(pytest.mark.benchmark)
        if path.name in INSTALL:
            item.add_marker(pytest.mark.install)
