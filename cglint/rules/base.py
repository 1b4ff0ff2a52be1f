"""The shape of a rule. A rule module holds one subclass of `Rule`: its metadata, its
documentation (ruff's sections), VALID/INVALID examples that the test suite runs, and the
check, which only asks the model questions."""

from __future__ import annotations

import inspect
from typing import ClassVar, Iterator

from cglint.diagnostics import Finding
from cglint.model import GradientSite, ModuleModel


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
            yield from self.check_site(site)

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
        if cls.fix_safety:
            parts += ["", "## Fix safety", "", inspect.cleandoc(cls.fix_safety)]
        return "\n".join(parts) + "\n"
