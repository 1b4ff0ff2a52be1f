"""TensorFlow's op types, as the package ships them (`op_types.txt`, regenerated from the
installed TensorFlow by `scripts/op_types.py`), and the closest one to a name that is none.

`gradient_override_map` and `tf.RegisterGradient` match op types exactly; the static rule and
`--runtime` both name the op a mistyped key meant with `closest_op_type`. Reading the list needs
no TensorFlow."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=1)
def op_types() -> frozenset[str]:
    text = resources.files(__package__).joinpath("op_types.txt").read_text(encoding="utf-8")
    return frozenset(line for line in text.splitlines() if line and not line.startswith("#"))


def is_op_type(name: str) -> bool:
    return name in op_types()


def closest_op_type(name: str) -> str | None:
    """The op type `name` most likely meant: one spelled the same but for case (`"sign"` ->
    `"Sign"`, `"Matmul"` -> `"MatMul"`), else difflib's closest, else None."""
    import difflib

    known = sorted(op_types())
    same = [n for n in known if n.lower() == name.lower()]
    if same:
        return same[0]
    close = difflib.get_close_matches(name, known, n=1)
    return close[0] if close else None
