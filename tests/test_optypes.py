"""The shipped op-type list and the closest-name lookup the static rule and `--runtime` share."""

from cglint.gradcheck.optypes import closest_op_type, is_op_type, op_types


def test_the_list_is_shipped_and_holds_the_op_types_keys_name():
    assert len(op_types()) > 1000
    assert all(is_op_type(n) for n in ("MatMul", "Sign", "Round", "Identity", "Relu", "Conv2D", "Cast"))
    assert not any(is_op_type(n) for n in ("Matmul", "sign", "round", "relu"))


def test_the_closest_op_type_prefers_the_same_name_in_other_capitals():
    assert closest_op_type("Matmul") == "MatMul"
    assert closest_op_type("sign") == "Sign"
    assert closest_op_type("conv2d") == "Conv2D"
    assert closest_op_type("Identiy") == "Identity"
