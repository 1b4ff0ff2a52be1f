"""What a parameter's name says of its domain: a clipping norm or a temperature is probed with
positive values, a per-feature weight as a vector. Shared by the runtime's input planning and the
static value rules, so that both judge a formula on the same domain."""

from __future__ import annotations

# Parameters whose values must be positive: a negative clipping norm or temperature gives NaN or
# nonsense, which would then be reported as the custom gradient's fault.
POSITIVE_NAMES = {"norm", "scale", "eps", "epsilon", "temperature", "temp", "sigma", "std",
                  "stddev", "limit", "clip", "threshold", "tau", "alpha", "beta", "gamma",
                  "concentration", "variance", "precision", "kappa"}
# Parameters that are typically per-feature weights: probed as (k,) against an (n, k) batch,
# where a grad fn that collapses or over-reduces their gradient shows (tensorflow#127690).
PER_FEATURE_NAMES = {"beta", "gamma", "alpha", "scale", "bias", "gain", "shift", "offset",
                     "slope", "weight"}
# Of the positive ones, those that are almost always scalars (a clipping norm, an epsilon).
SCALAR_NAMES = {"norm", "eps", "epsilon", "temperature", "temp", "limit", "clip", "threshold",
                "tau"}
POSITIVE_LOW, POSITIVE_HIGH = 0.5, 1.5


def name_parts(name: str) -> set[str]:
    return {p for p in name.lower().split("_") if p}


def positive_domain(name: str) -> bool:
    """`clip_norm`, `temperature`, `eps`, `sigma`...: probed with positive values."""
    return bool(name_parts(name) & POSITIVE_NAMES) and not name.lower().startswith("log")


def scalar_name(name: str) -> bool:
    return bool(name_parts(name) & SCALAR_NAMES)
