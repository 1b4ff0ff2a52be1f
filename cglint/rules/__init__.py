"""The rule catalogue: one module per rule, named after its code (`cg005_output_derivative.py`).

Codes are fixed: users' `# noqa` comments and configurations depend on them."""

from __future__ import annotations

from cglint.rules.base import Rule
from cglint.rules.cg000_syntax_error import SyntaxErrorRule
from cglint.rules.cg001_nested_tf_function import NestedTfFunction
from cglint.rules.cg002_flat_variable_gradients import FlatVariableGradients
from cglint.rules.cg003_variable_gradients_callable import VariableGradientsCallable
from cglint.rules.cg004_missing_variables_parameter import MissingVariablesParameter
from cglint.rules.cg005_output_derivative import OutputDerivative
from cglint.rules.cg006_hardcoded_variable_order import HardcodedVariableOrder
from cglint.rules.cg007_input_gradient_count import InputGradientCount
from cglint.rules.cg008_upstream_count import UpstreamCount
from cglint.rules.cg009_upstream_ignored import UpstreamIgnored
from cglint.rules.cg010_keyword_call import KeywordCall
from cglint.rules.cg011_variable_created_inside import VariableCreatedInside
from cglint.rules.cg012_eager_only_in_gradient import EagerOnlyInGradient
from cglint.rules.cg013_missing_decorator import MissingDecorator
from cglint.rules.cg014_keras_variable_identity import KerasVariableIdentity
from cglint.rules.cg015_non_tensor_argument import NonTensorArgument

ALL_RULES: list[type[Rule]] = [
    SyntaxErrorRule,
    NestedTfFunction,
    FlatVariableGradients,
    VariableGradientsCallable,
    MissingVariablesParameter,
    OutputDerivative,
    HardcodedVariableOrder,
    InputGradientCount,
    UpstreamCount,
    UpstreamIgnored,
    KeywordCall,
    VariableCreatedInside,
    EagerOnlyInGradient,
    MissingDecorator,
    KerasVariableIdentity,
    NonTensorArgument,
]
RULES_BY_CODE: dict[str, type[Rule]] = {r.code: r for r in ALL_RULES}


class UnknownCodeError(ValueError):
    pass


def select_rules(select: list[str] | None = None, ignore: list[str] | None = None) -> list[type[Rule]]:
    """Rules chosen by code or code prefix (`CG0` selects CG000-CG009), as in ruff."""

    def matching(selector: str) -> set[str]:
        selector = selector.strip().upper()
        if selector == "ALL":
            return set(RULES_BY_CODE)
        hits = {code for code in RULES_BY_CODE if code.startswith(selector)}
        if not selector or not hits:
            raise UnknownCodeError(f"unknown rule code or prefix: {selector or '(empty)'!r}")
        return hits

    chosen: set[str] = set(RULES_BY_CODE)
    if select:
        chosen = set().union(*(matching(s) for s in select))
    for s in ignore or []:
        chosen -= matching(s)
    return [r for r in ALL_RULES if r.code in chosen]
