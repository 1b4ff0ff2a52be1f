"""The analysis model: one libcst parse of a module -> the TensorFlow custom-gradient sites in it.

This package is the only place that walks the syntax tree. Rules ask a `ModuleModel` and its
`GradientSite`s questions ("which variables does the forward read?", "what does this name
hold?", "what does this grad fn return?") and never traverse the tree themselves.

One pass (`scopes.Collector`) records imports, scopes with their name bindings, function
definitions, calls and `self.x = ...` attributes. Sites are then assembled from those tables,
so the cost is one walk plus work proportional to the sites.

Modules, in the order they build on one another:

- `ops`: TensorFlow's names (ops under every spelling, `tf.function`);
- `scopes`: scopes and bindings, the walk, imports;
- `variables`: variables and Keras weights, and which a forward reads;
- `sites`: custom-gradient functions, their grad fns and returns;
- `flow`: structures, counts, plain Python values, "no gradient";
- `boundaries`: what a callable expression is across the boundaries real code crosses (class
  hierarchies, user decorators, tables and config objects, factories, other project modules);
- `index`: module-wide indexes (who calls which site);
- `module`: `ModuleModel`, which puts them together.
"""

from cglint.model.flow import CALLABLE, LIST, NONE, TENSOR, TUPLE, UNKNOWN, is_no_gradient, kind_of
from cglint.model.module import ModuleModel
from cglint.model.ops import TF_FUNCTION, tf_op_name
from cglint.model.scopes import Binding, FunctionNode, Param, Scope, Unpacked, argument, positional_arguments, reach_imports
from cglint.model.sites import GradFn, GradientSite, GradReturn, Helper, UnwrappedCandidate
from cglint.model.variables import (
    KERAS_VARIABLE_CONSTRUCTORS, KERAS_WEIGHT_ATTRIBUTES, VARIABLE_CONSTRUCTORS, Variable,
)
from cglint.names import KERAS_CUSTOM_GRADIENT, TF_CUSTOM_GRADIENT, alias_to_tensorflow, normalize

__all__ = [
    "CALLABLE", "LIST", "NONE", "TENSOR", "TUPLE", "UNKNOWN", "is_no_gradient", "kind_of", "ModuleModel",
    "TF_FUNCTION", "tf_op_name", "Binding", "FunctionNode", "Param", "Scope", "Unpacked", "argument",
    "positional_arguments", "reach_imports", "GradFn", "GradientSite", "GradReturn", "Helper", "UnwrappedCandidate",
    "KERAS_VARIABLE_CONSTRUCTORS", "KERAS_WEIGHT_ATTRIBUTES", "VARIABLE_CONSTRUCTORS", "Variable",
    "KERAS_CUSTOM_GRADIENT", "TF_CUSTOM_GRADIENT", "alias_to_tensorflow", "normalize",
]
