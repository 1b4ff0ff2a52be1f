"""`cglint -` (`--stdin-filename`): lint or fix an editor's buffer."""

from __future__ import annotations

import sys

from cglint.commands.check import report
from cglint.commands.common import EXIT_CLEAN, EXIT_FINDINGS, fail, warn, with_unused_noqa
from cglint.commands.fix import diff, list_fixes, recorded_by_baseline


def _echo(data: bytes) -> None:
    """Bytes to stdout as they are (an in-process caller's text stdout gets them decoded)."""
    sys.stdout.flush()
    if hasattr(sys.stdout, "buffer"):
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        sys.stdout.write(data.decode("utf-8", "surrogateescape"))


def _read_stdin(limit: int) -> bytes:
    """At most `limit` + 1 bytes of stdin (more says "over the limit"; the rest is not read)."""
    stream = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else None
    if stream is None:  # an in-process caller's text stdin
        return sys.stdin.read(limit + 1).encode("utf-8", "surrogateescape")[: limit + 1]
    chunks, total = [], 0
    while total <= limit:
        chunk = stream.read(min(1 << 20, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _echo_rest() -> None:
    """--fix over a buffer too large to lint: the rest of stdin to stdout, as it comes."""
    stream = getattr(sys.stdin, "buffer", None)
    while stream is not None:
        chunk = stream.read(1 << 20)
        if not chunk:
            break
        _echo(chunk)


def rules_for_stdin(args, settings, name: str):
    return with_unused_noqa(settings.codes_for(name) if args.stdin_filename else settings.codes, args)


class _Unfixed(Exception):
    """The buffer's fixes are not applied (said on stderr); the buffer is echoed as it came."""


def run(args, settings) -> int:
    """`cglint - --stdin-filename ops.py`: lint (or, with --fix, fix) an editor buffer. Fixed
    source goes to stdout, the report to stderr, as ruff does."""
    from cglint import engine, files, fix, notebook, source as pysource
    from cglint.report import Context, render

    # Decoded as files are (BOM, coding cookie, strict UTF-8), and written back the same way:
    # an editor replaces its buffer with what --fix prints.
    raw = _read_stdin(files.MAX_FILE_BYTES)
    name = args.stdin_filename or "<stdin>"
    if len(raw) > files.MAX_FILE_BYTES:  # as for a file: reported, never parsed; --fix gives it back
        result = engine.unreadable(name, rules_for_stdin(args, settings, name),
                                   f"more than {files.MAX_FILE_BYTES // 2**20} MB, cglint's limit for one file")
        if not (args.fix or args.diff):
            return report(args, settings, [result], 0)
        if args.fix:
            _echo(raw)
            _echo_rest()
        sys.stderr.write(render(args.output_format, [result], Context(unsafe_fixes=args.unsafe_fixes)))
        return EXIT_FINDINGS if result.diagnostics and not args.exit_zero else EXIT_CLEAN
    if args.stdin_filename and settings.force_exclude and settings.is_excluded(name, False, True):
        if args.fix:
            _echo(raw)
        return EXIT_CLEAN
    rules = with_unused_noqa(settings.codes_for(name) if args.stdin_filename else settings.codes, args)
    nb = notebook.is_notebook(name)  # the buffer is a notebook's JSON
    if nb:
        from cglint.rules import rules as rule_classes

        rules = rule_classes(rules)
    try:
        decoded = pysource.decode(raw)
    except pysource.UndecodableError as exc:  # nothing cglint can fix: the buffer as it came
        result = engine.unreadable(name, rules, str(exc))
        if not (args.fix or args.diff):
            return report(args, settings, [result], 0)
        if args.fix:
            _echo(raw)
            sys.stderr.write(render(args.output_format, [result], Context(unsafe_fixes=args.unsafe_fixes)))
        return EXIT_FINDINGS if result.diagnostics and not args.exit_zero else EXIT_CLEAN
    source = decoded.text
    try:
        if args.fix or args.diff:
            exempt = recorded_by_baseline(args, settings)
            if isinstance(exempt, int):
                return exempt
            fixer = fix.fix_notebook_text if nb else fix.fix_source
            outcome = fixer(source, name, rules, unsafe=args.unsafe_fixes, exempt=exempt)
            if args.show_fixes:
                list_fixes([(name, [(a.code, a.name) for a in outcome.applied])], would=args.diff, to_stdout=False)
            if args.diff:
                sys.stdout.write(diff(name, source, outcome.new_source) if outcome.changed else "")
                return EXIT_FINDINGS if outcome.changed and not args.exit_zero else EXIT_CLEAN
            out, result, fixed = raw, outcome.result, len(outcome.applied)
            if outcome.changed:
                try:
                    if not pysource.round_trips(raw, decoded):
                        warn(f"{name}: {fix.cannot_round_trip(decoded.encoding)}")
                        raise _Unfixed
                    out = pysource.encode(outcome.new_source, decoded)
                except UnicodeEncodeError:
                    warn(f"{name}: the fixed text does not fit the buffer's {decoded.encoding} encoding; not fixed")
                    result, fixed = (engine.lint_notebook_text if nb else engine.lint_source)(source, name, rules), 0
                except _Unfixed:
                    result, fixed = (engine.lint_notebook_text if nb else engine.lint_source)(source, name, rules), 0
            _echo(out)
            sys.stderr.write(render(args.output_format, [result], Context(fixed=fixed, unsafe_fixes=args.unsafe_fixes)))
            return EXIT_FINDINGS if result.diagnostics and not args.exit_zero else EXIT_CLEAN
        result = engine.lint_notebook_text(source, name, rules) if nb else engine.lint_source(source, name, rules)
    except engine.InternalError as exc:
        return fail(f"{name}: {exc}" if isinstance(exc, engine.OutOfMemory) else f"internal error, please report: {exc}")
    for warning in result.warnings:
        warn(f"{name}:{warning}" if warning[:1].isdigit() else f"{name}: {warning}")
    return report(args, settings, [result], 0)
