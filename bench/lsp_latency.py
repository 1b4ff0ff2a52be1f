"""How long after an edit does the editor show cglint's diagnostics?

Generates a 2,000-line module with 20 custom-gradient functions (in a temporary directory,
outside the repository), opens it in `cglint lsp` through pygls's LanguageClient over stdio,
and times many single-character edits: `didChange` sent -> diagnostics for that version
received. Side by side, in the same run:

  cglint lsp, push      didChange -> publishDiagnostics (the server's debounce: 0 by default)
  cglint lsp, pull      didChange, then textDocument/diagnostic -> response (no debounce)
  ruff server, push     the same edits through another Python linter's language server,
                        if `ruff` is installed (it checks other things; a latency reference)
  engine, in process    cglint.engine.lint_source on the edited text, and the server's
                        incremental analysis of it
  cglint CLI            `cglint FILE`, a new process per run
  flake8 --select CG    `flake8 --select CG FILE` with the cglint plugin, a new process per run

Usage: python bench/lsp_latency.py [--edits 40] [--runs 10]
Edits are of two kinds (a digit at the end of the module, a digit inside one of the sites' grad
fns); each server gets both in push and in pull mode; every fourth site edit is followed by a
quick fix as Neovim asks for one (code actions for the line, then codeAction/resolve), and in
pull mode by a pull while that fix resolves.
Prints a table (median, p90, n; milliseconds). The machine may be shared: compare rows of one
run, not numbers across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient
from pygls.protocol import LanguageServerProtocol

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

OP = '''

@tf.custom_gradient
def op_{i}(x):
    """Custom gradient {i}: tan of an affine map, derivative taken at the output (CG005)."""
    z = x * scale_{i} + shift_{i}
    y = tf.math.tan(z)

    def grad(dy):
        slope = 1.0 / tf.square(tf.math.cos(y))
        return dy * slope * scale_{i}

    return y, grad


scale_{i} = tf.constant({i}.5)
shift_{i} = tf.constant(0.{i})
'''

FILLER = '''

def helper_{i}(values, weight=1.0):
    """Plain code: loops, branches, comprehensions, as in a real training module."""
    total = 0.0
    for index, value in enumerate(values):
        if index % 2 == 0:
            total += value * weight
        else:
            total -= value / (weight + 1.0)
    squares = [v * v for v in values if v > 0]
    return total + sum(squares) / max(len(squares), 1)


class Block{i}(tf.keras.layers.Layer):
    def __init__(self, units={i}):
        super().__init__()
        self.units = units

    def call(self, inputs):
        return tf.nn.relu(inputs) * self.units + helper_{i}([1.0, 2.0, 3.0])
'''


def generate(lines: int = 2000, sites: int = 20) -> str:
    parts = ['"""Generated benchmark module."""\nimport tensorflow as tf\n']
    parts += [OP.format(i=i) for i in range(sites)]
    i = 0
    while sum(p.count("\n") for p in parts) < lines - 2:
        parts.append(FILLER.format(i=i))
        i += 1
    text = "".join(parts)
    text = "\n".join(text.splitlines()[: lines - 1]) + "\nEDIT_MARK = 0\n"
    return text


def edit_at(text: str, n: int, where: str = "end") -> tuple[str, lsp.Range, str]:
    """A one-character edit: `end` changes the digit of the module's last line (away from the
    sites); `site` changes a digit in the grad fn of site n % 20 (`slope = 1.0` -> `slope = 2.0`),
    so the statement that holds a finding is parsed again."""
    lines = text.split("\n")
    if where == "end":
        line, col = text.count("\n") - 1, len("EDIT_MARK = ")
    else:
        hits = [i for i, l in enumerate(lines) if l.startswith("        slope = ")]
        line, col = hits[n % len(hits)], len("        slope = ")
    new = str(n % 9 + 1)
    old_line = lines[line]
    lines[line] = old_line[:col] + new + old_line[col + 1:]
    return "\n".join(lines), lsp.Range(lsp.Position(line, col), lsp.Position(line, col + 1)), new


def capabilities(pull: bool) -> lsp.ClientCapabilities:
    text = lsp.TextDocumentClientCapabilities(
        synchronization=lsp.TextDocumentSyncClientCapabilities(did_save=True),
        publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities(version_support=True),
        diagnostic=lsp.DiagnosticClientCapabilities() if pull else None,
        code_action=lsp.CodeActionClientCapabilities(
            code_action_literal_support=lsp.ClientCodeActionLiteralOptions(
                lsp.ClientCodeActionKindOptions(value_set=["quickfix", "source"])),
            data_support=True, resolve_support=lsp.ClientCodeActionResolveOptions(properties=["edit"])))
    # A pull client that can be refreshed: cglint lsp pushes to one that cannot.
    workspace = lsp.WorkspaceClientCapabilities(
        diagnostics=lsp.DiagnosticWorkspaceClientCapabilities(refresh_support=True)) if pull else None
    return lsp.ClientCapabilities(text_document=text, workspace=workspace, general=lsp.GeneralClientCapabilities(
        position_encodings=[lsp.PositionEncodingKind.Utf16]))


class _RawInitialize(LanguageServerProtocol):
    """Leaves the `initialize` result as JSON: this lsprotocol/cattrs pair cannot structure
    some servers' notebook filters, and the benchmark needs none of it."""

    def get_result_type(self, method: str):
        return None if method == lsp.INITIALIZE else super().get_result_type(method)


async def lsp_latencies(command: list[str], path: Path, text: str, edits: int, pull: bool,
                        expect_codes: bool, where: str = "end", fixes: list[float] | None = None,
                        during_fix: list[float] | None = None) -> list[float]:
    client = LanguageClient("bench", "1", protocol_cls=_RawInitialize)
    waiting: dict[int, asyncio.Future] = {}

    @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def published(params: lsp.PublishDiagnosticsParams) -> None:
        fut = waiting.get(params.version)
        if fut is not None and not fut.done():
            fut.set_result((time.perf_counter(), params.diagnostics))

    await client.start_io(*command, env=ENV)
    await client.initialize_async(lsp.InitializeParams(capabilities=capabilities(pull), process_id=os.getpid(),
                                                       root_uri=path.parent.as_uri()))
    client.initialized(lsp.InitializedParams())
    uri = path.as_uri()
    loop = asyncio.get_running_loop()

    async def diagnostics_for(version: int) -> tuple[float, list]:
        if pull:
            report = await client.text_document_diagnostic_async(
                lsp.DocumentDiagnosticParams(lsp.TextDocumentIdentifier(uri)))
            return time.perf_counter(), list(report.items)
        return await asyncio.wait_for(waiting[version], 60)

    waiting[1] = loop.create_future()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri, "python", 1, text)))
    _, first = await diagnostics_for(1)
    other = path.with_name("other_" + path.name).as_uri()
    other_text, other_version = [text.replace("op_", "other_op_")], [1]
    if fixes is not None and pull:
        client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(other, "python", 1, other_text[0])))
        await client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(lsp.TextDocumentIdentifier(other)))
    if expect_codes:
        assert sum(d.code == "CG005" for d in first) == 20, [d.code for d in first]

    times = []
    for n in range(1, edits + 1):
        version = n + 1
        text, span, new = edit_at(text, n, where)
        waiting[version] = loop.create_future()
        await asyncio.sleep(0.05)  # an editor's keystrokes are apart; let the server idle
        start = time.perf_counter()
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(version=version, uri=uri),
            [lsp.TextDocumentContentChangePartial(range=span, text=new)]))
        end, diags = await diagnostics_for(version)
        if expect_codes:
            assert sum(d.code == "CG005" for d in diags) == 20
        times.append(end - start)
        if fixes is not None and n % 4 == 0:
            # A quick fix as Neovim asks for it: code actions for the cursor line (with the
            # line's diagnostics as context), then resolve the fix's edit.
            diag = diags[n % len(diags)]
            await asyncio.sleep(0.05)
            start = time.perf_counter()
            actions = await client.text_document_code_action_async(lsp.CodeActionParams(
                lsp.TextDocumentIdentifier(uri), lsp.Range(diag.range.start, diag.range.start),
                lsp.CodeActionContext(diagnostics=[diag])))
            fix = next(a for a in actions if a.title.startswith("Fix CG005"))
            resolving = asyncio.ensure_future(client.code_action_resolve_async(fix) if fix.edit is None
                                              else asyncio.sleep(0, fix))
            if during_fix is not None and pull:
                # An edit and a pull of another buffer while the fix is computed: the lint must
                # not wait behind the fix.
                other_version[0] += 1
                other_text[0], other_span, other_new = edit_at(other_text[0], n, "site")
                lint_start = time.perf_counter()
                client.text_document_did_change(lsp.DidChangeTextDocumentParams(
                    lsp.VersionedTextDocumentIdentifier(version=other_version[0], uri=other),
                    [lsp.TextDocumentContentChangePartial(range=other_span, text=other_new)]))
                await client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(lsp.TextDocumentIdentifier(other)))
                during_fix.append(time.perf_counter() - lint_start)
            resolved = await resolving
            assert resolved.edit is not None, "the quick fix has no edit"
            fixes.append(time.perf_counter() - start)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return times


def process_latencies(command: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run = subprocess.run(command, capture_output=True, text=True, env=ENV)
        times.append(time.perf_counter() - start)
        assert run.returncode == 1 and "CG005" in run.stdout, (command, run.stdout[-500:], run.stderr[-2000:])
    return times


def engine_latencies(text: str, runs: int, incremental: bool, where: str = "end") -> list[float]:
    """In process: `engine.lint_source`, or the server's incremental analysis (warmed by one
    lint of the text)."""
    sys.path.insert(0, str(ROOT))
    from cglint import engine
    from cglint.lsp.incremental import Analysis
    from cglint.rules import ALL_RULES

    analysis = Analysis()
    rules = list(ALL_RULES)
    if incremental:
        analysis.lint(text, "bench.py", rules)
    times = []
    for n in range(runs):
        text, _, _ = edit_at(text, n, where)
        start = time.perf_counter()
        if incremental:
            result = analysis.lint(text, "bench.py", rules).result
        else:
            result = engine.lint_source(text, "bench.py", rules)
        times.append(time.perf_counter() - start)
        assert sum(d.code == "CG005" for d in result.diagnostics) == 20
    return times


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edits", type=int, default=40, help="edits timed per language server")
    parser.add_argument("--runs", type=int, default=10, help="runs of each process-per-run reference")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="cglint-lsp-bench-"))
    try:
        path = workdir / "bench_module.py"
        text = generate()
        path.write_text(text)
        print(f"module: {text.count(chr(10))} lines, 20 custom-gradient functions, "
              f"{len(text.encode()) // 1024} KiB; python {sys.version.split()[0]}; "
              f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        # Loaded once so the first server start does not pay for a cold disk cache.
        subprocess.run([sys.executable, "-c", "import cglint.lsp.server"], env=ENV, check=True)

        rows: list[tuple[str, list[float] | None, str]] = []
        server = [sys.executable, "-m", "cglint", "lsp"]
        ruff = shutil.which("ruff") or shutil.which("ruff", path=os.path.dirname(sys.executable))
        version = subprocess.run([ruff, "--version"], capture_output=True, text=True).stdout.strip() if ruff else None
        fixes: list[float] = []
        during: list[float] = []
        # Alternate the servers edit kind by edit kind, so load from other jobs hits them alike.
        for where in ("end", "site"):
            label = "edit away from the sites" if where == "end" else "edit inside a site's grad fn"
            for pull in (False, True):
                mode = "pull" if pull else "push"
                rows.append((f"cglint lsp, {mode}, {where}",
                             asyncio.run(lsp_latencies(server, path, text, args.edits, pull=pull, expect_codes=True,
                                                       where=where, fixes=fixes if where == "site" else None,
                                                       during_fix=during)),
                             f"{label}; didChange -> " + ("textDocument/diagnostic response" if pull else "publishDiagnostics")))
                if version:
                    rows.append((f"{version} server, {mode}, {where}",
                                 asyncio.run(lsp_latencies([ruff, "server"], path, text, args.edits, pull=pull,
                                                           expect_codes=False, where=where)),
                                 "same edits; ruff's own rules"))
        if not version:
            rows.append(("ruff server", None, "ruff not installed"))
        rows.append(("cglint lsp, quick fix (code action + resolve)", fixes,
                     "Neovim's `gra` on a CG005 line: actions for the line, then the fix's edit"))
        rows.append(("cglint lsp, pull while a quick fix resolves", during, "a lint does not wait behind a fix"))
        for where in ("end", "site"):
            rows.append((f"engine in process, incremental, {where}", engine_latencies(text, args.edits, True, where),
                         "cglint.lsp.incremental: the server's lint"))
        rows.append(("engine in process, full parse", engine_latencies(text, max(args.edits // 8, 3), False),
                     "lint_source(): a whole-file parse"))
        rows.append(("cglint FILE (CLI)", process_latencies([sys.executable, "-m", "cglint", "--no-cache", str(path)],
                                                            args.runs), "new process per run, no cache"))
        config = workdir / "flake8.cfg"
        config.write_text(f"[flake8:local-plugins]\nextension =\n    CG = cglint.flake8_plugin:Plugin\npaths = {ROOT}\n")
        flake8_cmd = [sys.executable, "-m", "flake8", "--config", str(config), "--select", "CG", str(path)]
        try:
            import importlib.metadata as md

            if any(ep.group == "flake8.extension" for ep in md.distribution("cglint").entry_points):
                flake8_cmd = [sys.executable, "-m", "flake8", "--isolated", "--select", "CG", str(path)]
        except Exception:
            pass
        rows.append(("flake8 --select CG FILE", process_latencies(flake8_cmd, args.runs), "new process per run"))

        print()
        print(f"| {'what':<40} | {'median ms':>9} | {'p90 ms':>8} | {'n':>3} | measures |")
        print(f"| {'-' * 40} | {'-' * 9}:| {'-' * 7}:| {'-' * 2}:| --- |")
        for name, times, note in rows:
            if times is None:
                print(f"| {name:<40} | {'-':>9} | {'-':>8} | {0:>3} | {note} |")
                continue
            ms = [t * 1000 for t in times]
            print(f"| {name:<40} | {statistics.median(ms):>9.1f} | {p90(ms):>8.1f} | {len(ms):>3} | {note} |")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
