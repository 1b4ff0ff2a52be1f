"""Notebook documents in the language server (LSP 3.17 `notebookDocument/*`, as pygls 2 syncs them).

An editor that opens a Jupyter notebook sends one notebook document whose cells are text
documents of their own (`vscode-notebook-cell:` URIs). pygls keeps the notebook and its cell
texts in the workspace; this module lints the code cells as one module, the way the CLI lints
an `.ipynb` (`cglint.notebook`: cells in order, magics masked, a cell that does not parse
reported on its own), and reports each cell's diagnostics on that cell's URI, in positions of
the cell's text: pushed after open, change (debounced) and save, or pulled per cell with
`textDocument/diagnostic`. Configuration is the notebook file's, as for any buffer.

`register(server)` is all the server needs to call; `pull(server, uri)` answers a pull for a
cell (None for a URI that is not a cell).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from lsprotocol import types as lsp

from cglint import engine
from cglint import notebook as nbmod
from cglint.lsp import text as txt

log = logging.getLogger("cglint.lsp.notebook")

SYNC = lsp.NotebookDocumentSyncOptions(
    notebook_selector=[lsp.NotebookDocumentFilterWithCells(cells=[lsp.NotebookCellLanguage(language="python")],
                                                           notebook="*")],
    save=True,
)


@dataclass
class NotebookState:
    uri: str
    pending: asyncio.Task | None = field(default=None, repr=False)
    published: set[str] = field(default_factory=set)  # cell URIs that have diagnostics on the client
    lint: tuple[Any, dict[str, list[lsp.Diagnostic]]] | None = None  # (key, diagnostics by cell URI)


def _cells(ls, uri: str) -> list[tuple[int, str, str]] | None:
    """(1-based cell number, cell URI, text) of the notebook's code cells, in order."""
    doc = ls.workspace.get_notebook_document(notebook_uri=uri)
    if doc is None:
        return None
    out = []
    for i, cell in enumerate(doc.cells):
        if cell.kind != lsp.NotebookCellKind.Code:
            continue
        out.append((i + 1, cell.document, ls.workspace.get_text_document(cell.document).source))
    return out


def _path(uri: str) -> str | None:
    return txt.fs_path(uri)


def lint_cells(ls, uri: str, cells: list[tuple[int, str, str]]) -> dict[str, list[lsp.Diagnostic]]:
    """Diagnostics for every code cell (an empty list for a clean one), by cell URI."""
    path = _path(uri)
    rules = ls.rules_for(path)
    out: dict[str, list[lsp.Diagnostic]] = {cell_uri: [] for _, cell_uri, _ in cells}
    if cells and (reason := txt.too_large("".join(text for _, _, text in cells))) is not None:
        # As a notebook file over the limit: one CG000, on the first code cell, nothing parsed.
        for d in engine.unreadable(path or uri, rules, reason).diagnostics:
            out[cells[0][1]].append(ls.to_lsp(d, txt.LineIndex(cells[0][2])))
        return out
    nb = nbmod.Notebook.from_cells((number, number - 1, text) for number, _, text in cells)
    result = engine.lint_notebook(nb, path or uri, rules)
    by_number = {number: (cell_uri, txt.LineIndex(text)) for number, cell_uri, text in cells}
    for d in result.diagnostics:
        if d.cell not in by_number:
            continue
        cell_uri, index = by_number[d.cell]
        out[cell_uri].append(ls.to_lsp(d, index))
    return out


def _key(cells) -> tuple:
    return tuple((number, cell_uri, text) for number, cell_uri, text in cells)


async def current(ls, state: NotebookState) -> dict[str, list[lsp.Diagnostic]] | None:
    cells = _cells(ls, state.uri)
    if cells is None:
        return None
    key = _key(cells)
    if state.lint is not None and state.lint[0] == key:
        return state.lint[1]
    loop = asyncio.get_running_loop()
    try:
        diagnostics = await loop.run_in_executor(getattr(ls, "linter", None), lint_cells, ls, state.uri, cells)
    except Exception:
        log.exception("lint failed for %s", state.uri)
        return None
    state.lint = (key, diagnostics)
    return diagnostics


def _states(ls) -> dict[str, NotebookState]:
    if not hasattr(ls, "notebooks"):
        ls.notebooks = {}
    return ls.notebooks


def schedule(ls, uri: str, delay: float) -> None:
    if getattr(ls, "pull", False):
        return  # the client asks per cell (pull)
    state = _states(ls).setdefault(uri, NotebookState(uri))
    if state.pending is not None:
        state.pending.cancel()
    state.pending = asyncio.get_running_loop().create_task(_push_later(ls, state, delay))


async def _push_later(ls, state: NotebookState, delay: float) -> None:
    try:
        if delay:
            await asyncio.sleep(delay)
        diagnostics = await current(ls, state)
        if diagnostics is None or _states(ls).get(state.uri) is not state:
            return
        for cell_uri in state.published - set(diagnostics):  # cells deleted since: clear them
            ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=cell_uri, diagnostics=[]))
        for cell_uri, items in diagnostics.items():
            ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=cell_uri, diagnostics=items))
        state.published = set(diagnostics)
    except asyncio.CancelledError:
        pass
    except Exception:
        log.exception("publishing diagnostics failed for %s", state.uri)


async def pull(ls, uri: str) -> list[lsp.Diagnostic] | None:
    """A pull for `uri`: its diagnostics when it is a cell of an open notebook, else None."""
    doc = ls.workspace.get_notebook_document(cell_uri=uri)
    if doc is None:
        return None
    state = _states(ls).setdefault(doc.uri, NotebookState(doc.uri))
    diagnostics = await current(ls, state)
    return (diagnostics or {}).get(uri, [])


def register(server) -> None:
    """Advertise notebook sync (for clients that support it) and handle its notifications.
    pygls applies them to its workspace before these handlers run."""
    server._notebook_document_sync = SYNC  # read by pygls when it answers `initialize`

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_OPEN)
    def did_open(ls, params: lsp.DidOpenNotebookDocumentParams) -> None:
        schedule(ls, params.notebook_document.uri, 0)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def did_change(ls, params: lsp.DidChangeNotebookDocumentParams) -> None:
        schedule(ls, params.notebook_document.uri, ls.debounce)  # as for text documents

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_SAVE)
    def did_save(ls, params: lsp.DidSaveNotebookDocumentParams) -> None:
        schedule(ls, params.notebook_document.uri, 0)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def did_close(ls, params: lsp.DidCloseNotebookDocumentParams) -> None:
        state = _states(ls).pop(params.notebook_document.uri, None)
        if state is None:
            return
        if state.pending is not None:
            state.pending.cancel()
        if not getattr(ls, "pull", False):
            for cell_uri in state.published | {c.uri for c in params.cell_text_documents}:
                ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=cell_uri, diagnostics=[]))
