"""The editor as a Neovim user meets it: pull diagnostics, code actions asked for with the
cursor anywhere on a line (`context.diagnostics` holds the line's diagnostics), requests
cancelled with `$/cancelRequest` when a newer one supersedes them, an edited pyproject.toml,
and syntax errors where Python reports them. The client sends Neovim 0.11's capabilities
(pytest-lsp's record of them: no file watching on Linux) with diagnostic refresh, which pull
mode needs (Neovim after 0.11 has it); plain Neovim 0.11, which pulls but cannot be refreshed,
is pushed to (its own test). One test adds watched-file registration as VS Code offers it."""

from __future__ import annotations

import asyncio
import copy
import sys
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features
from pygls.protocol import default_converter

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from lsp_latency import OP, generate  # noqa: E402 - the benchmark's 2,000-line module and its site

from support import ENV  # noqa: E402

NEOVIM = "neovim@0.11.0"
EXTRA: list[str] = []
BAD = """import tensorflow as tf


@tf.custom_gradient
def op(x):
    y = tf.math.tan(x)

    def grad(dy):
        return dy / tf.square(tf.math.cos(y))

    return y, grad
"""
CG005_LINE = 8


async def start(capabilities: lsp.ClientCapabilities, root: Path):
    client = LanguageClient(converter_factory=default_converter)
    client.registrations = []
    features = {k: v for k, v in DEFAULT_CLIENT_FEATURES.items()}
    register_lsp_features(client, features)

    @client.feature(lsp.CLIENT_REGISTER_CAPABILITY)
    def registered(params: lsp.RegistrationParams) -> None:
        client.registrations.extend(params.registrations)

    await client.start_io(sys.executable, "-m", "cglint", "lsp", *EXTRA, env={**ENV, "XDG_CACHE_HOME": str(root / ".cache")})
    client.init_result = await client.initialize_session(lsp.InitializeParams(
        capabilities=capabilities, root_uri=root.as_uri(), workspace_folders=[lsp.WorkspaceFolder(root.as_uri(), "p")]))
    return client


def with_refresh(caps: lsp.ClientCapabilities) -> lsp.ClientCapabilities:
    caps = copy.deepcopy(caps)
    caps.workspace.diagnostics = lsp.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    return caps


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def neovim(tmp_path_factory):
    root = tmp_path_factory.mktemp("project")
    client = await start(with_refresh(client_capabilities(NEOVIM)), root)
    client.root = root
    yield client
    await client.shutdown_session()
    await client.stop()


_names = iter(range(10**6))


def open_doc(client, text: str, folder: Path | None = None) -> str:
    path = (folder or client.root) / f"doc_{next(_names)}.py"
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(path.as_uri(), "python", 1, text)))
    return path.as_uri()


async def pull(client, uri: str) -> lsp.RelatedFullDocumentDiagnosticReport:
    return await client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(lsp.TextDocumentIdentifier(uri)))


@pytest.mark.asyncio(loop_scope="module")
async def test_code_actions_for_the_cursor_line_as_neovim_asks(neovim):
    uri = open_doc(neovim, BAD)
    (diag,) = (await pull(neovim, uri)).items
    assert diag.code == "CG005" and diag.range.start.line == CG005_LINE and diag.range.start.character > 0
    # `gra` with the cursor at the start of the line, left of the underlined span: Neovim sends
    # the cursor as the range and the line's diagnostics as the context.
    cursor = lsp.Range(lsp.Position(CG005_LINE, 0), lsp.Position(CG005_LINE, 0))
    actions = await neovim.text_document_code_action_async(lsp.CodeActionParams(
        lsp.TextDocumentIdentifier(uri), cursor, lsp.CodeActionContext(diagnostics=[diag])))
    titles = [a.title for a in actions]
    assert any(t.startswith("Fix CG005") for t in titles) and "Suppress CG005 on this line (# noqa: CG005)" in titles
    # Elsewhere, with nothing in the context, nothing is offered but fix all.
    other = lsp.Range(lsp.Position(5, 0), lsp.Position(5, 0))
    actions = await neovim.text_document_code_action_async(lsp.CodeActionParams(
        lsp.TextDocumentIdentifier(uri), other, lsp.CodeActionContext(diagnostics=[])))
    assert [a.kind for a in actions or []] in ([], ["source.fixAll.cglint"])


@pytest.mark.asyncio(loop_scope="module")
async def test_a_cancelled_pull_is_not_linted_again(neovim):
    """Neovim cancels a pending pull when it sends a newer one. The lint it started finishes
    into the buffer's cache (it is for the current text), so the next pull answers from it:
    the text is linted once."""
    first = await pull(neovim, open_doc(neovim, BAD))
    # A fresh buffer with 300 sites (3-space indents: no statement the server has seen before),
    # so its first lint outlasts the cancel (a second or more).
    big = open_doc(neovim, (generate() + "".join(OP.format(i=i) for i in range(20, 300))).replace("    ", "   "))
    request_id = "cancel-me"
    cancelled = asyncio.wrap_future(neovim.protocol.send_request(
        lsp.TEXT_DOCUMENT_DIAGNOSTIC, lsp.DocumentDiagnosticParams(lsp.TextDocumentIdentifier(big)), msg_id=request_id))
    await asyncio.sleep(0.05)  # the server has started linting
    neovim.protocol.notify(lsp.CANCEL_REQUEST, lsp.CancelParams(id=request_id))
    with pytest.raises(Exception, match="cancel"):
        await cancelled
    report = await pull(neovim, big)
    assert sum(d.code == "CG005" for d in report.items) == 300
    assert int(report.result_id) == int(first.result_id) + 1, "the cancelled lint was redone"


@pytest.mark.asyncio(loop_scope="module")
async def test_superseded_work_stops(neovim):
    """A pull whose text is edited before its lint ends: that lint stops, only the new text is
    linted."""
    first = await pull(neovim, open_doc(neovim, BAD))
    # 150 sites in statements the server has not parsed yet: a lint of a second or more, so
    # the edit arrives while it runs.
    text = (generate() + "".join(OP.format(i=i) for i in range(20, 150))).replace("    ", "  ")
    big = open_doc(neovim, text)
    stale = asyncio.ensure_future(pull(neovim, big))
    await asyncio.sleep(0.05)
    neovim.text_document_did_change(lsp.DidChangeTextDocumentParams(
        lsp.VersionedTextDocumentIdentifier(uri=big, version=2),
        [lsp.TextDocumentContentChangeWholeDocument(text=text + "\nLATE = 1\n")]))
    report = await pull(neovim, big)
    await stale
    assert sum(d.code == "CG005" for d in report.items) == 150
    assert int(report.result_id) == int(first.result_id) + 1, "the superseded lint ran to the end"


@pytest.mark.asyncio(loop_scope="module")
async def test_neovim_0_11_is_pushed_to_and_a_pyproject_edit_clears_the_finding(tmp_path):
    # Neovim 0.11 pulls but has no refresh: offered pull diagnostics, it would keep a pulled
    # finding the configuration no longer selects until the user types (pushed diagnostics
    # go to another namespace). So it is offered no diagnosticProvider and gets everything
    # pushed, and a pyproject.toml edit reaches it without a buffer edit.
    (tmp_path / "pyproject.toml").write_text("[tool.cglint]\n")
    client = await start(client_capabilities(NEOVIM), tmp_path)
    try:
        assert client.init_result.capabilities.diagnostic_provider is None

        async def pushed(uri, wanted):
            while [d.code for d in client.diagnostics.get(uri, ())] != wanted:
                await asyncio.sleep(0.05)

        uri = open_doc(client, BAD, tmp_path)
        await asyncio.wait_for(pushed(uri, ["CG005"]), 30)
        (tmp_path / "pyproject.toml").write_text('[tool.cglint]\nignore = ["CG005"]\n')
        # No edit of the buffer: the server noticed the file (Neovim 0.11 on Linux cannot watch it).
        await asyncio.wait_for(pushed(uri, []), 15)
        (tmp_path / "pyproject.toml").write_text("[tool.cglint]\n")
        await asyncio.wait_for(pushed(uri, ["CG005"]), 15)
    finally:
        await client.shutdown_session()
        await client.stop()


async def _until(condition) -> None:
    """Returns once `condition()` holds: the event loop runs the client meanwhile (callers bound
    it with wait_for, generous for a loaded machine)."""
    while not condition():
        await asyncio.sleep(0.02)


@pytest.mark.asyncio(loop_scope="module")
async def test_pull_client_with_refresh_and_watchers(tmp_path):
    caps = with_refresh(client_capabilities(NEOVIM))
    caps.workspace.did_change_watched_files = lsp.DidChangeWatchedFilesClientCapabilities(dynamic_registration=True)
    client = await start(caps, tmp_path)
    try:
        await asyncio.wait_for(_until(lambda: client.registrations), 60)  # the server registers after `initialized`
        (reg,) = client.registrations
        assert reg.method == lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES
        assert [w["globPattern"] for w in reg.register_options["watchers"]] == ["**/pyproject.toml"]
        (tmp_path / "pyproject.toml").write_text("[tool.cglint]\n")
        uri = open_doc(client, BAD, tmp_path)
        assert [d.code for d in (await pull(client, uri)).items] == ["CG005"]
        (tmp_path / "pyproject.toml").write_text('[tool.cglint]\nignore = ["CG005"]\n')
        client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(changes=[lsp.FileEvent(
            (tmp_path / "pyproject.toml").as_uri(), lsp.FileChangeType.Changed)]))
        await asyncio.wait_for(_until(lambda: client.diagnostic_refresh_count), 60)
        assert client.diagnostic_refresh_count == 1
        assert list((await pull(client, uri)).items) == []
    finally:
        await client.shutdown_session()
        await client.stop()


@pytest.mark.asyncio(loop_scope="module")
async def test_cg000_where_python_says_and_message_agrees_with_range(neovim):
    lines = ["import tensorflow as tf", "", "@tf.custom_gradient", "def op(x):"]
    lines += [f"    a{i} = x * {i}" for i in range(len(lines), 59)]
    lines += ["    y = tf.reduce_sum((x,", "    return y, lambda dy: dy", "", "", "z = 1"]  # `(` on line 60
    text = "\n".join(lines) + "\n"
    with pytest.raises(SyntaxError) as python:
        compile(text, "m.py", "exec")
    assert python.value.lineno == 60
    (d,) = (await pull(neovim, open_doc(neovim, text))).items
    assert d.code == "CG000"
    assert d.range.start.line == 59 and d.range.start.character == python.value.offset - 1
    assert d.message == f"cannot parse: {python.value.msg}" and " at " not in d.message
