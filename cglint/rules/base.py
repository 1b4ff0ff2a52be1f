"""The shape of a rule. A rule module holds one subclass of `Rule`: its metadata, its
documentation (ruff's sections), VALID/INVALID examples that the test suite runs, and the
check, which only asks the model questions."""

from __future__ import annotations

import inspect
from typing import ClassVar, Iterator, Sequence

from cglint.diagnostics import Finding
from cglint.model import GradientSite, ModuleModel
from cglint.rules._keras_ops import KERAS_OPS


class Invalid(str):
    """An INVALID example that pins what it claims, as Fixit's `Invalid(code, range,
    expected_replacement)` does: the source, where each finding of the rule starts (`"line:col"`,
    1-based, in order: their number is the count), and what the rule's fixes make of it
    (`fixed`, after `--fix --unsafe-fixes` with this rule alone; None when it offers no fix).
    It is a `str` (the source), so documentation and tools read it as the example's code."""

    at: tuple[str, ...]
    fixed: str | None

    def __new__(cls, code: str, at: str | Sequence[str], fixed: str | None = None) -> "Invalid":
        self = super().__new__(cls, code)
        self.at = (at,) if isinstance(at, str) else tuple(at)
        self.fixed = fixed
        return self


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]  # one line, for --list-rules and the rule table
    severity: ClassVar[str] = "error"
    # Examples the suite runs: every INVALID must be flagged by this rule, no VALID may be.
    # INVALID[0] and VALID[0] are the documentation's "Example" and "Use instead".
    INVALID: ClassVar[list[str]] = []
    VALID: ClassVar[list[str]] = []
    fix_safety: ClassVar[str | None] = None

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        """Module-level entry point; most rules only look at one site at a time."""
        for site in model.sites:
            if site.keras_ops and self.code not in KERAS_OPS:
                continue  # Keras 3's custom_gradient: only rules whose behaviour holds there
            fired = False
            for finding in self.check_site(site):
                fired = True
                if finding.site is None:
                    finding.site = site
                yield finding
            site.__dict__.setdefault("_fired", {})[self.code] = fired

    def fires_on(self, site: GradientSite) -> bool:
        """Whether this rule finds something at `site`: what its run in this lint said, if it ran
        (a rule that defers to a more precise one asks, instead of evaluating the site again)."""
        known = site.__dict__.get("_fired", {}).get(self.code)
        return known if known is not None else next(iter(self.check_site(site)), None) is not None

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        return iter(())

    @classmethod
    def documentation(cls) -> str:
        """The rule's full documentation, as `cglint --explain` prints it."""
        parts = [f"# {cls.name} ({cls.code})", "", inspect.cleandoc(cls.__doc__ or "")]
        if cls.INVALID:
            parts += ["", "## Example", "", "```python", cls.INVALID[0].strip("\n"), "```"]
        if cls.VALID:
            parts += ["", "## Use instead", "", "```python", cls.VALID[0].strip("\n"), "```"]
        if cls.code in KERAS_OPS:
            parts += ["", "## Keras 3", "", "Also checks `keras.ops.custom_gradient` sites (the TensorFlow backend's "
                      "`tf.custom_gradient`): " + KERAS_OPS[cls.code]]
        if cls.fix_safety:
            parts += ["", "## Fix safety", "", inspect.cleandoc(cls.fix_safety)]
        return "\n".join(parts) + "\n"
