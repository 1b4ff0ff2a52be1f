"""CG007 input-gradient-count."""

from typing import Iterator

import libcst as cst

from cglint.diagnostics import Finding
from cglint.model import GradientSite, ModuleModel
from cglint.model.scopes import Param
from cglint.model.sites import GradFn
from cglint.rules.base import Invalid, Rule


class InputGradientCount(Rule):
    """
    ## What it does
    Flags a grad fn whose return holds a different number of input gradients than the
    forward has positional inputs. Only what is literal in the source is counted, after
    flattening nested tuples and lists the way TensorFlow does; `None` entries count (they
    are "no gradient for this input"). A starred return or a value of unknown structure (a
    helper's result) is never flagged; a `*args` forward only when every call in the module
    passes more inputs than the grad fn's fixed count, or, with no call in the module, when
    it uses its `*args` as a collection (sums, iterates, measures them) and its grad fn returns
    a single gradient (right for one input, wrong for two or more). When the forward reads variables, the input gradients are the first element of `(input_grads, var_grads)`
    (a flat return there is CG002's finding).

    Inputs are counted as TensorFlow counts them, flattened: a call `f([left, right], gate)`
    in the module makes `f` take 3 inputs. Where no call says, a parameter the forward takes
    apart (`a, b = pair`, `xs[0]`, `for x in xs`, `tf.add_n(xs)`) has an unknown structure and
    the rule is silent. A number literal returned as a gradient counts as one. A forward whose
    only variables are `trainable=False` (and that calls nothing that may read others) gets
    no `variables`: its `(d_x, [d_v])` is two input gradients. Keras 3's
    `keras.ops.custom_gradient` counts its inputs the same way on the TensorFlow backend and
    is checked too.

    ## Why is this bad?
    TensorFlow flattens the grad fn's input gradients and requires exactly one per flattened
    positional argument of the call. Too many or too few raises at the first backward pass:
    `ValueError: custom_gradient function expected to return 3 gradients, but returned 2
    instead.` (eager), or `Recorded operation returned too few gradients` inside
    `tf.function`. Return `None` for an input that gets no gradient. A defaulted parameter
    is an input only when the caller passes it positionally, so either count is accepted
    for it (CG010 flags the defaulted parameter itself).
    """

    code = "CG007"
    name = "input-gradient-count"
    summary = "Number of input gradients returned differs from the number of positional inputs"

    INVALID = [
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def fma(p, q, r):
    def grad(dy):
        return dy * q, dy * p

    return p * q + r, grad
''',
            at="7:9"),
        Invalid(
            '''
import tensorflow as tf

@tf.custom_gradient
def square(x):
    return x * x, lambda dy: (2 * x * dy, None)
''',
            at="6:31"),
        Invalid(
            '''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scaled_sum(x, y):
    def grad(dy, variables=None):
        return dy * w, [tf.reduce_sum(dy * (x + y)) for v in variables]

    return (x + y) * w, grad
''',
            at="9:9"),
        Invalid(
            '''
import tensorflow as tf


@tf.custom_gradient
def gated_sum(pair, gate):
    a, b = pair

    def grad(dy):
        return dy * gate, dy * (a - b)

    return gate * a + (1.0 - gate) * b, grad


class GatedMerge(tf.keras.layers.Layer):
    def call(self, inputs):
        left, right, gate = inputs
        return gated_sum([left, right], gate)
''',
            at="10:9"),
        Invalid(
            '''
import tensorflow as tf


class RunningScale(tf.keras.layers.Layer):
    def build(self, input_shape):
        self.scale = self.add_weight(shape=(), initializer="ones", trainable=False, name="scale")

    def call(self, x):
        @tf.custom_gradient
        def forward(x):
            def grad(dy, variables=None):
                return dy * self.scale, [tf.reduce_sum(dy * x)]

            return x * self.scale, grad

        return forward(x)
''',
            at="13:17"),
        Invalid(
            '''
import tensorflow as tf


@tf.custom_gradient
def quantize(x, step):
    def grad(dy):
        return dy, 0.0, 0.0

    return tf.round(x / step) * step, grad
''',
            at="8:9"),
        Invalid(
            '''
import tensorflow as tf


@tf.custom_gradient
def fused_sum(*tensors):
    def grad(dy):
        return dy, dy

    return tf.add_n(list(tensors)), grad


total = fused_sum(tf.ones([2]), tf.ones([2]), tf.ones([2]))
''',
            at="8:9"),
        Invalid(
            '''
import tensorflow as tf


@tf.custom_gradient
def mean_of(*tensors):
    y = tf.add_n(list(tensors)) / len(tensors)
    return y, lambda dy: dy / len(tensors)
''',
            at="8:26"),
    ]
    VALID = [
        '''
import tensorflow as tf


@tf.custom_gradient
def mean_of(*tensors):
    y = tf.add_n(list(tensors)) / len(tensors)
    return y, lambda dy: tuple(dy / len(tensors) for _ in tensors)
''',
        '''
import tensorflow as tf


@tf.custom_gradient
def fused_sum(*tensors):
    def grad(dy):
        return tuple(dy for _ in tensors)

    return tf.add_n(list(tensors)), grad


total = fused_sum(tf.ones([2]), tf.ones([2]), tf.ones([2]))
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def product(features):
    # A dict input flattens to one tensor per entry: one gradient each, in a dict of the same keys.
    y = features["a"] * features["b"]
    def grad(dy):
        return {"a": dy * features["b"], "b": dy * features["a"]}
    return y, grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def fma(p, q, r):
    def grad(dy):
        return dy * q, dy * p, dy

    return p * q + r, grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def clip_min(x, threshold):
    def grad(dy):
        return dy * tf.cast(x > threshold, dy.dtype), None

    return tf.maximum(x, threshold), grad
''',
        '''
import tensorflow as tf

@tf.custom_gradient
def add_all(*xs):
    return tf.add_n(xs), lambda dy: [dy for _ in xs]
''',
        '''
import tensorflow as tf

def grads_for(dy, x, y):
    return dy * y, dy * x

@tf.custom_gradient
def mul(x, y):
    return x * y, lambda dy: grads_for(dy, x, y)
''',
        '''
import tensorflow as tf

w = tf.Variable(2.0)

@tf.custom_gradient
def scaled_sum(x, y):
    def grad(dy, variables=None):
        return (dy * w, dy * w), [tf.reduce_sum(dy * (x + y)) for v in variables]

    return (x + y) * w, grad
''',
        '''
import tensorflow as tf

class Scale(tf.keras.layers.Layer):
    @tf.custom_gradient
    def call(self, x):
        return 2.0 * x, lambda dy: 2.0 * dy
''',
        '''
import tensorflow as tf


@tf.custom_gradient
def gated_sum(pair, gate):
    a, b = pair

    def grad(dy):
        return (dy * gate, dy * (1.0 - gate)), dy * (a - b)

    return gate * a + (1.0 - gate) * b, grad


class GatedMerge(tf.keras.layers.Layer):
    def call(self, inputs):
        left, right, gate = inputs
        return gated_sum([left, right], gate)
''',
        '''
import tensorflow as tf


class RunningScale(tf.keras.layers.Layer):
    def build(self, input_shape):
        self.scale = self.add_weight(shape=(), initializer="ones", trainable=False, name="scale")

    def call(self, x):
        @tf.custom_gradient
        def forward(x):
            def grad(dy):
                return dy * self.scale

            return x * self.scale, grad

        return forward(x)
''',
        '''
import tensorflow as tf


@tf.custom_gradient
def quantize(x, step):
    def grad(dy):
        return dy, 0.0

    return tf.round(x / step) * step, grad
''',
        '''
import tensorflow as tf


@tf.custom_gradient
def pair_product(xs):
    a, b = xs[0], xs[1]

    def grad(dy):
        return dy * b, dy * a

    return a * b, grad
''',
    ]

    def check_site(self, site: GradientSite) -> Iterator[Finding]:
        if site.has_varargs:
            yield from self._varargs(site)
            return
        model = site.model
        per_input = model.input_counts(site)
        if None in per_input:
            return  # an input of unknown structure: any count may be right
        required = [c for c, p in zip(per_input, site.input_params) if p.default is None]
        lo, hi = sum(required), sum(per_input)  # type: ignore[arg-type]
        expected = str(hi) if lo == hi else f"{lo} to {hi}"
        flattened = " (flattened)" if hi != len(site.inputs) else ""
        # Only trainable variables reach `variables`: a forward reading nothing else gets none,
        # and its `(d_x, [d_v])` is two input gradients.
        no_variables = bool(site.variables) and not site.trainable_variables and not model.may_read_unseen_variables(site)
        for grad, ret, pair, counts in _returned_counts(site, no_variables):
            if None in counts or any(lo <= c <= hi for c in counts):  # type: ignore[operator]
                continue
            if model.inputs_taken_apart(site):
                return  # an input of unknown structure: any count may be right
            got = counts[-1]
            why = (" (its variables are all trainable=False, so TensorFlow passes no `variables` and counts "
                   "the variable gradients as input gradients)") if no_variables and pair is not None else ""
            yield Finding(
                ret.node,
                f"`{grad.name}` returns {got} input gradient{'s' if got != 1 else ''} but `{site.name}` takes "
                f"{expected} positional input{'s' if hi != 1 else ''}{flattened}{why}: TensorFlow raises "
                f"'custom_gradient function expected to return {hi} gradients'; return one per input (`None` for "
                "none)",
            )

    def check(self, model: ModuleModel) -> Iterator[Finding]:
        """Also the calls this module makes to a custom-gradient function of another project
        module with a literal structure (`ops.gated_sum([left, right], gate)`): the module that
        defines it does not see what its callers pass, so the finding is at the call."""
        yield from super().check(model)
        for call, scope, site in model.calls_of_other_modules_sites():
            if site.has_varargs:
                yield from self._varargs_call(site, model, call, scope)
                continue
            positional = [a for a in call.args if a.keyword is None]
            if any(a.star for a in positional) or len(positional) > len(site.inputs):
                continue
            taken_apart = site.model.inputs_used_as_structures(site)
            counts = [model.structure_count(a.value, scope) for a in positional]
            if all(c is None for c in counts) or any(
                    c is None and site.inputs[i] in taken_apart for i, c in enumerate(counts)):
                continue  # no structure shown here, or one of unknown structure
            passed = sum(c if c is not None else 1 for c in counts)
            no_variables = (bool(site.variables) and not site.trainable_variables
                            and not site.model.may_read_unseen_variables(site))
            for grad, ret, pair, returned in _returned_counts(site, no_variables):
                if None in returned or passed in returned:
                    continue
                got = returned[-1]
                yield Finding(
                    call,
                    f"This call passes {passed} tensors (flattened) to `{site.name}`, whose `{grad.name}` returns "
                    f"{got} input gradient{'s' if got != 1 else ''}: TensorFlow raises 'custom_gradient function "
                    f"expected to return {passed} gradients'; return one per input (`None` for none)",
                )
                break

    @staticmethod
    def _varargs_call(site: GradientSite, model: ModuleModel, call: cst.Call, scope) -> Iterator[Finding]:
        """A call of another module's `*args` forward passing more tensors than its grad fn
        returns gradients (as `_varargs` judges the calls of the defining module)."""
        least = model.passed_at_least(call, scope)
        if least is None or site.variables:
            return
        for grad in site.grad_fns:
            for ret in grad.returns:
                got = site.model.flat_count(ret.value, grad.scope) if ret.value is not None else None
                if got is None or got >= least:
                    continue
                yield Finding(
                    call,
                    f"This call passes at least {least} positional inputs to the `*args` of `{site.name}`, whose "
                    f"`{grad.name}` returns {got} input gradient{'s' if got != 1 else ''}: TensorFlow raises "
                    f"'custom_gradient function expected to return {least} gradients'; return one per input "
                    "(`tuple(dy for _ in args)`)",
                )
                return

    @staticmethod
    def _varargs(site: GradientSite) -> Iterator[Finding]:
        """A `*args` forward takes what its calls pass: each call in the module passes at least
        one tensor per positional argument (a literal structure its flattened count), so a grad
        fn returning a fixed number below what every call passes always raises."""
        model = site.model
        calls = model.calls_reaching(site)
        if site.variables:
            return
        if not calls:
            yield from InputGradientCount._varargs_uncalled(site)
            return
        least = None
        for call, scope in calls:
            passed = model.passed_at_least(call, scope)
            if passed is None:
                return  # `f(*xs)`: any count
            least = passed if least is None else min(least, passed)
        for grad in site.grad_fns:
            for ret in grad.returns:
                got = model.flat_count(ret.value, grad.scope) if ret.value is not None else None
                if got is None or least is None or got >= least:
                    continue
                yield Finding(
                    ret.node,
                    f"`{grad.name}` returns {got} input gradient{'s' if got != 1 else ''} but every call of "
                    f"`{site.name}` in this module passes at least {least} positional input{'s' if least != 1 else ''} "
                    f"to its `*args`: TensorFlow raises 'custom_gradient function expected to return {least} "
                    "gradients'; return one per input (`tuple(dy for _ in args)`)",
                )

    @staticmethod
    def _varargs_uncalled(site: GradientSite) -> Iterator[Finding]:
        """With no call to count, a forward of only `*args` that uses them as a collection (sums,
        iterates, measures them) is meant for several inputs: one non-tuple gradient is right
        for one input only and raises for two or more."""
        star = site.forward.params.star_arg
        if site.inputs or not isinstance(star, cst.Param):
            return
        uses, picked = site.model.uses_of(site.forward.body, star.name.value)
        if len(uses) <= len(picked):
            return  # only `args[0]`-style picks: it may be meant for one input
        for grad in site.grad_fns:
            for ret in grad.returns:
                if ret.value is None or not _one_tensor(site, ret.value, grad):
                    continue
                yield Finding(
                    ret.node,
                    f"`{grad.name}` returns one gradient but `{site.name}` takes any number of inputs "
                    f"(`*{star.name.value}`): TensorFlow raises 'custom_gradient function expected to return 2 "
                    f"gradients' as soon as two are passed; return one per input (`tuple(... for _ in {star.name.value})`)",
                )


def _one_tensor(site: GradientSite, expr: cst.BaseExpression, grad: GradFn) -> bool:
    """Surely one tensor: arithmetic or the upstream itself (an op such as `tf.py_function`
    may return a list)."""
    values = site.model.resolve(expr, grad.scope)
    return bool(values) and all(isinstance(v, (cst.BinaryOperation, cst.UnaryOperation)) or (
        isinstance(v, Param) and v.node.star not in ("*", "**") and v.node.name.value in grad.upstream_names) for v in values)


def _returned_counts(site: GradientSite, no_variables: bool):
    """(grad fn, return, its `(inputs, variables)` pair or None, the input-gradient counts it may
    mean) for each return of the site's grad fns: two readings where the grad fn takes variables
    the model cannot see."""
    model = site.model
    for grad in site.grad_fns:
        for ret in grad.returns:
            if ret.value is None:
                continue
            pair = ret.elements if ret.elements is not None and len(ret.elements) == 2 else None
            if site.trainable_variables:
                if pair is None:
                    continue  # flat or unknown: CG002's business
                counts = [model.flat_count(pair[0], grad.scope)]
            elif grad.variables_param is not None and pair is not None and not no_variables:
                # The grad fn takes variables the model cannot see: either reading holds.
                counts = [model.flat_count(ret.value, grad.scope), model.flat_count(pair[0], grad.scope)]
            else:
                counts = [model.flat_count(ret.value, grad.scope)]
            yield grad, ret, pair, counts
