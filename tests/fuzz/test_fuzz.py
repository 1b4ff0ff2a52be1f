"""The short fuzz run of the default suite (about a minute): the properties of
tests/fuzz/harness.py on mutations of every rule example and fixture, and on generated programs
(hypothesmith) with custom-gradient sites inserted. The long run is `python scripts/fuzz.py`."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz import harness

SEEDS = harness.seeds()
FAST = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


@FAST
@given(st.sampled_from(SEEDS), st.randoms(use_true_random=False))
def test_mutated_examples_keep_the_properties(source, rnd):
    mutated, _ = harness.mutate(source, rnd)
    harness.check(mutated)


@FAST
@given(st.sampled_from(SEEDS), st.randoms(use_true_random=False), st.sampled_from(["utf-8", "latin-1", "utf-16"]))
def test_encoded_examples_keep_the_properties(source, rnd, encoding):
    mutated, _ = harness.mutate(source, rnd, count=1)
    if len(mutated) > 20_000:  # --huge: the other test has it
        mutated = mutated[:20_000]
    cookie = f"# -*- coding: {encoding} -*-\n" if encoding != "utf-8" else ""
    try:
        data = (cookie + mutated).encode(encoding)
    except UnicodeEncodeError:
        data = (cookie + mutated).encode(encoding, "replace")
    harness.check_bytes(data)


@settings(max_examples=3, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_generated_programs_with_sites_keep_the_properties(data):
    hypothesmith = pytest.importorskip("hypothesmith")
    program = data.draw(hypothesmith.from_grammar())
    harness.check(harness.with_sites(program, data.draw(st.randoms(use_true_random=False))))


@pytest.mark.parametrize("seed", range(40))
def test_hostile_environments_keep_the_trust_rules(seed):
    """tests/fuzz/trust.py: links out of the tree, hostile configuration, caches, stdin
    encodings and notebook JSON (the long run: scripts/fuzz.py --trust)."""
    import random

    from tests.fuzz import trust

    trust.check(random.Random(seed))
