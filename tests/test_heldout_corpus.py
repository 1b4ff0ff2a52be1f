"""The held-out corpora (fixtures/heldout/ and fixtures/heldout2/, labels in each LABELS.toml,
each label confirmed with TensorFlow by `python bench/heldout.py --corpus DIR --verify`): correct
modules keep their measured static status (no finding, or the false findings listed as
`known_false`) and the bugs cglint catches statically stay caught. Misses are labelled
`static = "missed"` and not asserted here (bench/heldout.py reports them); no TensorFlow runs here."""

import importlib.util
import json

import pytest

from support import ROOT
from tests.inprocess import cglint

_spec = importlib.util.spec_from_file_location("heldout_bench", ROOT / "bench" / "heldout.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

CORPORA = [ROOT / "fixtures" / "heldout", ROOT / "fixtures" / "heldout2"]
LABELS = [(corpus, label) for corpus in CORPORA for label in bench.labels(corpus)]


def _id(case):
    return f"{case[0].name}/{case[1]['path']}"


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Each corpus's report, linted as the benchmark lints it: the whole corpus in one run, so
    packages' imports are followed."""
    done = {}

    def report(corpus):
        if corpus not in done:
            out = tmp_path_factory.mktemp(corpus.name) / "report.json"
            run = cglint("--isolated", "--no-cache", "--output-format", "json", "--output-file", out,
                         bench.rel(corpus), cwd=ROOT)
            assert run.returncode == 1, run.stderr
            done[corpus] = json.loads(out.read_text())
        return done[corpus]

    return report


@pytest.mark.parametrize("corpus", CORPORA, ids=lambda c: c.name)
def test_labels_cover_the_corpus_and_are_well_formed(corpus):
    labels = bench.labels(corpus)
    paths = {p.name for p in corpus.iterdir() if p.suffix == ".py" or p.is_dir() and p.name != "__pycache__"}
    assert paths == {label["path"] for label in labels}
    buggy = [label for label in labels if label["status"] == "buggy"]
    assert len(labels) >= 16 and len(buggy) * 3 >= len(labels) * 1.5 and len(buggy) < len(labels)
    for label in labels:
        assert label["status"] in ("buggy", "correct") and label["bug"] and label["drive"]
        if label["status"] == "buggy":
            assert label["class"] and label["function"] and label["at"]
            assert all(label[kind] in ("caught", "missed") for kind in ("static", "runtime", "trace"))
            if "missed" in (label["static"], label["runtime"], label["trace"]):
                assert len(label.get("miss", "")) > 30, f"{label['path']}: say why it is missed"
            for at in label["at"]:
                path, line = at.rsplit(":", 1)
                assert 1 <= int(line) <= len((corpus / path).read_text().splitlines()), at


@pytest.mark.parametrize("case", [x for x in LABELS if x[1]["status"] == "correct"], ids=_id)
def test_correct_module_keeps_its_status(reports, case):
    corpus, label = case
    found = bench.static_findings(label, reports(corpus), corpus)
    allowed = {tuple(f) for f in label.get("known_false", [])}
    assert {(f"{p}:{n}", c) for p, n, c in found} == allowed


@pytest.mark.parametrize("case", [x for x in LABELS if x[1].get("static") == "caught"], ids=_id)
def test_caught_bug_stays_caught(reports, case):
    corpus, label = case
    assert bench.caught_statically(label, bench.static_findings(label, reports(corpus), corpus))


def test_the_matching_rule_needs_the_code_at_the_line():
    label = {"path": "m.py", "codes": ["CG005"], "at": ["m.py:12"]}
    assert bench.caught_statically(label, [("m.py", 12, "CG005")])
    assert not bench.caught_statically(label, [("m.py", 13, "CG005"), ("m.py", 12, "CG009")])
