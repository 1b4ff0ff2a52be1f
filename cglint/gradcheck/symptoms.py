"""Which runtime verdicts confirm which static findings. A function's check can fail for a reason
other than a given finding (a wrong derivative in a function that also hard-codes its variable
order): the verdict is attached to a finding only when it shows that finding's own symptom, so
"confirmed" never means "confirmed by a different error"."""

from __future__ import annotations

import re

_DTYPE = re.compile(r"\bis (b?float|half|double|complex)\w* but\b")
_UNDER_TF_FUNCTION = re.compile(r"tf\.function|model\.fit")

# What each rule's bug looks like when the function runs (see each rule's "Why is this bad?").
_VALUE = {"CG005", "CG009", "CG014"}  # a wrong gradient value
_STRUCTURE = {"CG002", "CG003", "CG004", "CG007", "CG008"}  # TensorFlow raises
_GRAPH = {"CG001", "CG011", "CG012", "CG015"}  # fails or differs under tf.function


def shows(code: str, verdict: dict) -> bool:
    """True if a failing `verdict` (mismatch or error) shows the symptom of rule `code`; verdicts
    that fail nothing (match, intentional, skipped) are attached as they are."""
    kind = verdict.get("verdict")
    if kind not in ("mismatch", "error"):
        return True
    detail = verdict.get("detail") or ""
    modes = verdict.get("modes") or {}
    if code in _VALUE:
        return kind == "mismatch" and "order of variables" not in detail and not _DTYPE.search(detail)
    if code in _STRUCTURE:
        return kind == "error"
    if code in _GRAPH:
        return modes.get("tf.function") in ("error", "mismatch") or bool(_UNDER_TF_FUNCTION.search(detail)) \
            or kind == "error"
    if code == "CG006":
        return "order of variables" in detail or "swapped" in detail
    if code == "CG016":
        return bool(_DTYPE.search(detail)) or (kind == "error" and "tensor but is a" in detail)
    return True


_SUMMARY = ("verdict", "reference", "max_rel_error", "detail")


def for_finding(code: str, verdict: dict) -> dict | None:
    """The runtime summary a finding of rule `code` gets from its function's `verdict`: the
    verdict itself when it shows the finding's symptom; for a value finding (CG005, CG009, ...)
    in a function whose verdict a hard-coded variable order decided, the values' own verdict
    (`claims`), so each finding is confirmed or not on its own claim; else None."""
    values = (verdict.get("claims") or {}).get("values")
    if code in _VALUE and values and "order of variables" in (verdict.get("detail") or ""):
        return {k: values.get(k) for k in _SUMMARY}
    if shows(code, verdict):
        return {k: verdict.get(k) for k in _SUMMARY}
    return None
