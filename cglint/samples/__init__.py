"""The evaluator: a custom-gradient site's forward and grad fn computed at sample points, so
rules judge a gradient by its values, never by its spelling. The semantic model (`cglint.model`)
says what the code is; this package computes what it gives, with the project's own NumPy
versions of TensorFlow's ops (`arrays`), and never runs the user's code. Anything it cannot
evaluate is Unknown, and nothing is claimed about it.

The questions the value rules ask, one function each:

- `derivative_at_output`, `output_read_for_input` (CG005): a derivative taken at the op's output;
- `gradients_by_position` (CG006): variable gradients in a fixed order;
- `not_linear_in_upstream` (CG009): a grad fn that ignores or distorts its upstream;
- `gradient_shape_mismatch` (CG018): a gradient of the wrong shape;
- `gradient_value_mismatch` (CG019): a gradient of the wrong value.

Modules: `interpret` (a small Python interpreter), `evaluate` (the model's names and ops on top
of it), `arrays` (the ops), `vjp` (sample points and the forward's vector-Jacobian product),
and one module per question.
"""

from cglint.samples.evaluate import derivative_at_output
from cglint.samples.gradvalue import ValueMismatch, gradient_value_mismatch
from cglint.samples.order import gradients_by_position
from cglint.samples.shapes import ShapeMismatch, gradient_shape_mismatch
from cglint.samples.upstream import not_linear_in_upstream
from cglint.samples.vjp import OutputRead, output_read_for_input

__all__ = ["derivative_at_output", "gradient_shape_mismatch", "gradient_value_mismatch", "gradients_by_position",
           "not_linear_in_upstream", "output_read_for_input", "OutputRead", "ShapeMismatch", "ValueMismatch"]
