"""The reference check's memory budget, one code path for `cglint trace` and `--runtime`.

A check keeps its forward's tensors on a tape (and may run a second check, float64 or wide
inputs, before the first is freed), where the program, whose custom gradient may exist so that
autodiff never records a loop, keeps only its outputs. The check may add at most half the
process's peak so far plus `EXTRA_MEMORY` (the reference check costs at most 1.5x the program's
peak + 300 MB): over that, it runs on the first rows of the inputs' batch, or is skipped with
the measure. TensorFlow is imported only by the functions that need it.
"""

from __future__ import annotations

MAX_ELEMENTS = 1 << 20  # inputs larger than this (in all) are checked on a slice of their batch
EXTRA_MEMORY = 300 << 20
# A check keeps several copies of one forward's tensors at once (its tape, a float64 re-run,
# second order for an elementwise forward, the wide probe): measured at 7.5 times one forward's
# under trace and 7.3 under `--runtime` (bench/trace_memory.py, with and without --runtime), so a
# tenth of the allowance goes to one forward's tensors.
CHECK_COPIES = 10
RUNTIME_CHECK_COPIES = CHECK_COPIES


def peak_rss() -> int:
    """The process's peak resident memory so far, in bytes (0 where it cannot be read)."""
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10  # KiB on Linux
    except Exception:
        return 0


def is_tensor(x) -> bool:
    return hasattr(x, "dtype") and hasattr(x, "shape") and hasattr(getattr(x, "dtype"), "is_floating")


def elements(args) -> int:
    from tensorflow.python.util import nest

    return sum(int(x.shape.num_elements() or 0) for x in nest.flatten(list(args)) if is_tensor(x) and x.shape.rank)


def over_memory_budget(fn, args, budget: int | None, copies: int = CHECK_COPIES):
    """(fraction of the batch to check, what was measured) when one run of the forward makes
    more tensors than the check's share of the memory budget (`EXTRA_MEMORY` plus half the
    process's peak so far, or `budget` bytes), else None. A 3,000-step `while_loop` of 200,000
    elements keeps ~10 GB on the check's tape."""
    from .check import forward_footprint

    try:
        made, ops = forward_footprint(fn, *args)
    except Exception:
        return None  # the check itself says why the forward does not run
    allowed = budget if budget is not None else EXTRA_MEMORY + peak_rss() // 2
    share = allowed // copies
    if made <= share:
        return None
    return share / made, (f"one run of the forward makes {made / 2**20:,.0f} MiB of tensors in {ops:,} ops, which "
                          f"the check's tape would keep; the check's memory budget is {allowed / 2**20:,.0f} MiB")


def within_budget(args, budget: int):
    """(args, how they were sliced or None): a call whose tensor inputs hold more than `budget`
    elements in all is checked on the first rows of its batch — the leading dimension its
    largest inputs share — so a test feeding 13 million elements costs a check of a few
    thousand, not the memory of the whole autodiff reference."""
    try:
        from tensorflow.python.util import nest

        flat = nest.flatten(list(args))
        tensors = [x for x in flat if is_tensor(x) and x.shape.rank]
        total = sum(int(x.shape.num_elements() or 0) for x in tensors)
        if total <= budget or not tensors:
            return args, None
        batch = max(tensors, key=lambda x: x.shape.num_elements() or 0).shape[0]
        if not batch or batch <= 2:
            return args, None
        rows = max(2, min(batch - 1, budget * batch // max(total, 1)))
        out = [x[:rows] if is_tensor(x) and x.shape.rank and x.shape[0] == batch and hasattr(x, "__getitem__")
               and not hasattr(x, "assign") else x for x in flat]
        return nest.pack_sequence_as(list(args), out), f"on the first {rows} of {batch} rows"
    except Exception:
        return args, None


def fit_memory(fn, args, budget: int | None, copies: int = CHECK_COPIES):
    """(args, how they were sliced or None, None) for a check within the memory budget, or
    (args, None, why it is skipped) when its forward is over it and its inputs have no batch to
    check a slice of. `fn` is the custom-gradient function, run once without a tape to measure."""
    over = over_memory_budget(fn, args, budget, copies)
    if over is None:
        return args, None, None
    fraction, measure = over
    smaller, how = within_budget(args, int(elements(args) * fraction))
    if how is None:
        return args, None, f"over the memory budget: {measure}, and its inputs have no batch to check a slice of"
    return smaller, f"{how} ({measure})", None
