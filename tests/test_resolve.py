"""The one resolution query, `ModuleModel.denote`: what an expression denotes is the same
whichever way the code spells it (every import form, re-exports, class methods, tables,
partial, factories), and unknown stays unknown."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from cglint.model.module import ModuleModel
from cglint.model.project import Project

DERIV = '''
import tensorflow as tf


def dtan(a):
    return 1.0 / tf.square(tf.cos(a))


class Prime:
    @staticmethod
    def dtan(a):
        return 1.0 / tf.square(tf.cos(a))


PRIMES = {"tan": dtan}
'''

# (the importing lines, the expression naming `dtan`)
FORMS = [
    ("from .deriv import dtan", "dtan"),
    ("from .deriv import dtan as d", "d"),
    ("from . import deriv", "deriv.dtan"),
    ("from . import deriv as dv", "dv.dtan"),
    ("from pkg import deriv", "deriv.dtan"),
    ("import pkg.deriv as dv", "dv.dtan"),
    ("import pkg.deriv", "pkg.deriv.dtan"),
    ("import pkg", "pkg.deriv.dtan"),
    ("from pkg import dtan", "dtan"),  # re-exported by __init__
    ("from . import dtan", "dtan"),  # re-exported by __init__
    ("import pkg", "pkg.dtan"),  # re-exported by __init__
    ("from .deriv import *", "dtan"),
    ("from .deriv import Prime", "Prime.dtan"),
    ("from .deriv import PRIMES", 'PRIMES["tan"]'),
    ("from . import deriv", 'deriv.PRIMES["tan"]'),
    ("import functools\nfrom .deriv import dtan as _d\n\n@functools.wraps(_d)\ndef dtan(a):\n    return _d(a)", "dtan"),
    ("from .deriv import dtan\n\ndef local(a):\n    return dtan(a)\n\nalias = local", "alias"),
]


def model_of(tmp_path: Path, user: str) -> tuple[ModuleModel, cst.BaseExpression]:
    pkg = tmp_path / "pkg"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("from .deriv import dtan\n")
    (pkg / "deriv.py").write_text(textwrap.dedent(DERIV))
    path = pkg / "user.py"
    path.write_text(user)
    module = cst.parse_module(user)
    model = ModuleModel(module, project=Project(), path=str(path))
    expr = module.body[-1].body[0].value  # the last statement: `probe = <expr>`
    return model, expr


@pytest.mark.parametrize("imports,spelled", FORMS, ids=[f"{i.splitlines()[0]}|{s}" for i, s in FORMS])
def test_every_spelling_denotes_the_helper(tmp_path, imports, spelled):
    model, expr = model_of(tmp_path, f"{imports}\n\nprobe = {spelled}\n")
    found = model.denote(expr, model.root)
    assert found and all(d.kind == "function" for d in found), found
    names = {d.node.name.value for d in found if isinstance(d.node, cst.FunctionDef)}
    assert names == ({"local"} if spelled == "alias" else {"dtan"}), names
    if not spelled.startswith("Prime") and "wraps" not in imports and "alias" not in spelled:
        helper = model.helper(expr, model.root)
        assert helper is not None and helper.model.path.endswith("deriv.py")


@pytest.mark.parametrize("user,kind", [
    ("from . import deriv\n\nprobe = deriv\n", "module"),
    ("import pkg.deriv as d\n\nprobe = d\n", "module"),
    ("from .deriv import Prime\n\nprobe = Prime\n", "class"),
    ("from .deriv import PRIMES\n\nprobe = PRIMES\n", "table"),
    ("import tensorflow as tf\n\nw = tf.Variable(1.0)\nprobe = w\n", "variable"),
    ("K = 0.5\nprobe = K\n", "constant"),
])
def test_kinds(tmp_path, user, kind):
    model, expr = model_of(tmp_path, user)
    found = model.denote(expr, model.root)
    assert [d.kind for d in found] == [kind]


@pytest.mark.parametrize("user", [
    "import numpy as np\n\nprobe = np.tanh\n",  # an installed package: not read
    "probe = undefined_name\n",
    "from .deriv import missing\n\nprobe = missing\n",
    "from . import deriv\n\nprobe = deriv.missing\n",
    "from .deriv import PRIMES\n\nprobe = PRIMES[key]\n".replace("key", "'other'"),
])
def test_unknown_stays_unknown(tmp_path, user):
    model, expr = model_of(tmp_path, user)
    assert model.helper(expr, model.root) is None
    assert not [d for d in model.denote(expr, model.root) if d.kind == "function"]
