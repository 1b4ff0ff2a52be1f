"""Runtime mode: checks custom gradients numerically against TensorFlow autodiff.

`check_gradient` and friends import TensorFlow on first use (PEP 562 `__getattr__`), so the
parent side of the runner (`cglint.runtime.runner`, which only spawns child processes) and the
static linter never pay for it.
"""

from cglint.gradcheck.report import ArgResult, GradientReport

__all__ = ["check_gradient", "assert_gradient_matches", "forward_runs", "GradientReport",
           "ArgResult"]

_LAZY = {"check_gradient", "assert_gradient_matches", "forward_runs"}


def __getattr__(name):
    if name in _LAZY:
        from cglint.gradcheck import check

        return getattr(check, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
