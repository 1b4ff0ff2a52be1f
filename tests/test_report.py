"""Output formats: SARIF validated against the OASIS 2.1.0 schema, GitHub annotations with
their escaping, JUnit XML, concise, --statistics, --output-file, --exit-zero."""

import json
import os
import xml.etree.ElementTree as ET

import jsonschema
import pytest
from support import BAD, ROOT, cglint

from cglint.diagnostics import Diagnostic, FileResult
from cglint.report import github
from cglint.rules import ALL_RULES

SCHEMA = json.loads((ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())


@pytest.fixture
def repo(tmp_path):
    (tmp_path / ".git").mkdir()  # the repository root SARIF URIs are relative to
    (tmp_path / "pkg dir").mkdir()
    (tmp_path / "pkg dir" / "ops.py").write_text(BAD)
    (tmp_path / "clean.py").write_text("import tensorflow as tf\n")
    return tmp_path


def test_sarif_is_valid_2_1_0_with_rules_locations_and_fixes(repo):
    run = cglint("--output-format", "sarif", ".", cwd=repo / "pkg dir")
    assert run.returncode == 1, run.stderr
    sarif = json.loads(run.stdout)
    jsonschema.validate(sarif, SCHEMA, cls=jsonschema.Draft4Validator, format_checker=jsonschema.FormatChecker())
    (the_run,) = sarif["runs"]
    rules = the_run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.code for r in ALL_RULES]
    assert all(r["helpUri"].startswith("https://") and r["fullDescription"]["text"] for r in rules)
    assert the_run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == repo.resolve().as_uri() + "/"
    by_rule = {r["ruleId"]: r for r in the_run["results"]}
    assert set(by_rule) == {"CG004", "CG005"}
    cg005 = by_rule["CG005"]
    assert rules[cg005["ruleIndex"]]["id"] == "CG005"
    location = cg005["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "pkg%20dir/ops.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 9, "startColumn": 31, "endLine": 9, "endColumn": 40}
    (change,) = cg005["fixes"][0]["artifactChanges"]
    assert change["artifactLocation"] == location["artifactLocation"]
    # `y = tf.tan(x * w)`: name the pre-activation (`z = x * w`), then use it in the derivative.
    assert [(r["deletedRegion"], r["insertedContent"]["text"]) for r in change["replacements"]] == [
        ({"startLine": 7, "startColumn": 5, "endLine": 7, "endColumn": 21}, "z = x * w\n    y = tf.tan(z"),
        ({"startLine": 9, "startColumn": 38, "endLine": 9, "endColumn": 39}, "z"),
    ]
    assert "fixes" in by_rule["CG004"]  # unsafe fixes are offered too, marked in the description
    assert "unsafe" in by_rule["CG004"]["fixes"][0]["description"]["text"]


def test_sarif_with_no_findings_is_valid(repo):
    sarif = json.loads(cglint("--output-format", "sarif", "clean.py", cwd=repo).stdout)
    jsonschema.validate(sarif, SCHEMA, cls=jsonschema.Draft4Validator)
    assert sarif["runs"][0]["results"] == []


def test_github_escaping_of_data_and_properties():
    assert github.escape_data("100% a:b,c\r\nd") == "100%25 a:b,c%0D%0Ad"
    assert github.escape_property("100% a:b,c\r\nd") == "100%25 a%3Ab%2Cc%0D%0Ad"
    d = Diagnostic(path="we%ird:dir,x/op\n.py", line=3, column=5, end_line=4, end_column=1, code="CG005",
                   name="output-derivative", severity="error", message="cos(y): 50% off,\nreally")
    out = github.render([FileResult(d.path, "", [d], parsed=True)])
    assert out == ("::error file=we%25ird%3Adir%2Cx/op%0A.py,line=3,col=5,endLine=4,endColumn=1,"
                   "title=CG005 (output-derivative)::CG005 cos(y): 50% off,%0Areally\n").replace("50% off", "50%25 off")


def test_github_format_from_the_command_line(tmp_path):
    (tmp_path / "a,b:c%.py").write_text(BAD)
    run = cglint("--output-format", "github", ".", cwd=tmp_path)
    lines = run.stdout.splitlines()
    assert len(lines) == 2 and run.returncode == 1
    assert lines[0].startswith("::error file=a%2Cb%3Ac%25.py,line=8,col=9,endLine=8,endColumn=13,"
                               "title=CG004 (missing-variables-parameter)::CG004 ")


def test_junit_one_testcase_per_file_failures_per_finding(repo):
    run = cglint("--output-format", "junit", ".", cwd=repo)
    root = ET.fromstring(run.stdout)
    suite = root.find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == {"clean.py", "pkg dir/ops.py"}
    assert cases["clean.py"].findall("failure") == []
    failures = cases["pkg dir/ops.py"].findall("failure")
    assert [f.get("type") for f in failures] == ["CG004", "CG005"]
    assert failures[1].text.startswith("pkg dir/ops.py:9:31: CG005 (output-derivative) ")
    assert suite.get("tests") == "2" and suite.get("failures") == "1"


def test_concise(repo):
    run = cglint("--output-format", "concise", ".", cwd=repo)
    lines = run.stdout.splitlines()
    # One line a finding (`[*]` when --fix fixes it; the message's title), then ruff's summary.
    assert [line.split(": ")[0] for line in lines[:2]] == ["pkg dir/ops.py:8:9", "pkg dir/ops.py:9:31"]
    assert lines[1] == ("pkg dir/ops.py:9:31: CG005 [*] `cos(...)` applied to `y` evaluates the derivative "
                        "of `tan` at its output `y`")
    assert lines[2:] == ["Found 2 problems in 1 file.", "[*] 1 fixable with the `--fix` option "
                         "(1 hidden fix can be enabled with the `--unsafe-fixes` option)."]
    assert cglint("--output-format", "concise", "-q", ".", cwd=repo).stdout.splitlines() == lines[:2]
    assert cglint("--output-format", "concise", "clean.py", cwd=repo).stdout == "All checks passed (1 file checked).\n"


def test_statistics(repo):
    # more.py's grad fn takes `variables` but returns one tensor: CG002 too (TensorFlow 2.21
    # raises on it, eagerly and under tf.function).
    (repo / "more.py").write_text(BAD.replace("def grad(dy):", "def grad(dy, variables=None):"))
    run = cglint("--statistics", ".", cwd=repo)
    assert run.stdout.splitlines() == [
        "2\tCG005\t[*] output-derivative", "1\tCG002\t[ ] flat-variable-gradients",
        "1\tCG004\t[ ] missing-variables-parameter", "Found 4 problems in 2 files.",
        "[*] 2 fixable with the `--fix` option (1 hidden fix can be enabled with the `--unsafe-fixes` option)."]
    assert run.returncode == 1
    assert cglint("--statistics", "-q", ".", cwd=repo).stdout.splitlines() == run.stdout.splitlines()[:3]
    rows = json.loads(cglint("--statistics", "--output-format", "json", ".", cwd=repo).stdout)
    assert rows[0] == {"code": "CG005", "name": "output-derivative", "count": 2, "fixable": True, "fixable_count": 2}
    assert rows[2]["fixable_count"] == 0
    rows = json.loads(cglint("--statistics", "--unsafe-fixes", "--output-format", "json", ".", cwd=repo).stdout)
    assert rows[2] == {"code": "CG004", "name": "missing-variables-parameter", "count": 1, "fixable": True,
                       "fixable_count": 1}


def test_output_file_and_exit_zero(repo):
    run = cglint("--output-format", "json", "--output-file", "out/report.json", "--exit-zero", ".", cwd=repo)
    assert run.returncode == 2 and "out/report.json: cannot write" in run.stderr
    (repo / "out").mkdir()
    run = cglint("--output-format", "json", "--output-file", "out/report.json", "--exit-zero", ".", cwd=repo)
    assert run.returncode == 0 and run.stdout == ""
    assert len(json.loads((repo / "out" / "report.json").read_text())["diagnostics"]) == 2
    assert sorted(os.listdir(repo / "out")) == ["report.json"]


def test_text_summary_counts_fixable_and_hidden_fixes(tmp_path):
    (tmp_path / "a.py").write_text(BAD)
    (tmp_path / "b.py").write_text(BAD)
    lines = cglint(".", cwd=tmp_path).stdout.splitlines()
    assert lines[-2:] == ["Found 4 problems in 2 files.",
                          "[*] 2 fixable with the `--fix` option (2 hidden fixes can be enabled with the "
                          "`--unsafe-fixes` option)."]
    lines = cglint("--unsafe-fixes", ".", cwd=tmp_path).stdout.splitlines()
    assert lines[-1] == "[*] 4 fixable with the `--fix` option."
    lines = cglint("--fix", ".", cwd=tmp_path).stdout.splitlines()
    assert lines[-2:] == ["Found 4 problems (2 fixed, 2 remaining).",
                          "No fixes available (2 hidden fixes can be enabled with the `--unsafe-fixes` option)."]
