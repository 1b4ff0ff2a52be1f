"""The project index: a forward in one module and the variables it reads in another are one
program, whichever way the file is linted (alone, in its tree, from stdin with
`--stdin-filename`), and a cached result is dropped when an imported module changes.

Each package is written as a team would: the variables in `params.py`, re-exported by the
package's `__init__.py`, the op in `ops.py`. Each verdict is checked with TensorFlow: the
package is imported and differentiated in a child process, which writes what happened to a
report file.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.inprocess import cglint

PARAMS_VARIABLE = "import tensorflow as tf\n\nkernel = tf.Variable(2.0, name=\"kernel\")\n"
PARAMS_CONSTANT = "import tensorflow as tf\n\nkernel = tf.constant(2.0)\n"
INIT = "from .params import kernel\n"

# The grad fn takes no `variables`, while the forward reads `kernel` from a sibling module.
NO_VARIABLES = '''import tensorflow as tf

from {imp} import kernel


@tf.custom_gradient
def scale(x):
    y = kernel * x

    def grad(dy):
        return dy * kernel

    return y, grad
'''

# The same op with its variable gradient.
WITH_VARIABLES = '''import tensorflow as tf

from {imp} import kernel


@tf.custom_gradient
def scale(x):
    y = kernel * x

    def grad(dy, variables=None):
        return dy * kernel, [dy * x for _ in variables]

    return y, grad
'''

DERIVATIVES = "import tensorflow as tf\n\n\ndef dtan(a):\n    return 1.0 / tf.cos(a) ** 2\n"

# A derivative helper in a sibling module, evaluated at the op's output (`dtan(y)`) or input.
TAN = '''import tensorflow as tf

from .derivatives import dtan


@tf.custom_gradient
def tan(x):
    y = tf.tan(x)

    def grad(dy):
        return dy * dtan({at})

    return y, grad
'''

# A helper written in terms of the function's value, in a sibling module: given the output
# `y = x * s` where it wants `s` (only evaluating the helper there shows it).
SIGMOID_GRAD = "def sigmoid_grad(s):\n    return s * (1.0 - s)\n"
SWISH = '''import tensorflow as tf

from .derivatives import sigmoid_grad


@tf.custom_gradient
def swish(x):
    s = tf.sigmoid(x)
    y = x * s

    def grad(dy):
        return dy * (s + x * sigmoid_grad({at}))

    return y, grad
'''

CASES = {
    # name: (the package's modules, the findings cglint reports on ops.py, TensorFlow's verdict:
    # "variables" (raises for want of `variables`), "wrong" (not autodiff's gradient) or "ok")
    "relative_invalid": ({"params": PARAMS_VARIABLE, "ops": NO_VARIABLES.format(imp=".params")}, ["CG004"], "variables"),
    "reexport_invalid": ({"params": PARAMS_VARIABLE, "ops": NO_VARIABLES.format(imp="{pkg}")}, ["CG004"], "variables"),
    "relative_valid": ({"params": PARAMS_VARIABLE, "ops": WITH_VARIABLES.format(imp=".params")}, [], "ok"),
    "reexport_valid": ({"params": PARAMS_VARIABLE, "ops": WITH_VARIABLES.format(imp="{pkg}")}, [], "ok"),
    "constant_valid": ({"params": PARAMS_CONSTANT, "ops": NO_VARIABLES.format(imp=".params")}, [], "ok"),
    "helper_invalid": ({"derivatives": DERIVATIVES, "ops": TAN.format(at="y")}, ["CG005"], "wrong"),
    "helper_valid": ({"derivatives": DERIVATIVES, "ops": TAN.format(at="x")}, [], "ok"),
    "evaluated_helper_invalid": ({"derivatives": SIGMOID_GRAD, "ops": SWISH.format(at="y")}, ["CG005"], "wrong"),
    "evaluated_helper_valid": ({"derivatives": SIGMOID_GRAD, "ops": SWISH.format(at="s")}, [], "ok"),
}


def write_package(root: Path, name: str, modules: dict[str, str]) -> Path:
    pkg = root / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(INIT if "params" in modules else "")
    for module, text in modules.items():
        (pkg / f"{module}.py").write_text(text.replace("{pkg}", name))
    return pkg


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("project")
    for name, (modules, _, _) in CASES.items():
        write_package(root, name, modules)
    return root


def codes(run) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for d in json.loads(run.stdout)["diagnostics"]:
        out.setdefault(Path(d["path"]).as_posix(), []).append(d["code"])
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_file_its_tree_and_stdin_agree(project, name):
    expected = CASES[name][1]
    alone = codes(cglint("--no-cache", "--output-format", "json", f"{name}/ops.py", cwd=project))
    tree = codes(cglint("--no-cache", "--output-format", "json", ".", cwd=project))
    assert alone.get(f"{name}/ops.py", []) == expected
    assert tree.get(f"{name}/ops.py", []) == expected
    assert not any(p.endswith("params.py") or p.endswith("__init__.py") for p in tree)

    from cglint import cli

    here = os.getcwd()
    os.chdir(project)
    out = io.StringIO()
    saved = sys.stdin
    try:
        sys.stdin = io.TextIOWrapper(io.BytesIO((project / name / "ops.py").read_bytes()))
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            cli.main(["-", "--stdin-filename", f"{name}/ops.py", "--output-format", "json"])
    finally:
        sys.stdin = saved
        os.chdir(here)
    assert [d["code"] for d in json.loads(out.getvalue())["diagnostics"]] == expected


def test_a_change_in_an_imported_module_invalidates_the_cache(tmp_path):
    write_package(tmp_path, "pkg", {"params": PARAMS_VARIABLE, "ops": NO_VARIABLES.format(imp=".params")})
    run = lambda: codes(cglint("--output-format", "json", "pkg/ops.py", cwd=tmp_path))  # noqa: E731
    assert run() == {"pkg/ops.py": ["CG004"]}
    assert run() == {"pkg/ops.py": ["CG004"]}  # warm
    (tmp_path / "pkg" / "params.py").write_text(PARAMS_CONSTANT)
    assert run() == {}
    (tmp_path / "pkg" / "params.py").write_text(PARAMS_VARIABLE)
    assert run() == {"pkg/ops.py": ["CG004"]}


def test_installed_packages_and_missing_modules_are_not_followed(tmp_path):
    (tmp_path / "ops.py").write_text(NO_VARIABLES.format(imp="tensorflow").replace(
        "from tensorflow import kernel", "from tensorflow.keras.initializers import kernel\nfrom nowhere import w"))
    assert codes(cglint("--no-cache", "--output-format", "json", "ops.py", cwd=tmp_path)) == {}


def test_an_import_cycle_ends(tmp_path):
    pkg = write_package(tmp_path, "pkg", {"params": PARAMS_VARIABLE + "from .ops import scale\n",
                                          "ops": NO_VARIABLES.format(imp=".params")})
    (pkg / "__init__.py").write_text("from .params import kernel\nfrom .ops import scale\n")
    assert codes(cglint("--no-cache", "--output-format", "json", ".", cwd=tmp_path)) == {"pkg/ops.py": ["CG004"]}


CHILD = '''
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
import tensorflow as tf
report = {}
for name in sys.argv[3:]:
    ops = importlib.import_module(name + ".ops")
    x = tf.constant(0.7)
    try:
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            if hasattr(ops, "scale"):
                y, reference = ops.scale(x), ops.kernel * x
            elif hasattr(ops, "swish"):
                y, reference = ops.swish(x), x * tf.sigmoid(x)
            else:
                y, reference = ops.tan(x), tf.tan(x)
        sources = [x] + ([ops.kernel] if isinstance(getattr(ops, "kernel", None), tf.Variable) else [])
        got = [float(g) for g in tape.gradient(y, sources)]
        want = [float(g) for g in tape.gradient(reference, sources)]
        close = all(abs(a - b) <= 1e-5 * max(1.0, abs(b)) for a, b in zip(got, want))
        report[name] = {"verdict": "ok" if close else "wrong", "got": got, "want": want}
    except Exception as exc:
        report[name] = {"verdict": "variables" if "variables" in str(exc) else "error", "error": f"{type(exc).__name__}: {exc}"}
json.dump(report, open(sys.argv[2], "w"))
'''


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="needs TensorFlow")
def test_tensorflow_agrees_with_each_verdict(project, tmp_path):
    """INVALID cases fail in TensorFlow for the reason the finding gives (a TypeError for want of
    `variables`, a gradient that is not autodiff's); VALID ones compute autodiff's gradients."""
    out = tmp_path / "report.json"
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    subprocess.run([sys.executable, str(script), str(project), str(out), *CASES], capture_output=True,
                   env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=300)
    report = json.loads(out.read_text())
    assert {name: report[name]["verdict"] for name in CASES} == {name: case[2] for name, case in CASES.items()}, report


def test_a_change_in_an_evaluated_helper_invalidates_the_cache(tmp_path):
    write_package(tmp_path, "pkg", {"derivatives": SIGMOID_GRAD, "ops": SWISH.format(at="y")})
    run = lambda: codes(cglint("--output-format", "json", "pkg/ops.py", cwd=tmp_path))  # noqa: E731
    assert run() == {"pkg/ops.py": ["CG005"]}
    assert run() == {"pkg/ops.py": ["CG005"]}  # warm
    # The helper changed: no name read for `y` makes the gradient swish's (no CG005), and the
    # gradient is not swish's derivative at all (CG019): the cached answer is not reused.
    (tmp_path / "pkg" / "derivatives.py").write_text("def sigmoid_grad(s):\n    return 1.0 + 0.0 * s\n")
    assert run() == {"pkg/ops.py": ["CG019"]}
