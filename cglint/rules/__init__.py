"""The rule catalogue: one module per rule, named after its code (`cg005_output_derivative.py`).

Codes are fixed: users' `# noqa` comments and configurations depend on them.

Rule modules (and libcst, which they need) are imported only when a rule is used: selecting
rules works on codes (`select_codes`), and a run over files that never mention
`custom_gradient` never loads them. `ALL_RULES` and `RULES_BY_CODE` load every rule on first
access; `rule(code)` loads one."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Iterable, Sequence

if TYPE_CHECKING:
    from cglint.rules.base import Rule

# code -> (module in this package, the Rule subclass in it). A new rule adds one line here
# (tests/test_startup.py checks that every cgNNN_*.py module is listed).
_REGISTRY: dict[str, tuple[str, str]] = {
    "CG000": ("cg000_syntax_error", "SyntaxErrorRule"),
    "CG001": ("cg001_nested_tf_function", "NestedTfFunction"),
    "CG002": ("cg002_flat_variable_gradients", "FlatVariableGradients"),
    "CG003": ("cg003_variable_gradients_callable", "VariableGradientsCallable"),
    "CG004": ("cg004_missing_variables_parameter", "MissingVariablesParameter"),
    "CG005": ("cg005_output_derivative", "OutputDerivative"),
    "CG006": ("cg006_hardcoded_variable_order", "HardcodedVariableOrder"),
    "CG007": ("cg007_input_gradient_count", "InputGradientCount"),
    "CG008": ("cg008_upstream_count", "UpstreamCount"),
    "CG009": ("cg009_upstream_ignored", "UpstreamIgnored"),
    "CG010": ("cg010_keyword_call", "KeywordCall"),
    "CG011": ("cg011_variable_created_inside", "VariableCreatedInside"),
    "CG012": ("cg012_eager_only_in_gradient", "EagerOnlyInGradient"),
    "CG013": ("cg013_missing_decorator", "MissingDecorator"),
    "CG014": ("cg014_keras_variable_identity", "KerasVariableIdentity"),
    "CG015": ("cg015_non_tensor_argument", "NonTensorArgument"),
    "CG016": ("cg016_gradient_dtype", "GradientDtype"),
    "CG017": ("cg017_gradient_override_ignored", "GradientOverrideIgnored"),
    "CG018": ("cg018_gradient_shape", "GradientShape"),
    "CG019": ("cg019_gradient_value", "GradientValue"),
    "CG020": ("cg020_override_key_not_op_type", "OverrideKeyNotOpType"),
    "CG021": ("cg021_recompute_grad_random", "RecomputeGradRandom"),
}
CODES: tuple[str, ...] = tuple(_REGISTRY)
# Rules outside the default catalogue, run only when asked for (`--report-unused-noqa`).
OPT_IN: dict[str, tuple[str, str]] = {
    "CG100": ("cg100_unused_noqa", "UnusedNoqa"),
}


class UnknownCodeError(ValueError):
    pass


def rule(code: str) -> type[Rule]:
    """The rule class for `code` (imports its module on first use). KeyError if unknown."""
    module, name = _REGISTRY[code] if code in _REGISTRY else OPT_IN[code]
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def rules(codes: Iterable[str | type[Rule]]) -> list[type[Rule]]:
    """Rule classes for codes (classes pass through), in catalogue order as given."""
    return [rule(c) if isinstance(c, str) else c for c in codes]


def select_codes(select: Sequence[str] | None = None, ignore: Sequence[str] | None = None) -> list[str]:
    """Codes chosen by code or code prefix (`CG0` selects CG000-CG009), as in ruff; no rule
    module is imported. An opt-in rule (CG100) is chosen by its code, or by a prefix that
    matches no rule of the catalogue (`CG1`): `CG` and `ALL` keep to the catalogue, so a
    configuration's `select = ["CG"]` runs what it ran before CG100 could be selected."""

    def matching(selector: str) -> set[str]:
        selector = selector.strip().upper()
        if selector == "ALL":
            return set(CODES)
        hits = {code for code in CODES if code.startswith(selector)}
        if selector and not hits:
            hits = {code for code in OPT_IN if code.startswith(selector)}
        if not selector or not hits:
            raise UnknownCodeError(f"unknown rule code or prefix: {selector or '(empty)'!r}")
        return hits

    chosen: set[str] = set(CODES)
    if select:
        chosen = set().union(*(matching(s) for s in select))
    for s in ignore or []:
        chosen -= matching(s)
    return [c for c in (*CODES, *OPT_IN) if c in chosen]


def select_rules(select: list[str] | None = None, ignore: list[str] | None = None) -> list[type[Rule]]:
    """Rule classes chosen by code or code prefix (see `select_codes`)."""
    return rules(select_codes(select, ignore))


def __getattr__(name: str):
    # PEP 562: the whole catalogue, loaded on first access.
    if name == "ALL_RULES":
        return rules(CODES)
    if name == "RULES_BY_CODE":
        return {c: rule(c) for c in CODES}
    if name == "Rule":
        from cglint.rules.base import Rule

        return Rule
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
