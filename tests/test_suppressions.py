"""Block suppressions (`# cglint: disable=...` / `enable=...`, and on a `def` line for that
function) in the CLI, the language server's engine and the flake8 plugin alike, and
`--report-unused-noqa` (CG100) with its fix."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from inprocess import cglint

from cglint.engine import lint_source
from cglint.fix import fix_source
from cglint.rules import ALL_RULES
from cglint.rules.cg100_unused_noqa import UnusedNoqa

sys.path.insert(0, str(Path(__file__).parent))
from test_flake8 import entry_point_env, flake8, flake8_findings  # noqa: E402,F401  (a fixture)

# A Keras layer and a module-level op, each with a CG005 (the derivative at the output); the
# layer's grad fn also lacks `variables` (CG004).
SOURCE = '''import keras
import tensorflow as tf


class TanDense(keras.layers.Layer):
    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], 4))

    def call(self, x):
        @tf.custom_gradient
        def op(x):
            y = tf.math.tan(x @ self.w)

            def grad(upstream):
                return upstream / tf.square(tf.math.cos(y))

            return y, grad

        return op(x)


@tf.custom_gradient
def scaled_tan(x):
    y = tf.math.tan(x)

    def grad(upstream):
        return upstream / tf.square(tf.math.cos(y))

    return y, grad
'''
LAYER_CG005, LAYER_CG004, OP_CG005 = 15, 14, 27


def found(source: str, rules=ALL_RULES) -> list[tuple[int, str]]:
    result = lint_source(source, "m.py", rules)
    return [(d.line, d.code) for d in result.diagnostics]


def test_the_example_has_the_findings_the_tests_suppress():
    assert found(SOURCE) == [(LAYER_CG004, "CG004"), (LAYER_CG005, "CG005"), (OP_CG005, "CG005")]


def test_disable_enable_block():
    src = SOURCE.replace("class TanDense", "# cglint: disable=CG005\nclass TanDense").replace(
        "@tf.custom_gradient\ndef scaled_tan", "# cglint: enable=CG005\n@tf.custom_gradient\ndef scaled_tan")
    assert found(src) == [(LAYER_CG004 + 1, "CG004"), (OP_CG005 + 2, "CG005")]


def test_disable_without_enable_lasts_to_the_end_of_the_file_and_all_means_every_code():
    src = SOURCE.replace("class TanDense", "# cglint: disable=CG005, CG004\nclass TanDense")
    assert found(src) == []
    src = SOURCE.replace("@tf.custom_gradient\ndef scaled_tan", "# cglint: disable=all\n@tf.custom_gradient\ndef scaled_tan")
    assert found(src) == [(LAYER_CG004, "CG004"), (LAYER_CG005, "CG005")]


def test_disable_on_a_def_line_covers_that_function_only():
    # On the method: its nested forward and grad fn too; the module-level op still reports.
    src = SOURCE.replace("    def call(self, x):", "    def call(self, x):  # cglint: disable=CG005")
    assert found(src) == [(LAYER_CG004, "CG004"), (OP_CG005, "CG005")]
    # On the op's def line (under its decorator): the whole op, decorator included.
    src = SOURCE.replace("def scaled_tan(x):", "def scaled_tan(x):  # cglint: disable=CG005")
    assert found(src) == [(LAYER_CG004, "CG004"), (LAYER_CG005, "CG005")]
    # On the last line of a signature split over lines.
    src = SOURCE.replace("def scaled_tan(x):", "def scaled_tan(\n    x,\n):  # cglint: disable=CG005")
    assert found(src) == [(LAYER_CG004, "CG004"), (LAYER_CG005, "CG005")]


def test_disable_at_the_end_of_another_line_covers_that_line():
    src = SOURCE.replace("return upstream / tf.square(tf.math.cos(y))\n\n            return y, grad",
                         "return upstream / tf.square(tf.math.cos(y))  # cglint: disable=CG005\n\n"
                         "            return y, grad")
    assert found(src) == [(LAYER_CG004, "CG004"), (OP_CG005, "CG005")]


def test_directives_in_strings_and_malformed_ones_are_not_directives():
    src = SOURCE + 'DOC = """\n# cglint: disable=all\n"""\n'
    assert len(found(src)) == 3
    result = lint_source(SOURCE.replace("class TanDense", "# cglint: disable\nclass TanDense"), "m.py")
    assert len(result.diagnostics) == 3
    assert result.warnings == ["5: `# cglint: disable` needs codes (`=CG005, CG002` or `=all`), ignored"]
    result = lint_source(SOURCE.replace("class TanDense", "# cglint: disable=CG999\nclass TanDense"), "m.py")
    assert result.warnings == ["unknown rule code 'CG999' in `# cglint: disable`, ignored"]


def test_flake8_applies_block_suppressions_as_the_cli_does(entry_point_env, tmp_path):
    src = SOURCE.replace("    def call(self, x):", "    def call(self, x):  # cglint: disable=CG005")
    (tmp_path / "layer.py").write_text(src)
    run = flake8("--select", "CG", "layer.py", env=entry_point_env, cwd=tmp_path)
    cli = json.loads(cglint("--output-format", "json", "layer.py", cwd=tmp_path).stdout)["diagnostics"]
    assert flake8_findings(run.stdout) == {("layer.py", d["line"], d["code"]) for d in cli} == {
        ("layer.py", LAYER_CG004, "CG004"), ("layer.py", OP_CG005, "CG005")}


# ---- --report-unused-noqa ----------------------------------------------------------------------


def test_unused_noqa_codes_are_reported_with_a_fix_that_removes_them(tmp_path):
    src = (SOURCE
           .replace("return upstream / tf.square(tf.math.cos(y))\n\n            return y, grad",
                    "return upstream / tf.square(tf.math.cos(y))  # noqa: CG005, CG002\n\n            return y, grad")
           .replace("    y = tf.math.tan(x)\n", "    y = tf.math.tan(x)  # tan, not tanh  # noqa: CG005\n")
           .replace("import keras\n", "import keras  # noqa: CG999, F401\n"))
    path = tmp_path / "layer.py"
    path.write_text(src)
    run = cglint("--report-unused-noqa", "--output-format", "json", "layer.py", cwd=tmp_path)
    diags = json.loads(run.stdout)["diagnostics"]
    unused = [(d["line"], d["message"], d["fix"]["applicability"]) for d in diags if d["code"] == "CG100"]
    assert unused == [
        (1, "Unused `noqa` directive (unknown: `CG999`)", "safe"),
        (LAYER_CG005, "Unused `noqa` directive (unused: `CG002`)", "safe"),
        (OP_CG005 - 3, "Unused `noqa` directive (unused: `CG005`)", "safe"),
    ], diags
    # Without the option: no CG100.
    plain = json.loads(cglint("--output-format", "json", "layer.py", cwd=tmp_path).stdout)["diagnostics"]
    assert "CG100" not in {d["code"] for d in plain}

    run = cglint("--report-unused-noqa", "--fix", "layer.py", cwd=tmp_path)
    fixed = path.read_text()
    assert "import keras  # noqa: F401\n" in fixed
    assert "return upstream / tf.square(tf.math.cos(y))  # noqa: CG005\n" in fixed
    assert "    y = tf.math.tan(x)  # tan, not tanh\n" in fixed
    again = cglint("--report-unused-noqa", "--output-format", "json", "layer.py", cwd=tmp_path)
    assert "CG100" not in {d["code"] for d in json.loads(again.stdout)["diagnostics"]}


def test_unused_noqa_only_judges_rules_that_ran_and_never_a_bare_noqa():
    src = SOURCE.replace("def scaled_tan(x):", "def scaled_tan(x):  # noqa: CG005").replace(
        "    def build(self, input_shape):", "    def build(self, input_shape):  # noqa")
    cg001_only = [r for r in ALL_RULES if r.code == "CG001"] + [UnusedNoqa]
    assert found(src, cg001_only) == []
    assert (OP_CG005 - 4, "CG100") in found(src, [*ALL_RULES, UnusedNoqa])


def test_unused_noqa_in_a_file_without_custom_gradients_and_on_its_own_line():
    src = "import numpy as np\n\n# noqa: CG005\nx = np.ones(3)  # noqa: CG012\n"
    rules = [*ALL_RULES, UnusedNoqa]
    assert found(src, rules) == [(3, "CG100"), (4, "CG100")]
    out = fix_source(src, "m.py", rules)
    assert out.new_source == "import numpy as np\n\nx = np.ones(3)\n"
    assert not out.remaining


def test_cg100_is_listed_and_explained(tmp_path):
    listed = cglint("--list-rules", cwd=tmp_path)
    assert listed.stdout.splitlines()[-1].startswith("CG100  unused-noqa ")
    explained = cglint("--explain", "cg100", cwd=tmp_path)
    assert explained.returncode == 0 and explained.stdout.startswith("# unused-noqa (CG100)")
    assert "## Fix safety" in explained.stdout
