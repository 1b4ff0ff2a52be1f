"""The language server on notebook documents (LSP 3.17 `notebookDocument/*`), driven by a real
LSP client (pytest-lsp) against `python -m cglint lsp`: the capabilities of VS Code 1.65 plus
the notebook synchronisation VS Code sends since 1.74, pushing or pulling diagnostics."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types as lsp
from pygls.protocol import default_converter
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

ROOT = Path(__file__).resolve().parents[1]
NB = ROOT / "fixtures" / "notebooks" / "seed_op.ipynb"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

# The fixture's findings, by cell number: (code, 0-based line, 0-based character) in that cell.
EXPECTED = {4: [("CG001", 2, 4), ("CG004", 8, 8), ("CG005", 9, 29), ("CG002", 13, 8)]}


async def start(pull: bool, cache: Path):
    published: list[lsp.PublishDiagnosticsParams] = []
    client = LanguageClient(converter_factory=default_converter)
    register_lsp_features(client, {k: v for k, v in DEFAULT_CLIENT_FEATURES.items()
                                   if k != lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS})

    @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def record(params: lsp.PublishDiagnosticsParams) -> None:
        published.append(params)

    caps = client_capabilities("visual-studio-code@1.65.2")
    caps.notebook_document = lsp.NotebookDocumentClientCapabilities(
        synchronization=lsp.NotebookDocumentSyncClientCapabilities(execution_summary_support=True))
    if pull:  # a pull client that can be refreshed (the server pushes to one that cannot)
        caps.text_document.diagnostic = lsp.DiagnosticClientCapabilities(related_document_support=False)
        caps.workspace.diagnostics = lsp.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    await client.start_io(sys.executable, "-m", "cglint", "lsp", env={**ENV, "XDG_CACHE_HOME": str(cache)})
    result = await client.initialize_session(lsp.InitializeParams(capabilities=caps, root_uri=ROOT.as_uri()))
    return client, published, result.capabilities


@pytest_asyncio.fixture(params=[False, True], ids=["push", "pull"], loop_scope="module", scope="module")
async def server(request, tmp_path_factory):
    client, published, caps = await start(request.param, tmp_path_factory.mktemp("cache"))
    yield client, published, caps, request.param
    await client.shutdown_session()
    await client.stop()


def notebook_cells():
    """The fixture as an editor sends it: one cell text document per cell."""
    nb = json.loads(NB.read_text())
    uri = NB.as_uri()
    cells, docs = [], []
    for i, cell in enumerate(nb["cells"]):
        cell_uri = f"vscode-notebook-cell:{NB}#cell{i}"
        code = cell["cell_type"] == "code"
        cells.append(lsp.NotebookCell(kind=lsp.NotebookCellKind.Code if code else lsp.NotebookCellKind.Markup,
                                      document=cell_uri))
        docs.append(lsp.TextDocumentItem(uri=cell_uri, language_id="python" if code else "markdown", version=1,
                                         text="".join(cell["source"])))
    return uri, cells, docs


async def diagnostics(client, published, pull: bool, cell_uris: list[str], since: int, timeout: float = 20):
    """{cell URI: diagnostics}, pulled per cell or waited for until every cell was published."""
    if pull:
        out = {}
        for cell_uri in cell_uris:
            report = await client.text_document_diagnostic_async(
                lsp.DocumentDiagnosticParams(lsp.TextDocumentIdentifier(cell_uri)))
            out[cell_uri] = list(report.items)
        return out

    async def poll():
        while True:
            seen = {p.uri: list(p.diagnostics) for p in published[since:]}
            if set(cell_uris) <= set(seen):
                return {u: seen[u] for u in cell_uris}
            await asyncio.sleep(0.02)

    return await asyncio.wait_for(poll(), timeout)


def where(items):
    return [(d.code, d.range.start.line, d.range.start.character) for d in items]


@pytest.mark.asyncio(loop_scope="module")
async def test_notebook_document_gets_diagnostics_per_cell(server):
    client, published, caps, pull = server
    assert caps.notebook_document_sync is not None
    uri, cells, docs = notebook_cells()
    code_uris = [c.document for c in cells if c.kind == lsp.NotebookCellKind.Code]
    since = len(published)
    client.notebook_document_did_open(lsp.DidOpenNotebookDocumentParams(
        notebook_document=lsp.NotebookDocument(uri=uri, notebook_type="jupyter-notebook", version=1, cells=cells),
        cell_text_documents=docs))
    got = await diagnostics(client, published, pull, code_uris, since)
    by_cell = {int(u.rsplit("#cell", 1)[1]) + 1: where(items) for u, items in got.items()}
    assert by_cell == {2: [], 3: [], 4: EXPECTED[4], 5: []}
    assert all(d.source == "cglint" for items in got.values() for d in items)

    # Edit the op cell as a user would: the CG005 goes away, the others stay where they are.
    op = cells[3].document
    since = len(published)
    client.notebook_document_did_change(lsp.DidChangeNotebookDocumentParams(
        notebook_document=lsp.VersionedNotebookDocumentIdentifier(uri=uri, version=2),
        change=lsp.NotebookDocumentChangeEvent(cells=lsp.NotebookDocumentCellChanges(text_content=[
            lsp.NotebookDocumentCellContentChanges(
                document=lsp.VersionedTextDocumentIdentifier(uri=op, version=2),
                changes=[lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(lsp.Position(9, 41), lsp.Position(9, 42)), text="z")])]))))
    await asyncio.sleep(0.3)  # past the debounce
    got = await diagnostics(client, published, pull, [op], since)
    assert [c for c, _, _ in where(got[op])] == ["CG001", "CG004", "CG002"]

    since = len(published)
    client.notebook_document_did_close(lsp.DidCloseNotebookDocumentParams(
        notebook_document=lsp.NotebookDocumentIdentifier(uri=uri),
        cell_text_documents=[lsp.TextDocumentIdentifier(c.document) for c in cells]))
    if not pull:
        cleared = await diagnostics(client, published, pull, [op], since)
        assert cleared[op] == []
