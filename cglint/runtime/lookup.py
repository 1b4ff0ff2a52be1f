"""Reaching a function of the imported module by its qualified name (the runtime child and the
RegisterGradient/Defun checks both need it; neither imports the other)."""

from __future__ import annotations

import inspect


def lookup(module, qualname: str):
    """Returns (callable, None) or (None, reason it cannot be reached by import)."""
    if "<locals>" in qualname:
        return None, "not reachable by import: defined inside a function"
    parts = qualname.split(".")
    obj = module
    for i, part in enumerate(parts):
        if inspect.isclass(obj):
            raw = inspect.getattr_static(obj, part, None)
            if raw is None:
                return None, f"not reachable by import: {qualname} not found"
            if isinstance(raw, (staticmethod, classmethod)) or inspect.isclass(raw):
                obj = getattr(obj, part)
                continue
            if i == len(parts) - 1:
                return None, f"needs an instance of {'.'.join(parts[:i])} (a method)"
            obj = getattr(obj, part)
            continue
        if not hasattr(obj, part):
            return None, f"not reachable by import: {qualname} not found in the module"
        obj = getattr(obj, part)
    if not callable(obj):
        return None, f"not reachable by import: {qualname} is not callable"
    return obj, None
