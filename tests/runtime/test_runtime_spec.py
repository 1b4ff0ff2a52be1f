"""The input spec language and the shape search."""

import numpy as np
import pytest
import tensorflow as tf

from cglint.runtime.spec import (SpecError, build_inputs, candidate_specs, module_shapes,
                                 parse_spec)

SOURCE = '''
import tensorflow as tf
W = tf.Variable([[1., 2.], [2., 3.], [3., 4.]])
B = tf.Variable(tf.zeros([2]))
K = tf.constant(3.0)

@tf.custom_gradient
def op(x):
    ...

class Layer:
    def call(self, a, b):
        ...
'''


def test_parse_and_build():
    specs = parse_spec("x=normal(2, 3), uniform(2, 3, low=0, high=0.5), float64")
    assert [(s.kind, s.shape, s.dtype, s.name) for s in specs] == [
        ("normal", (2, 3), "float64", "x"), ("uniform", (2, 3), "float64", None)]
    x, u = build_inputs(specs, ["x", "y"], seed=1)
    assert x.dtype == tf.float64 and x.shape == (2, 3)
    assert float(tf.reduce_min(u)) >= 0 and float(tf.reduce_max(u)) < 0.5
    again, _ = build_inputs(parse_spec("normal(2, 3, dtype=float64)"), None, seed=1) * 2
    np.testing.assert_array_equal(x.numpy(), again.numpy())  # same seed, same tensor


def test_constants_literals_module_refs_and_names():
    class M:
        BATCH = tf.ones([2, 2])

    a, b, c = build_inputs(parse_spec("c=module:BATCH, constant([[1., 2.], [3., 4.]]), -2.5"),
                           ["a", "b", "c"], module=M)
    assert a.shape == (2, 2) and float(b) == -2.5 and c is M.BATCH
    with pytest.raises(SpecError, match="no 'NOPE'"):
        build_inputs(parse_spec("module:NOPE"), ["x"], module=M)


@pytest.mark.parametrize("bad", ["normal(2", "eval('1')", "__import__('os')", "normal(2.5)",
                                 "normal(x=1)", "module:os;x", "constant(1, 2)",
                                 "normal(2, dtype=complex32)", "float32, float64"])
def test_rejects_anything_outside_the_language(bad):
    with pytest.raises(SpecError):
        parse_spec(bad)


def test_shape_search_candidates():
    assert module_shapes(SOURCE) == [(3, 2), (2,), ()]
    specs = candidate_specs(SOURCE, "op")
    assert specs[0] == "normal(2, 3)"  # fits x @ W with W of shape (3, 2)
    assert len(specs) <= 8 and len(set(specs)) == len(specs)
    two = candidate_specs(SOURCE, "Layer.call", shapes=[(3, 2), (2,)])
    assert two[0] == "normal(3, 2), normal(2)" and all(s.count("normal") == 2 for s in two)
    assert candidate_specs("def f(x): ...", "f", shapes=[]) == [
        "normal(2, 3)", "normal(3)", "normal()"]


def test_positive_domain_names_get_positive_values_and_scalars_where_usual():
    source = "def clip_gradient(x, clip_norm): ...\ndef soft(logits, temperature, scale): ...\n"
    assert candidate_specs(source, "clip_gradient", shapes=[])[0] == \
        "normal(2, 3), uniform(low=0.5, high=1.5)"
    first = candidate_specs(source, "soft", shapes=[])[0]
    assert first == "normal(4, 3), uniform(low=0.5, high=1.5), uniform(3, low=0.5, high=1.5)"
    x, t, s = build_inputs(parse_spec(first), ["logits", "temperature", "scale"])
    assert t.shape == () and float(t) > 0 and s.shape == (3,) and float(tf.reduce_min(s)) > 0
    # A distribution's parameters (TFP's `von_mises_cdf(x, concentration)`, whose series holds
    # only for concentration > 0: at normal samples its own correct gradient was a false mismatch).
    assert candidate_specs("def von_mises_cdf(x, concentration): ...", "von_mises_cdf", shapes=[])[0] == \
        "normal(2, 3), uniform(2, 3, low=0.5, high=1.5)"


def test_per_feature_parameters_are_probed_against_a_batch():
    # (k,) against (n, k), where a collapsed or over-reduced parameter gradient shows.
    assert candidate_specs("def swish(x, beta): ...", "swish", shapes=[])[0] == \
        "normal(4, 3), uniform(3, low=0.5, high=1.5)"
    # Plain elementwise binary ops keep equal shapes (broadcasting is not assumed).
    assert candidate_specs("def mul(a, b): ...", "mul", shapes=[])[0] == "normal(2, 3), normal(2, 3)"


def test_varargs_arity_comes_from_call_sites_and_hints_fix_parameters():
    source = "def fused(*parts): ...\n\ndef block(x):\n    return fused(x, x, x)\n"
    assert candidate_specs(source, "fused", shapes=[])[0] == \
        "normal(2, 3), normal(2, 3), normal(2, 3)"
    source = "def scale_gradient(x, multiplier): ...\n"
    assert candidate_specs(source, "scale_gradient", shapes=[], hints={"1": "float(-0.3)"})[0] == \
        "normal(2, 3), float(-0.3)"
    (number,) = build_inputs(parse_spec("float(-0.3)"))
    assert number == -0.3 and type(number) is float
    with pytest.raises(SpecError):
        parse_spec("int(2.5)")


LOOKUP = '''
import tensorflow as tf


@tf.custom_gradient
def lookup(table, ids):
    def grad(dy):
        rows = tf.reshape(dy, [-1, tf.shape(table)[-1]])
        flat = tf.reshape(ids, [-1, 1])
        return tf.tensor_scatter_nd_{how}(tf.zeros_like(table), flat, rows), None
    return tf.gather(table, ids), grad
'''


@pytest.mark.parametrize("how, verdict", [("add", "match"), ("update", "mismatch")])
def test_ids_into_another_input_are_integer_rows_with_repeats(tmp_path, how, verdict):
    """`tf.gather(table, ids)`: ids are integers within the table's rows, repeated, where a grad fn
    that overwrites (tensor_scatter_nd_update) instead of summing the rows differs."""
    from cglint.runtime.child import check_one, import_by_path

    source = LOOKUP.format(how=how)
    (spec, *_) = candidate_specs(source, "lookup")
    assert "dtype=int32" in spec.split("), ")[1], spec
    path = tmp_path / f"lookup_{how}.py"
    path.write_text(source)
    got = check_one(import_by_path(str(path)), source, {"function": "lookup"}, seed=0)
    assert got["verdict"] == verdict, got


def test_inputs_follow_what_the_forward_does_with_its_parameters():
    src = '''
import tensorflow as tf

@tf.custom_gradient
def head(raw):
    loc, scale = tf.unstack(raw, axis=-1)
    ...

@tf.custom_gradient
def dense(x, kernel, bias):
    return tf.matmul(x, kernel) + bias, None
'''
    # Unpacked into two names along the last axis: that axis has two entries.
    assert candidate_specs(src, "head")[0] == "normal(2, 2)"
    # Operands of a product fit it, and the parameter added to it is per unit.
    assert "normal(2, 3), normal(3, 4), normal(4)" in candidate_specs(src, "dense")[:2]


def test_complex_candidates_make_one_input_complex_at_a_time_then_all():
    from cglint.runtime.spec import complex_variants

    assert complex_variants("normal(2, 3), uniform(3, low=0.5, high=1.5)") == [
        "normal(2, 3, mean=0.0, stddev=1.0, dtype=complex64), uniform(3, low=0.5, high=1.5)",
        "normal(2, 3, mean=0.0, stddev=1.0), uniform(3, low=0.5, high=1.5, dtype=complex64)",
        "normal(2, 3, mean=0.0, stddev=1.0, dtype=complex64), uniform(3, low=0.5, high=1.5, dtype=complex64)"]
    z, = build_inputs(parse_spec("normal(4, dtype=complex64)"))
    assert z.dtype == tf.complex64 and np.all(np.imag(z.numpy()) != 0)  # both parts drawn


def test_a_contract_error_on_any_candidate_is_the_forwards_error():
    """`@custom_gradient` over `@tf.function`: every input the forward runs on breaks the
    tf.function contract; a scalar candidate fails earlier, on its shape. Still the forward's
    error, not "no inputs could be built"."""
    from cglint.gradcheck.check import no_inputs_report

    r = no_inputs_report(["TypeError: To be compatible with tf.function, Python functions must return zero or "
                          "more Tensors", "ValueError: Argument `axis` = -1 not in range [0, 0)"])
    assert (r.verdict, r.detail) == ("error", "the forward fails on every input it runs on: TypeError: To be "
                                     "compatible with tf.function, Python functions must return zero or more Tensors")


def test_inputs_are_sampled_in_the_domain_of_the_op_they_are_passed_to():
    src = '''
import tensorflow as tf

@tf.custom_gradient
def log_ratio(p, c):
    return tf.math.log(p) - tf.acos(c), None
'''
    assert candidate_specs(src, "log_ratio")[0] == "uniform(2, 3, low=0.5, high=1.5), uniform(2, 3, low=-0.9, high=0.9)"
