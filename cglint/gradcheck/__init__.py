"""The gradient-check core that the static value rules, `--runtime` and `cglint trace` share.

`verdict` decides from measurements (pure NumPy), `report` holds the results and the one way an
exception is worded, `symptoms` what a result says of a static finding, `domain` what a
parameter's name says of its values, and `check` runs the comparison with TensorFlow (imported
only by the processes that run user code). This package imports no other part of cglint.
"""
