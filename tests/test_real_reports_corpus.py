"""The real-report corpus (bench/real_reports/) is well-formed; no TensorFlow runs here.

The corpus itself is run by `python bench/real_reports.py` (a documented command, minutes long).
"""

import ast
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "bench" / "real_reports"
CLASSES = {"shape", "dtype", "sign", "conjugate", "instability", "upstream", "order", "contract-error", "none-on-2.21"}

_spec = importlib.util.spec_from_file_location("real_reports_bench", ROOT / "bench" / "real_reports.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

REPORTS = sorted(d for d in CORPUS.iterdir() if d.is_dir())


def test_corpus_has_at_least_25_reports_from_distinct_sources():
    sources = {bench.header(d / "buggy.py").get("Source", "").split()[0] for d in REPORTS}
    assert len(REPORTS) >= 25
    assert len(sources) == len(REPORTS)


@pytest.mark.parametrize("report", REPORTS, ids=lambda d: d.name)
def test_report_files_parse_and_name_url_symptom_behaviour_class(report):
    assert re.fullmatch(r"\d\d_[a-z0-9_]+", report.name)
    files = [report / "buggy.py"] + ([report / "fixed.py"] if (report / "fixed.py").exists() else [])
    assert (report / "buggy.py").exists()
    classes = []
    for path in files:
        source = path.read_text()
        ast.parse(source, filename=str(path))
        fields = bench.header(path)
        assert re.match(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull|commit)/\w+", fields.get("Source", "")), path
        assert len(fields.get("Symptom", "")) > 20, path
        assert len(fields.get("TF 2.21", "")) > 10 and "TO-BE-FILLED" not in source, path
        assert bench.report_class(fields) in CLASSES, path
        classes.append(bench.report_class(fields))
    assert len(set(classes)) == 1, "buggy and fixed name the same class"


def test_header_parser_reads_continuation_lines_and_misses_nothing_silently(tmp_path):
    f = tmp_path / "x.py"
    f.write_text('"""Title.\n\nSource: https://github.com/a/b/issues/1\nSymptom: one\ntwo\nClass: dtype (fixed)\n"""\n')
    fields = bench.header(f)
    assert fields["Symptom"] == "one two"
    assert bench.report_class(fields) == "dtype"
    f.write_text('"""No fields here."""\n')
    assert bench.report_class(bench.header(f)) == ""
