"""The held-out corpus (fixtures/heldout/, labels in LABELS.toml, each label confirmed with
TensorFlow by `python bench/heldout.py --verify`): correct modules get no static finding and the
bugs cglint catches statically stay caught. Misses are labelled `static = "missed"` and not
asserted here (bench/heldout.py reports them); no TensorFlow runs here."""

import importlib.util
import json

import pytest

from support import ROOT
from tests.inprocess import cglint

_spec = importlib.util.spec_from_file_location("heldout_bench", ROOT / "bench" / "heldout.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

LABELS = bench.labels()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    # As the benchmark lints it: the whole corpus in one run, so packages' imports are followed.
    out = tmp_path_factory.mktemp("heldout") / "report.json"
    run = cglint("--isolated", "--no-cache", "--output-format", "json", "--output-file", out, "fixtures/heldout",
                 cwd=ROOT)
    assert run.returncode == 1, run.stderr
    return json.loads(out.read_text())


def test_labels_cover_the_corpus_and_are_well_formed():
    paths = {p.name for p in bench.CORPUS.iterdir() if p.suffix == ".py" or p.is_dir() and p.name != "__pycache__"}
    assert paths == {label["path"] for label in LABELS}
    buggy = [label for label in LABELS if label["status"] == "buggy"]
    assert len(LABELS) >= 16 and len(buggy) * 3 >= len(LABELS) * 1.5 and len(buggy) < len(LABELS)
    for label in LABELS:
        assert label["status"] in ("buggy", "correct") and label["bug"] and label["drive"]
        if label["status"] == "buggy":
            assert label["class"] and label["function"] and label["at"]
            assert all(label[kind] in ("caught", "missed") for kind in ("static", "runtime", "trace"))
            if "missed" in (label["static"], label["runtime"], label["trace"]):
                assert len(label.get("miss", "")) > 30, f"{label['path']}: say why it is missed"
            for at in label["at"]:
                path, line = at.rsplit(":", 1)
                assert 1 <= int(line) <= len((bench.CORPUS / path).read_text().splitlines()), at


@pytest.mark.parametrize("label", [x for x in LABELS if x["status"] == "correct"], ids=lambda x: x["path"])
def test_correct_module_has_no_finding(report, label):
    found = bench.static_findings(label, report)
    allowed = {tuple(f) for f in label.get("known_false", [])}
    assert {(f"{p}:{n}", c) for p, n, c in found} == allowed


@pytest.mark.parametrize("label", [x for x in LABELS if x.get("static") == "caught"], ids=lambda x: x["path"])
def test_caught_bug_stays_caught(report, label):
    assert bench.caught_statically(label, bench.static_findings(label, report))


def test_the_matching_rule_needs_the_code_at_the_line():
    label = {"path": "m.py", "codes": ["CG005"], "at": ["m.py:12"]}
    assert bench.caught_statically(label, [("m.py", 12, "CG005")])
    assert not bench.caught_statically(label, [("m.py", 13, "CG005"), ("m.py", 12, "CG009")])
