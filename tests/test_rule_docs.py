"""docs/rules/ is generated from the rule modules (scripts/rule_docs.py): the committed pages
must be what the script writes now, so a rule's change reaches its page."""

import shutil
import subprocess
import sys

from support import ROOT


def test_committed_rule_pages_are_current():
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "rule_docs.py"), "--check"], capture_output=True,
                         text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr


def test_every_rule_has_a_page_with_its_sections_and_the_index_links_it():
    from cglint.rules import CODES, OPT_IN, rules

    index = (ROOT / "docs" / "rules" / "README.md").read_text()
    for rule in rules([*CODES, *OPT_IN]):
        page = (ROOT / "docs" / "rules" / f"{rule.code}.md").read_text()
        assert f"# {rule.code} {rule.name}" in page and f"[{rule.code}]({rule.code}.md)" in index
        assert "## Example" in page and "## What cglint reports on the example" in page
        assert f"example.py:" in page and f" {rule.code} " in page  # the report names the rule
    cg005 = (ROOT / "docs" / "rules" / "CG005.md").read_text()
    assert "## Why is this bad?" in cg005 and "## Fix safety" in cg005
    # A rule whose first example has a fix shows it as a diff: CG006 keys the gradients on `variables`.
    cg006 = (ROOT / "docs" / "rules" / "CG006.md").read_text()
    assert "```diff" in cg006 and "+        return dy @ tf.transpose(w), [grads_by_variable[v.ref()] for v in variables]" in cg006


def test_a_stale_page_is_caught(tmp_path):
    # The check compares text: a page edited by hand is reported (in a copy: the checkout's
    # pages are never written by a test, parallel workers read them).
    pages = tmp_path / "rules"
    shutil.copytree(ROOT / "docs" / "rules", pages)
    script = [sys.executable, str(ROOT / "scripts" / "rule_docs.py"), "--check", "--dir", str(pages)]
    assert subprocess.run(script, capture_output=True, text=True, cwd=tmp_path).returncode == 0
    (pages / "CG009.md").write_text((pages / "CG009.md").read_text() + "edited by hand\n")
    run = subprocess.run(script, capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 1 and f"{pages / 'CG009.md'} is not current" in run.stderr
