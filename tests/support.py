"""What several test modules share: the checkout under test, a module with two findings, and
running the CLI as users do (a child process, whatever the working directory)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
# The checkout under test, whatever the working directory of the run.
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

# CG004 (no `variables` parameter) at 8:9 and CG005 (`cos(y)`) at 9:31.
BAD = """import tensorflow as tf

w = tf.Variable(1.0)

@tf.custom_gradient
def op(x):
    y = tf.tan(x * w)
    def grad(dy):
        return dy / tf.square(tf.cos(y))
    return y, grad
"""


def cglint(*args, cwd=ROOT, stdin=None):
    return subprocess.run([sys.executable, "-m", "cglint", *map(str, args)], capture_output=True, text=True,
                          input=stdin, cwd=cwd, env=ENV)


def read_terminal(master: int) -> bytes:
    """Everything written to a pty's slave, read from its master until the child closes it."""
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)
