"""A check's memory, not only its time: an iterative forward whose custom gradient exists so that
autodiff never records the loop makes one step's tensors per iteration on the check's tape."""

import tensorflow as tf

from cglint.gradcheck.check import forward_footprint
from cglint.trace.instrument import Tracer


@tf.custom_gradient
def fixed_point_sqrt(x):
    """Heron's iteration for sqrt(x): the loop runs op by op eagerly, and the implicit gradient
    1 / (2 sqrt(x)) needs none of its steps."""

    def body(i, y):
        return i + 1, 0.5 * (y + x / y)

    _, y = tf.while_loop(lambda i, y: i < 20, body, (tf.constant(0), tf.ones_like(x)))

    def grad(dy):
        return dy / (2.0 * y)

    return y, grad


def test_an_iterative_forward_over_the_memory_budget_is_checked_on_a_slice_of_its_batch():
    x = tf.random.uniform([2000], 0.5, 2.0, seed=1)
    made, ops = forward_footprint(fixed_point_sqrt, x)
    assert made >= 20 * 2000 * 4 and ops >= 20  # every iteration's tensors, none freed by a tape
    budget = made // 4
    report = Tracer(1, {"memory_budget": budget}).check(fixed_point_sqrt, (x,), {}, False)
    assert report["verdict"] == "match", report
    rows = int(2000 * (budget // 10) / made)  # the budget's tenth, in rows
    assert report["sliced"].startswith(f"on the first {rows} of 2000 rows (one run of the forward makes "), report
    assert "MiB of tensors in" in report["sliced"] and "which the check's tape would keep" in report["sliced"]
    # Within budget: the whole input, no slice.
    assert "sliced" not in Tracer(1, {"memory_budget": 20 * made}).check(fixed_point_sqrt, (x,), {}, False)


def test_a_forward_over_the_memory_budget_without_a_batch_is_skipped_with_the_measure():
    x = tf.fill([2], 1.5)  # two rows: nothing smaller to check
    report = Tracer(1, {"memory_budget": 1 << 10}).check(fixed_point_sqrt, (x,), {}, False)
    assert report["verdict"] == "skipped"
    assert report["detail"].startswith("over the memory budget: one run of the forward makes 0 MiB of tensors in "), report
    assert report["detail"].endswith("and its inputs have no batch to check a slice of"), report


HERON = '''
import tensorflow as tf


@tf.custom_gradient
def fixed_point_sqrt(x):
    def body(i, y):
        return i + 1, 0.5 * (y + x / y)

    _, y = tf.while_loop(lambda i, y: i < 20, body, (tf.constant(0), tf.ones_like(x)))

    def grad(dy):
        return dy / (2.0 * y)

    return y, grad
'''


def test_runtime_uses_the_same_memory_budget(tmp_path):
    """`--runtime`'s check of a module's function: over the budget, a slice of the batch (named
    in the detail) or `skipped` with the measure, by the same code as trace."""
    from cglint.runtime.child import check_one, import_by_path

    path = tmp_path / "heron.py"
    path.write_text(HERON)
    module = import_by_path(str(path))
    made, _ = forward_footprint(module.fixed_point_sqrt, tf.ones([2000]))
    request = {"function": "fixed_point_sqrt", "inputs": "uniform(2000, low=0.5, high=2.0)", "memory_budget": made // 4}
    got = check_one(module, HERON, request, seed=0)
    assert got["verdict"] == "match", got
    rows = int(2000 * (made // 4 // 10) / made)  # a tenth of the budget per forward
    assert f"(checked on the first {rows} of 2000 rows (one run of the forward makes " in got["detail"], got
    # Within budget: no slice.
    got = check_one(module, HERON, {**request, "memory_budget": 20 * made}, seed=0)
    assert got["verdict"] == "match" and "checked on the first" not in got["detail"], got
    # No batch to slice: skipped with the measure.
    got = check_one(module, HERON, {**request, "inputs": "uniform(2, low=0.5, high=2.0)", "memory_budget": 1 << 10},
                    seed=0)
    assert got["verdict"] == "skipped", got
    assert got["detail"].startswith("over the memory budget: one run of the forward makes 0 MiB of tensors in "), got
