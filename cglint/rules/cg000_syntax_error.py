"""CG000 syntax-error."""

from cglint.rules.base import Invalid, Rule


class SyntaxErrorRule(Rule):
    """
    ## What it does
    Reports a file that cannot be parsed, at the position of the parse error.

    ## Why is this bad?
    cglint cannot check what it cannot parse, and TensorFlow cannot import it either. The
    error is reported as a diagnostic (never a crash) so that one broken file does not hide
    the findings in the rest of the run. The engine emits it; this module holds its
    documentation and examples.
    """

    code = "CG000"
    name = "syntax-error"
    summary = "File cannot be parsed"

    INVALID = [
        Invalid(
            '''import tensorflow as tf

@tf.custom_gradient
def op(x:
    return x, lambda dy: dy
''',
            at="4:7"),  # where Python says: the `(` that is never closed
        Invalid(
            '''def f(:
    pass
''',
            at="1:7"),
        Invalid(
            '''x = (1,
''',
            at="1:5"),
    ]
    VALID = [
        "import tensorflow as tf\n\n@tf.custom_gradient\ndef op(x):\n    return x, lambda dy: dy\n",
        "x = 1\n",
        "",
    ]
