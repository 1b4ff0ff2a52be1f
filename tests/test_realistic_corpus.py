"""The realistic corpus (fixtures/realistic, each module checked with TensorFlow): correct code,
so cglint finds nothing, and the mutation benchmark has sites to mutate in it."""

import sys

from support import ROOT

from cglint import engine

CORPUS = sorted((ROOT / "fixtures" / "realistic").glob("*.py"))


def test_the_corpus_is_there():
    assert len(CORPUS) >= 5


def test_no_finding_on_correct_code():
    found = {p.name: [(d.code, d.line) for d in engine.lint_file(str(p)).diagnostics] for p in CORPUS}
    assert found == {p.name: [] for p in CORPUS}


def test_the_mutation_benchmark_reads_it():
    sys.path.insert(0, str(ROOT / "bench"))
    import mutation

    assert set(CORPUS) <= set(mutation.fixture_corpus())
