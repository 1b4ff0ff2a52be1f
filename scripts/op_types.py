"""Regenerate `cglint/gradcheck/op_types.txt`: every op type the installed TensorFlow registers
(the C++ op registry, a superset of `tf.raw_ops`), one a line, sorted.

    .venv/bin/python scripts/op_types.py          # rewrite the file
    .venv/bin/python scripts/op_types.py --check  # exit 1 if it differs from the installed TensorFlow
"""

from __future__ import annotations

import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "cglint" / "gradcheck" / "op_types.txt"


def installed_op_types() -> list[str]:
    import tensorflow as tf
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session as c_api
    from tensorflow.python.util import compat

    ops = op_def_pb2.OpList()
    ops.ParseFromString(compat.as_bytes(c_api.TF_GetBuffer(c_api.TF_GetAllOpList())))
    names = {op.name for op in ops.op} | {n for n in dir(tf.raw_ops) if not n.startswith("_")}
    return sorted(names)


def main(argv: list[str]) -> int:
    import tensorflow as tf

    text = f"# op types of TensorFlow {tf.__version__}; regenerate with scripts/op_types.py\n" + \
        "\n".join(installed_op_types()) + "\n"
    if "--check" in argv:
        same = OUT.read_text(encoding="utf-8") == text
        print("op_types.txt is current" if same else "op_types.txt differs: run scripts/op_types.py")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT} ({text.count(chr(10)) - 1} op types)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
