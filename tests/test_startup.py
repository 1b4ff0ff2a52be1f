"""Start-up: libcst and the rule modules are imported only when a file needs a parse."""

import json
import subprocess
import sys
from pathlib import Path

from support import ENV, ROOT

PROBE = """
import json, sys
from cglint.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:  # --version exits through argparse
    code = exc.code
heavy = sorted(m for m in sys.modules if m.split(".")[0] == "libcst" or m.startswith(("cglint.rules.cg", "cglint.model")))
# Needed only by other formats or by errors: a one-file run in the editor or pre-commit pays for each.
unneeded = sorted(m for m in sys.modules if m in ("xml.etree.ElementTree", "difflib", "secrets", "hmac")
                  or m.startswith("cglint.report.") and m.rsplit(".", 1)[1] in ("junit", "sarif", "gitlab", "github", "json_format"))
print(json.dumps({"code": code, "heavy": heavy, "unneeded": unneeded}))
"""


def probe(*args, cwd=ROOT):
    run = subprocess.run([sys.executable, "-c", PROBE, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                         env=ENV)
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_version_imports_no_libcst():
    out = probe("--version")
    assert out == {"code": 0, "heavy": [], "unneeded": []}


def test_tree_without_candidates_imports_no_libcst_nor_rules(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text("import tensorflow as tf\n\ndef step(x):\n    return tf.square(x)\n")
    # Mentions custom_gradient, but no TensorFlow site: Python's parser says so, libcst is not needed.
    (tmp_path / "pkg" / "notes.py").write_text('"""Uses jax.custom_gradient."""\nimport jax\n\nop = jax.custom_gradient\n')
    (tmp_path / "pkg" / "empty.py").write_text("")
    out = probe("--output-format", "json", "pkg", cwd=tmp_path)
    assert out == {"code": 0, "heavy": [], "unneeded": ["cglint.report.json_format"]}


def test_a_file_with_a_site_does_load_them(tmp_path):
    (tmp_path / "op.py").write_text("import tensorflow as tf\n\n@tf.custom_gradient\ndef op(x):\n"
                                    "    return x, lambda dy: dy\n")
    out = probe("--no-cache", "op.py", cwd=tmp_path)
    assert out["code"] == 0 and "libcst" in out["heavy"]


def test_every_rule_module_is_registered():
    from cglint import rules

    on_disk = sorted(p.stem for p in (ROOT / "cglint" / "rules").glob("cg[0-9][0-9][0-9]_*.py"))
    assert sorted(module for module, _ in [*rules._REGISTRY.values(), *rules.OPT_IN.values()]) == on_disk
    for code in rules.CODES:
        cls = rules.rule(code)
        assert cls.code == code and cls.__module__.endswith(rules._REGISTRY[code][0])
    assert [r.code for r in rules.ALL_RULES] == list(rules.CODES)


def test_a_warm_one_file_run_imports_only_its_format(tmp_path):
    """The editor's and pre-commit's case: one file, its result cached. Nothing of the other
    output formats (JUnit's XML library alone costs as much as the lint) nor of error paths."""
    (tmp_path / "op.py").write_text("import tensorflow as tf\n\n@tf.custom_gradient\ndef op(x):\n"
                                    "    return tf.square(x), lambda dy: dy * 2.0 * x\n")
    first = probe("--output-format", "concise", "op.py", cwd=tmp_path)
    warm = probe("--output-format", "concise", "op.py", cwd=tmp_path)
    assert first["code"] == warm["code"] == 0
    assert warm["heavy"] == [] and warm["unneeded"] == []
