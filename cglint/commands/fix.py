"""`cglint fix` (`--fix`, `--diff`): the fixes of one file, its diff, and the list of fixes."""

from __future__ import annotations

import os
import sys

from cglint.commands.common import fail, note, warn


def unsafe_hint(results, args) -> str:
    """` (N fixes available with `--unsafe-fixes`)` when only unsafe fixes are left."""
    if args.unsafe_fixes:
        return ""
    hidden = sum(1 for r in results for d in r.diagnostics if d.is_fixable(True) and not d.is_fixable(False))
    return f" ({hidden} fix{'es' if hidden != 1 else ''} available with `--unsafe-fixes`)" if hidden else ""


def list_fixes(shown, would: bool, to_stdout: bool) -> bool:
    """Print --show-fixes's list; whether there was anything to list."""
    from cglint.report import show_fixes

    text = show_fixes.render(shown, would=would)
    (sys.stdout if to_stdout else sys.stderr).write(text)
    return bool(text)


def write_root(path: str, paths: list[str], settings) -> str:
    """What a write to `path` must stay inside: the directory named on the command line that
    it was found in, else the project root (symbolic links in the tree never lead out of it)."""
    from cglint import files

    for named in paths:
        if os.path.isdir(named) and files.inside(os.path.abspath(path), os.path.abspath(named)):
            return named
    return str(settings.root)


def recorded_by_baseline(args, settings):
    """With --fix/--diff and a baseline: what `fix_source` must leave alone (the findings the
    report will hide are not rewritten either); an exit status if the baseline is unreadable."""
    where = None if args.no_baseline or args.write_baseline else (args.baseline or settings.baseline)
    if where is None:
        return None
    from cglint.baseline import Baseline, BaselineError

    try:
        return Baseline.load(where).recorded
    except BaselineError as exc:
        return fail(str(exc))


def fix_one(path: str, rules, args, exempt=None, root: str | None = None):
    from cglint import fix

    if args.verify and not path.endswith(".ipynb"):
        from cglint import verify

        checked = verify.fix_and_verify(path, rules, exempt, timeout=args.runtime_timeout or 120.0,
                                        write=not args.diff, root=root)
        for v in checked.verdicts:
            if v.kept:
                note(args, f"{path}:{v.line}: {v.function}: unsafe fixes verified against autodiff ({v.verdict}: {v.detail})")
            else:
                warn(f"{path}:{v.line}: {v.function}: unsafe fixes not applied: the fixed function is "
                      f"{v.verdict} against autodiff ({v.detail})")
        outcome = checked.outcome
    else:
        outcome = fix.fix_file(path, rules, unsafe=args.unsafe_fixes, write=not args.diff, exempt=exempt,
                               root=root)
    for dropped in outcome.dropped:
        warn(f"{path}:{dropped.line}: {dropped.code} fix not applied: {dropped.reason}")  # `cell 3:4` in a notebook
    if not outcome.converged:
        warn(f"{path}: fixes did not settle after {fix.MAX_ROUNDS} rounds; run --fix again and report this")
    return outcome


def diff(path: str, old: str, new: str) -> str:
    if path.endswith(".ipynb"):  # the changed cells, not the notebook's JSON
        from cglint import notebook

        return notebook.diff(path, old, new)
    import difflib

    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=f"a/{path}", tofile=f"b/{path}")
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    return text
