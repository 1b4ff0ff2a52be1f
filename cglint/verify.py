"""`cglint --fix --verify`: unsafe fixes kept only where the fixed function matches autodiff.

An unsafe fix is an assumption about the author's intent (which gradient belongs to which
variable, which helper is the derivative). With `--verify` every function an unsafe fix changes
is checked numerically after the fix, as `--runtime=all` checks it (a child process imports the
fixed module, written next to the original so its imports resolve, and compares the custom
gradient with TensorFlow's autodiff on the module's own inputs); the file is then written with
the unsafe fixes of the functions that match, and without those of the functions that do not
(or could not be checked). Safe fixes are applied as `--fix` applies them.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field

from cglint.diagnostics import UNSAFE


@dataclass
class Verdict:
    function: str
    line: int  # the function's first line in the original source
    verdict: str
    detail: str

    @property
    def kept(self) -> bool:
        return self.verdict in ("match", "intentional")


@dataclass
class Verified:
    outcome: object  # fix.FixResult, as written
    verdicts: list[Verdict] = field(default_factory=list)


def _unsafe_functions(result) -> dict[str, int]:
    """Functions (by the runtime's name) holding a finding with an unsafe fix, and their lines."""
    from cglint.runtime.plan import plan_file

    out = {}
    for planned in plan_file(result, everything=True):
        if any(d.fix is not None and d.fix.applicability == UNSAFE for d in planned.diagnostics):
            out[planned.request["function"]] = planned.line
    return out


def fix_and_verify(path: str, rules, exempt=None, timeout: float = 120.0, write: bool = True,
                   root: str | None = None) -> Verified:
    from cglint import engine, fix
    from cglint.runtime.plan import plan_file
    from cglint.runtime.runner import run_module_checks

    rules = list(rules)
    trial = fix.fix_file(path, rules, unsafe=True, write=False, exempt=exempt, root=root)
    original = engine.lint_source(trial.source, path, rules)
    touched = _unsafe_functions(original)
    if not touched or not trial.changed:
        return Verified(fix.fix_file(path, rules, unsafe=False, write=write, exempt=exempt, root=root))
    from cglint import files

    directory = os.path.dirname(os.path.abspath(path))
    if root is not None and files.escapes(directory, root):
        return Verified(fix.fix_file(path, rules, unsafe=False, write=write, exempt=exempt, root=root))
    # The probe is a new file of our own (O_EXCL: never through an existing name or link), named
    # so the child can import it, and registered before it exists so a signal removes it.
    probe = os.path.join(directory, f"_cglint_verify_{secrets.token_hex(6)}.py")
    with files.pending(probe):
        handle = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(trial.new_source)
        fixed = engine.lint_source(trial.new_source, probe, rules)
        planned = [p for p in plan_file(fixed, everything=True) if p.request["function"] in touched]
        reachable = [p for p in planned if p.skip is None]
        results = run_module_checks(probe, [p.request for p in reachable], timeout=timeout) if reachable else []
    by_name = {p.request["function"]: r for p, r in zip(reachable, results)}
    verdicts = []
    for name, line in touched.items():
        r = by_name.get(name)
        if r is None:
            skip = next((p.skip for p in planned if p.request["function"] == name), None)
            verdicts.append(Verdict(name, line, "skipped", skip or "the fixed function could not be found"))
        else:
            verdicts.append(Verdict(name, line, r["verdict"], r.get("detail") or ""))
    refused = {v.function for v in verdicts if not v.kept}

    def leave_alone(result) -> set[int]:
        kept = set(exempt(result)) if exempt is not None else set()
        if refused:
            for p in plan_file(result, everything=True):
                if p.request["function"] in refused:
                    kept |= {id(d) for d in p.diagnostics if d.fix is not None and d.fix.applicability == UNSAFE}
        return kept

    return Verified(fix.fix_file(path, rules, unsafe=True, write=write, exempt=leave_alone, root=root), verdicts)
