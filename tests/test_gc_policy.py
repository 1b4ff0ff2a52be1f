"""The collector around a lint (`engine.paused_gc`): off while the tree is built, the survivors
moved to the oldest generation without a scan, and a full collection before a lint once more
than `RETAINED_LIMIT` of them wait, so that linting many modules in one process (a CLI run
over a repository, the language server, `pytest --cglint`) keeps its memory bounded."""

from __future__ import annotations

import gc

import pytest

from cglint import engine

SITE = '''
@tf.custom_gradient
def op_{i}(x):
    e = tf.exp(x)

    def grad(dy):
        return dy * (1 - 1 / (1 + e))

    return tf.math.log(1 + e), grad
'''
MODULE = "import tensorflow as tf\n" + "".join(SITE.format(i=i) for i in range(150))
# The memory a lint leaves is its tree and model, whichever rules ask: the structural rules keep
# the test's dozen lints cheap (the value rules would evaluate 150 sites each time).
STRUCTURAL = ("CG001", "CG002", "CG004")


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    gc.collect()
    yield
    if not was:
        gc.disable()


def test_many_lints_keep_memory_bounded(monkeypatch, collector_on):
    monkeypatch.setattr(engine, "RETAINED_LIMIT", 100_000)
    engine.lint_source(MODULE, "m.py", STRUCTURAL)  # whatever the first lint imports stays
    gc.collect()
    baseline = len(gc.get_objects())
    per_lint = []
    for _ in range(12):
        result = engine.lint_source(MODULE, "m.py", STRUCTURAL)
        assert result.model is not None and len(result.model.sites) == 150
        per_lint.append(len(gc.get_objects()))
        del result  # the model holds cycles: only the collector frees them
    one_module = per_lint[0] - baseline
    assert one_module > 20_000  # the lint did leave a tree to collect
    # Without the full collections every lint's tree would still be there: 12 modules' worth.
    assert max(per_lint) - baseline < engine.RETAINED_LIMIT + 2 * one_module


def test_the_survivors_are_not_left_for_the_next_young_collection(collector_on):
    # Re-enabled as it was, the collector would find every object the lint allocated in its
    # young generation and scan them all at the next allocation; moved, nothing is pending.
    young = [g["collections"] for g in gc.get_stats()[:2]]
    result = engine.lint_source(MODULE, "m.py", STRUCTURAL)
    assert [g["collections"] for g in gc.get_stats()[:2]] == young  # no young scan at the end
    assert gc.get_count()[0] < 1000
    assert result.model is not None and len(result.model.sites) == 150


def test_someone_elses_freeze_is_left_alone(collector_on):
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        engine.lint_source(MODULE, "m.py", STRUCTURAL)
        # Not unfrozen (0) nor frozen again (everything alive added); a few frozen objects a
        # previous lint left in its per-lint caches may be freed by this one.
        assert frozen - 100 <= gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


def test_the_collector_is_back_on_after_a_lint_and_stays_off_if_it_was(collector_on):
    engine.lint_source(MODULE, "m.py", STRUCTURAL)
    assert gc.isenabled()
    gc.disable()
    try:
        engine.lint_source(MODULE, "m.py", STRUCTURAL)
        assert not gc.isenabled()
    finally:
        gc.enable()
