"""Result objects of a numeric gradient check (plain data; no TensorFlow here)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

VERDICTS = ("match", "mismatch", "intentional", "error", "skipped")
REFERENCES = ("autodiff", "float64-autodiff", "finite-differences")
# What a runtime verdict says of the static finding it checked.
VERDICT_WORDS = {
    "mismatch": "confirmed",
    "error": "confirmed",
    "match": "not confirmed",
    "intentional": "intentional",
    "skipped": "not checked",
}
FAILING = frozenset({"mismatch", "error"})  # a run with one of these exits 1
_VAR_OPEN = "<tf.Variable '"


def _variables_by_name(text: str) -> str:
    """Each `<tf.Variable 'name' ... >` (its repr, up to the first `>` after the name) as
    `'name'`. String search, one pass: a regex's lazy `.*?>` rescanned the rest of a long text
    from every `<tf.Variable` in it."""
    out, i = [], 0
    while True:
        start = text.find(_VAR_OPEN, i)
        if start < 0:
            break
        quote = text.find("'", start + len(_VAR_OPEN))
        end = text.find(">", quote + 1) if quote >= 0 else -1
        if end < 0:  # no later `<tf.Variable` can close either
            break
        out += [text[i:start], repr(text[start + len(_VAR_OPEN):quote])]
        i = end + 1
    out.append(text[i:])
    return "".join(out)


def exception_text(exc: BaseException) -> str:
    """An exception's text as reports show it: a tf.Variable by its name (its repr carries a
    multi-line array), without object addresses (they change from run to run)."""
    text = _variables_by_name(str(exc))
    return re.sub(r" at 0x[0-9a-f]+>", ">", text)


def first_line(exc: BaseException, limit: int = 240) -> str:
    """The exception as one line, `Type: first line of its message`, at most `limit` characters."""
    text = exception_text(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    if text == "in user code:" and len(lines) > 1:
        # tf.function's tracing error: frames, then the original `Type: message` last.
        text = lines[-1]
    msg = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


def _finite_or_none(x: float | None) -> float | None:
    # JSON has no inf/nan; an unbounded error is reported as null and explained in `detail`.
    if x is None or not math.isfinite(x):
        return None
    return float(f"{x:.3g}")


@dataclass
class ArgResult:
    """How the custom gradient of one input or one variable compared with the reference."""

    name: str
    kind: str  # "input" or "variable"
    shape: tuple
    dtype: str
    verdict: str = "match"
    reference: str | None = "autodiff"
    max_rel_error: float | None = None
    detail: str = ""

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "verdict": self.verdict,
            "reference": self.reference,
            "max_rel_error": _finite_or_none(self.max_rel_error),
            "detail": self.detail,
        }


@dataclass
class GradientReport:
    """The verdict for one custom-gradient function, in the shape of the JSON `runtime` object."""

    verdict: str
    detail: str
    reference: str | None = None
    max_rel_error: float | None = None
    seed: int = 0
    args: list[ArgResult] = field(default_factory=list)
    function: str = ""
    # Verdict per way of differentiating that was checked: "eager", "tf.function", and when
    # they ran "forward" (JVP) and "second-order". Empty when nothing ran.
    modes: dict = field(default_factory=dict)
    # For a mismatch: the custom gradient and autodiff along a line through the checked input
    # (`check.line_sample`), the data of the HTML report's plots. None otherwise.
    sample: dict | None = None
    # A finding's own claim where a problem of the whole function decides `verdict`: "values",
    # the gradients compared apart from a hard-coded variable order (see `symptoms.for_finding`).
    claims: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"unknown verdict {self.verdict!r}")

    @property
    def ok(self) -> bool:
        return self.verdict == "match"

    def to_dict(self) -> dict:
        return {
            "verdict": self.verdict,
            "reference": self.reference,
            "max_rel_error": _finite_or_none(self.max_rel_error),
            "detail": self.detail,
            "seed": self.seed,
            "args": [a.to_dict() for a in self.args],
            **({"modes": dict(self.modes)} if self.modes else {}),
            **({"sample": self.sample} if self.sample else {}),
            **({"claims": {k: {**v, "max_rel_error": _finite_or_none(v.get("max_rel_error"))}
                           for k, v in self.claims.items()}} if self.claims else {}),
        }

    @classmethod
    def skipped(cls, detail: str, seed: int = 0, function: str = "") -> "GradientReport":
        """The one way to say a function was not checked, and why."""
        return cls(verdict="skipped", detail=detail, seed=seed, function=function)

    def __str__(self) -> str:
        name = f"{self.function}: " if self.function else ""
        return f"{name}{self.verdict} ({self.detail})"


# What would check a function the runtime (`--runtime`) or a traced run (`cglint trace`,
# `pytest --cglint`) skipped: appended to every `skipped` detail, with the command.
TRACE_IT = "`cglint trace -- pytest tests/` (or `pytest --cglint`) checks it where your code calls it"
EXAMPLE_IT = "a `# cglint: example x=normal(2, 3)` comment above its def gives `cglint --runtime` its inputs"


def trace_it(path: str = "") -> str:
    """TRACE_IT, or for a notebook the command that runs it under the trace (docs/notebooks.md)."""
    if path.endswith(".ipynb"):
        return (f"`cglint trace -- jupyter nbconvert --to notebook --execute {path}` checks it where the "
                "notebook calls it")
    return TRACE_IT


def next_step(detail: str, via: str, path: str = "") -> str:
    """`detail` and the way forward: what checks a function this `via` ("runtime": the static
    plan's child process; "trace": a traced command or pytest session) could not check."""
    text = detail or "not checked"
    if path.endswith(".ipynb"):  # a notebook runs under the trace through nbconvert, not pytest
        text = re.sub(r"`cglint trace -- pytest[^`]*`(?: \(or `pytest --cglint`\))?",
                      trace_it(path).split(" checks it")[0], text)
    if "to check it:" in text or "pytest --cglint" in text or "nbconvert" in text:  # already says so
        return text
    low = text.lower()
    if via == "trace":
        static = f"`cglint --runtime=all {path or 'FILE'}`"
        if "creates a tf.variable" in low:
            hint = "create the variable once outside the forward (CG011), then run the command again"
        elif "the check itself failed" in low:
            hint = f"{static} checks it apart from the command (please report this)"
        else:
            hint = ("call it eagerly once in the command (an eager call is checked with its real inputs), or "
                    + EXAMPLE_IT.replace("`cglint --runtime`", static))
        return f"{text}; to check it: {hint}"
    traced = trace_it(path)
    if "not reachable by import" in low or "no module-level name" in low:
        hint = traced
    elif "out of memory" in low and "set outside cglint" in low:  # not cglint's own limit to raise
        hint = f"raise the limit set outside cglint (ulimit, prlimit, the container's), or {traced}"
    elif "out of memory" in low:
        hint = f"raise `memory-limit` in [tool.cglint.runtime], or {traced}"
    elif "timed out" in low:
        hint = f"a larger `--runtime-timeout`, or {traced}"
    elif "import failed" in low or "sys.exit" in low or "could not start" in low:
        hint = f"make the module importable without side effects, or {traced}"
    else:  # no inputs could be built, inconclusive, nothing to differentiate, ...
        hint = f"{EXAMPLE_IT}, or {traced}"
    return f"{text}; to check it: {hint}"


def describe(summary: dict) -> str:
    """`confirmed: d/dx off by 110% vs autodiff`, `not confirmed: matches autodiff to 3e-7`."""
    return f"{VERDICT_WORDS.get(summary['verdict'], summary['verdict'])}: {summary.get('detail') or summary['verdict']}"


# `cglint --explain runtime`: what a runtime verdict and its "off by N%" mean (docs/runtime.md).
EXPLAIN = """# Runtime verdicts (`--runtime`, `cglint trace`)

Each custom gradient checked gets one verdict: match, mismatch, intentional, error or skipped.
The check compares the grad fn's vector-Jacobian product c with the reference's a (TensorFlow
autodiff of the undecorated forward; float64 autodiff or finite differences where the verdict
names them), for the same seeded random upstream gradients, at the same inputs.

## "off by N%"

For each input and each variable: ||c - a|| / ||a||, the largest over the upstream probes. It is
stored to 3 significant digits (JSON's `max_rel_error`) and every view (text, concise, JSON,
SARIF, the language server, the HTML report) prints that stored number, so the same function
never reads 11% in one view and 12% in another. A function's number is the largest of its
mismatching arguments'. Another number for the same function is another measurement, and says
which: `vs float64 autodiff`, `vs finite differences`, `under tf.function`, `in float64`,
`second derivative`, `JVP`.

## A verdict per finding

A finding is `confirmed` only by its own symptom: a wrong value (CG005, CG009, CG014) by a
gradient that differs from the reference, a hard-coded order (CG006) by the grad fn ignoring the
order of `variables`, a structural finding by TensorFlow's error, a graph-mode one by what
fails under tf.function. When one bug decides the function's verdict and hides another (a
hard-coded variable order in a function whose derivative is also wrong), the gradients are
compared again apart from it (each variable's gradient paired with its variable by shape, else
the inputs alone), and a value finding gets that verdict: `confirmed: d/x off by 55% vs autodiff
(apart from the variable order: ...)` or `not confirmed: matches autodiff ...`.

## The HTML report

`--output-format html --output-file report.html`: a row per function (verdict, reference,
the error per input and variable, modes, dtypes, inputs, seed), the findings with their
verdicts, and for each mismatch a plot of the custom gradient and autodiff along a line through
the checked input, and of the error per element (needs matplotlib: the `report` extra).
"""
