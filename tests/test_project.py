"""The project index: a forward in one module and the variables it reads in another are one
program, whichever way the file is linted (alone, in its tree, from stdin with
`--stdin-filename`), and a cached result is dropped when an imported module changes.

Each package is written as a team would: the variables in `params.py`, re-exported by the
package's `__init__.py`, the op in `ops.py`. Each verdict is checked with TensorFlow: the
package is imported and differentiated in a child process, which writes what happened to a
report file.
"""

from __future__ import annotations

import importlib.util
import json
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

CASES = {
    # name: (params.py, ops.py, the findings cglint reports on ops.py)
    "relative_invalid": (PARAMS_VARIABLE, NO_VARIABLES.format(imp=".params"), ["CG004"]),
    "reexport_invalid": (PARAMS_VARIABLE, NO_VARIABLES.format(imp="{pkg}"), ["CG004"]),
    "relative_valid": (PARAMS_VARIABLE, WITH_VARIABLES.format(imp=".params"), []),
    "reexport_valid": (PARAMS_VARIABLE, WITH_VARIABLES.format(imp="{pkg}"), []),
    "constant_valid": (PARAMS_CONSTANT, NO_VARIABLES.format(imp=".params"), []),
}


def write_package(root: Path, name: str, params: str, ops: str) -> Path:
    pkg = root / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(INIT)
    (pkg / "params.py").write_text(params)
    (pkg / "ops.py").write_text(ops.replace("{pkg}", name))
    return pkg


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("project")
    for name, (params, ops, _) in CASES.items():
        write_package(root, name, params, ops)
    return root


def codes(run) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for d in json.loads(run.stdout)["diagnostics"]:
        out.setdefault(Path(d["path"]).as_posix(), []).append(d["code"])
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_file_its_tree_and_stdin_agree(project, name):
    expected = CASES[name][2]
    alone = codes(cglint("--no-cache", "--output-format", "json", f"{name}/ops.py", cwd=project))
    tree = codes(cglint("--no-cache", "--output-format", "json", ".", cwd=project))
    assert alone.get(f"{name}/ops.py", []) == expected
    assert tree.get(f"{name}/ops.py", []) == expected
    assert not any(p.endswith("params.py") or p.endswith("__init__.py") for p in tree)

    from cglint import cli
    import contextlib
    import io
    import os

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
    write_package(tmp_path, "pkg", PARAMS_VARIABLE, NO_VARIABLES.format(imp=".params"))
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
    pkg = write_package(tmp_path, "pkg", PARAMS_VARIABLE + "from .ops import scale\n", NO_VARIABLES.format(imp=".params"))
    (pkg / "__init__.py").write_text("from .params import kernel\nfrom .ops import scale\n")
    assert codes(cglint("--no-cache", "--output-format", "json", ".", cwd=tmp_path)) == {"pkg/ops.py": ["CG004"]}


CHILD = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import importlib
import tensorflow as tf
report = {}
for name in sys.argv[3:]:
    ops = importlib.import_module(name + ".ops")
    params = importlib.import_module(name + ".params")
    x = tf.constant(3.0)
    try:
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = ops.scale(x)
            reference = params.kernel * x
        sources = [x] + ([params.kernel] if isinstance(params.kernel, tf.Variable) else [])
        got = [float(g) for g in tape.gradient(y, sources)]
        want = [float(g) for g in tape.gradient(reference, sources)]
        report[name] = {"ok": got == want, "got": got, "want": want}
    except Exception as exc:
        report[name] = {"error": f"{type(exc).__name__}: {exc}"}
json.dump(report, open(sys.argv[2], "w"))
'''


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="needs TensorFlow")
def test_tensorflow_agrees_with_each_verdict(project, tmp_path):
    """INVALID cases fail in TensorFlow for the reason the finding gives; VALID ones compute
    autodiff's gradients."""
    out = tmp_path / "report.json"
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    subprocess.run([sys.executable, str(script), str(project), str(out), *CASES], capture_output=True,
                   env={**__import__("os").environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=300)
    report = json.loads(out.read_text())
    for name, (_, _, expected) in CASES.items():
        if expected == ["CG004"]:
            assert "variables" in report[name].get("error", ""), (name, report[name])
        else:
            assert report[name].get("ok") is True, (name, report[name])
