"""The address-space limit set outside cglint, read without loading anything heavy.

The CLI asks before numpy or libcst load (below the limit they abort the process, not raise),
and the engine names the limit when a lint runs out of memory.
"""

from __future__ import annotations

# Below this address-space limit (`ulimit -v`, `prlimit --as`) cglint's libraries do not load
# (OpenBLAS aborts the process while numpy loads, libcst's parser aborts on a failed allocation):
# one error naming the limit instead.
MIN_ADDRESS_SPACE_MIB = 256


def address_space_limit() -> int | None:
    """The address-space limit (RLIMIT_AS: `ulimit -v`, `prlimit --as`) in MiB, or None."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY else soft >> 20


def under_limit() -> str:
    """" under the address-space limit of N MiB set outside cglint", or "" without a limit."""
    limit = address_space_limit()
    return f" under the address-space limit of {limit} MiB set outside cglint" if limit is not None else ""
