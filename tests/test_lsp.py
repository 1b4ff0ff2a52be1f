"""The language server, driven by a real LSP client (pytest-lsp's, over stdio) against
`python -m cglint lsp` in a child process, with the capabilities real editors send:
VS Code 1.65 (push diagnostics, UTF-16 columns) and Neovim 0.11 with diagnostic refresh (pull
diagnostics, UTF-8; plain Neovim 0.11 cannot be refreshed and is pushed to, see
test_neovim_0_11_without_refresh_is_pushed_to_and_sees_pyproject_edits)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features
from pygls.protocol import default_converter

from cglint.diagnostics import split_message
from cglint.lsp import text as txt

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "fixtures" / "seed" / "original.py"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

VSCODE, NEOVIM = "visual-studio-code@1.65.2", "neovim@0.11.0+refresh"


def capabilities(flavor: str) -> lsp.ClientCapabilities:
    """pytest-lsp's record of the editor; `+refresh`: the same editor able to be asked to pull
    again (`workspace.diagnostics.refreshSupport`, as Neovim after 0.11 and VS Code's pull
    clients), which is what makes the server use pull diagnostics."""
    name, refresh, _ = flavor.partition("+refresh")
    caps = client_capabilities(name)
    if refresh:
        caps.workspace.diagnostics = lsp.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    return caps

BAD = """import tensorflow as tf


@tf.custom_gradient
def op(x):
    y = tf.math.tan(x)

    def grad(dy):
        return dy / tf.square(tf.math.cos(y))

    return y, grad
"""
CG005_LINE = 8  # 0-based: `return dy / tf.square(tf.math.cos(y))`


def cli_json(path: Path, cwd: Path = ROOT) -> list[dict]:
    run = subprocess.run([sys.executable, "-m", "cglint", "--output-format", "json", str(path)],
                         capture_output=True, text=True, cwd=cwd, env=ENV)
    assert run.returncode in (0, 1), run.stderr
    return json.loads(run.stdout)["diagnostics"]


class Editor:
    """A minimal editor on top of the test client: one open document, full-text changes,
    diagnostics by push or pull (whichever the server and the client capabilities choose)."""

    def __init__(self, client: LanguageClient, flavor: str, published: list, encoding: str) -> None:
        self.client, self.flavor, self.published, self.encoding = client, flavor, published, encoding
        self.pull = flavor == NEOVIM
        self.uri = ""
        self.text = ""
        self.version = 0
        self.result_id: str | None = None

    async def open(self, path: Path, text: str | None = None) -> list[lsp.Diagnostic]:
        self.uri, self.text, self.version = path.as_uri(), path.read_text() if text is None else text, 1
        self.since = len(self.published)  # publishes before this open belong to earlier documents
        self.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=self.uri, language_id="python", version=1, text=self.text)))
        return await self.diagnostics()

    async def change(self, text: str) -> list[lsp.Diagnostic]:
        self.text, self.version = text, self.version + 1
        self.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
            [lsp.TextDocumentContentChangeWholeDocument(text=text)]))
        return await self.diagnostics()

    async def diagnostics(self) -> list[lsp.Diagnostic]:
        if self.pull:
            report = await self.client.text_document_diagnostic_async(
                lsp.DocumentDiagnosticParams(lsp.TextDocumentIdentifier(self.uri)))
            assert report.kind == "full"
            self.result_id = report.result_id
            return list(report.items)
        return await wait_published(self.published, self.uri, self.version, since=self.since)

    async def code_actions(self, diagnostic: lsp.Diagnostic, only: list[str] | None = None) -> list[lsp.CodeAction]:
        actions = await self.client.text_document_code_action_async(lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(self.uri), diagnostic.range,
            lsp.CodeActionContext(diagnostics=[diagnostic], only=only)))
        return list(actions or [])

    async def resolve(self, action: lsp.CodeAction) -> lsp.CodeAction:
        """The action with its edit: clients that support resolving get edits lazily."""
        if action.edit is None:
            action = await self.client.code_action_resolve_async(action)
        assert action.edit is not None
        return action

    def apply(self, edit: lsp.WorkspaceEdit) -> str:
        """The document text after `edit`, as an editor applies it."""
        if edit.document_changes:
            (change,) = edit.document_changes
            assert change.text_document.uri == self.uri and change.text_document.version == self.version
            edits = change.edits
        else:
            edits = edit.changes[self.uri]
        index = txt.LineIndex(self.text)
        text = self.text
        spans = sorted(((index.offset(txt.Position(e.range.start.line, e.range.start.character), self.encoding),
                         index.offset(txt.Position(e.range.end.line, e.range.end.character), self.encoding),
                         e.new_text) for e in edits), reverse=True)
        for start, end, new in spans:
            text = text[:start] + new + text[end:]
        return text


async def wait_published(published: list, uri: str, version: int, since: int = 0,
                         timeout: float = 20) -> list[lsp.Diagnostic]:
    async def poll():
        while True:
            for params in reversed(published[since:]):
                if params.uri == uri and params.version == version:
                    return list(params.diagnostics)
            await asyncio.sleep(0.01)

    return await asyncio.wait_for(poll(), timeout)


async def start(flavor: str, cache: Path) -> tuple[LanguageClient, list, str]:
    published: list[lsp.PublishDiagnosticsParams] = []
    client = LanguageClient(converter_factory=default_converter)
    features = {k: v for k, v in DEFAULT_CLIENT_FEATURES.items() if k != lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS}
    register_lsp_features(client, features)

    @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def record(params: lsp.PublishDiagnosticsParams) -> None:
        published.append(params)

    await client.start_io(sys.executable, "-m", "cglint", "lsp", env={**ENV, "XDG_CACHE_HOME": str(cache)})
    result = await client.initialize_session(lsp.InitializeParams(
        capabilities=capabilities(flavor), root_uri=ROOT.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(uri=ROOT.as_uri(), name="cglint")]))
    return client, published, str(result.capabilities.position_encoding.value if hasattr(
        result.capabilities.position_encoding, "value") else result.capabilities.position_encoding or txt.UTF16)


# One server per client flavour for the module (starting one costs seconds: lsprotocol and
# libcst imports); each test opens its own document and closes it afterwards.
@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def servers(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    running = {flavor: await start(flavor, cache) for flavor in (VSCODE, NEOVIM)}
    yield running
    for client, _, _ in running.values():
        await client.shutdown_session()
        await client.stop()


_documents = iter(range(10**6))


async def _editor(servers, flavor):
    client, published, encoding = servers[flavor]
    ed = Editor(client, flavor, published, encoding)
    ed.scratch = ROOT / f"scratch_{next(_documents)}.py"  # never written: the server lints the buffer
    yield ed
    if ed.uri:
        client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(ed.uri)))


@pytest_asyncio.fixture(params=[VSCODE, NEOVIM], ids=["vscode-push-utf16", "neovim-pull-utf8"], loop_scope="module")
async def editor(servers, request):
    async for ed in _editor(servers, request.param):
        yield ed


@pytest_asyncio.fixture(loop_scope="module")
async def vscode(servers):
    async for ed in _editor(servers, VSCODE):
        yield ed


def expected(diags: list[dict], text: str, encoding: str) -> set[tuple]:
    """The CLI's spans as LSP ranges in `encoding`."""
    index = txt.LineIndex(text)
    out = set()
    for d in diags:
        a = index.from_cglint(d["line"], d["column"], encoding)
        b = index.from_cglint(d["end_line"], d["end_column"], encoding)
        out.add((d["code"], a.line, a.character, b.line, b.character))
    return out


def spans(diags: list[lsp.Diagnostic]) -> set[tuple]:
    return {(d.code, d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character)
            for d in diags}


# -- diagnostics --------------------------------------------------------------------------

@pytest.mark.asyncio(loop_scope="module")
async def test_seed_diagnostics_match_the_cli(editor):
    assert editor.encoding == (txt.UTF8 if editor.pull else txt.UTF16)
    diags = await editor.open(editor.scratch, SEED.read_text())
    cli = cli_json(SEED)
    assert {d["code"] for d in cli} == {"CG001", "CG002", "CG004", "CG005"}
    assert spans(diags) == expected(cli, SEED.read_text(), editor.encoding)
    by_code = {d.code: d for d in diags}
    severities = {"error": lsp.DiagnosticSeverity.Error, "warning": lsp.DiagnosticSeverity.Warning}
    assert {d.code: d.severity for d in diags} == {d["code"]: severities[d["severity"]] for d in cli}
    # `yp = 1.0 / tf.square(tf.math.cos(y))` on line 23: the `tf.math.cos(y)` call
    assert by_code["CG005"].range == lsp.Range(lsp.Position(22, 29), lsp.Position(22, 43))
    messages = {d["code"]: d["message"] for d in cli}
    for d in diags:
        assert d.source == "cglint"
        # The message's title alone on the first line, each detail clause on its own line.
        title, details = split_message(messages[d.code])
        assert d.message.split("\n") == [title, *details] and len(title) < 120
        doc = Path(lsp_path(d.code_description.href))
        assert doc.read_text() == cli_explain(d.code)
    if editor.pull:  # a client that pulls must not also get pushed diagnostics
        await asyncio.sleep(0.3)
        assert not [p for p in editor.published if p.uri == editor.uri]


def lsp_path(href: str) -> str:
    assert href.startswith("file://"), href
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(href).path)


def cli_explain(code: str) -> str:
    """What `cglint --explain CODE` prints (tests/test_cli.py runs the command itself)."""
    from cglint.rules import RULES_BY_CODE

    return RULES_BY_CODE[code].documentation()


@pytest.mark.asyncio(loop_scope="module")
async def test_unparsable_buffer_gives_cg000_and_the_next_valid_buffer_clears_it(editor):
    assert spans(await editor.open(editor.scratch, BAD)) == {("CG005", CG005_LINE, 30, CG005_LINE, 44)}
    broken = BAD.replace("def op(x):", "def op(x:")
    diags = await editor.change(broken)
    assert [d.code for d in diags] == ["CG000"]
    assert "cannot parse" in diags[0].message
    assert spans(await editor.change(BAD.replace("tf.math.cos(y)", "tf.math.cos(x)"))) == set()


@pytest.mark.asyncio(loop_scope="module")
async def test_non_ascii_lines_use_the_negotiated_column_units(editor):
    # Two code points before the span that are 2 UTF-16 units / 4+2 UTF-8 bytes wide.
    text = BAD.replace("        return dy / tf.square(tf.math.cos(y))",
                       '        s = "😋é"; return dy / tf.square(tf.math.cos(y))')
    (d,) = await editor.open(editor.scratch, text)
    line = txt.LineIndex(text).line(CG005_LINE)
    start = line.index("tf.math.cos")
    assert d.range.start.character == txt.units(line[:start], editor.encoding)
    assert d.range.end.character - d.range.start.character == len("tf.math.cos(y)")
    assert d.range.start.character == {txt.UTF16: start + 1, txt.UTF8: start + 4}[editor.encoding]


@pytest.mark.asyncio(loop_scope="module")
async def test_incremental_changes_apply_in_the_negotiated_units(vscode):
    text = BAD.replace("    y = tf.math.tan(x)", '    y = tf.math.tan(x)  # 😋 é\u2028 \x0c')
    await vscode.open(vscode.scratch, text)
    line = 5  # the `y = ...` line; insert after the comment's non-ASCII characters
    column = txt.units(txt.LineIndex(text).line(line), txt.UTF16)
    vscode.version += 1
    vscode.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        lsp.VersionedTextDocumentIdentifier(uri=vscode.uri, version=vscode.version),
        [lsp.TextDocumentContentChangePartial(range=lsp.Range(lsp.Position(line, column), lsp.Position(line, column)),
                                              text="\n    z = x"),
         # then rename the grad fn's `y` to the pre-activation: CG005 goes away
         lsp.TextDocumentContentChangePartial(range=lsp.Range(lsp.Position(CG005_LINE + 1, 42),
                                                              lsp.Position(CG005_LINE + 1, 43)), text="z")]))
    assert await vscode.diagnostics() == []


@pytest.mark.asyncio(loop_scope="module")
async def test_rapid_changes_end_with_the_latest_version_and_never_go_back(vscode):
    # No server-side debounce (the client has its own): a change arriving while a lint runs
    # supersedes the ones queued before it, so a burst of edits is linted a few times at
    # most, in order, and the last publish is the latest version.
    await vscode.open(vscode.scratch, BAD)
    before = len(vscode.published)
    for i in range(5):
        vscode.version += 1
        vscode.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=vscode.uri, version=vscode.version),
            [lsp.TextDocumentContentChangeWholeDocument(text=BAD + f"# edit {i}\n")]))
    diags = await vscode.diagnostics()
    await asyncio.sleep(0.5)
    versions = [p.version for p in vscode.published[before:] if p.uri == vscode.uri]
    assert versions[-1] == vscode.version and versions == sorted(set(versions)), versions
    assert [d.code for d in diags] == ["CG005"]


@pytest.mark.asyncio(loop_scope="module")
async def test_pull_reports_unchanged_until_the_text_changes(servers):
    async for ed in _editor(servers, NEOVIM):
        published_before = len(ed.published)
        await ed.open(ed.scratch, BAD)
        first = ed.result_id
        assert first
        again = await ed.client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(
            lsp.TextDocumentIdentifier(ed.uri), previous_result_id=first))
        assert again.kind == "unchanged" and again.result_id == first
        fixed = await ed.change(BAD.replace("cos(y)", "cos(x)"))
        assert fixed == [] and ed.result_id != first
        assert len(ed.published) == published_before


# -- code actions and hover ---------------------------------------------------------------

@pytest.mark.asyncio(loop_scope="module")
async def test_noqa_action_suppresses_the_diagnostic(editor):
    (d,) = await editor.open(editor.scratch, BAD)
    actions = await editor.code_actions(d)
    (noqa,) = [a for a in actions if "noqa" in a.title]
    assert noqa.kind == lsp.CodeActionKind.QuickFix and noqa.diagnostics[0].code == "CG005"
    after = editor.apply(noqa.edit)
    assert txt.LineIndex(after).line(CG005_LINE).endswith("tf.square(tf.math.cos(y))  # noqa: CG005")
    assert await editor.change(after) == []


@pytest.mark.asyncio(loop_scope="module")
async def test_noqa_action_merges_into_an_existing_noqa_comment(editor):
    text = BAD.replace("tf.math.cos(y))", "tf.math.cos(y))  # noqa: E501")
    (d,) = await editor.open(editor.scratch, text)
    (noqa,) = [a for a in await editor.code_actions(d) if "noqa" in a.title]
    after = editor.apply(noqa.edit)
    assert txt.LineIndex(after).line(CG005_LINE).endswith("# noqa: E501, CG005")
    assert await editor.change(after) == []


@pytest.mark.asyncio(loop_scope="module")
async def test_no_noqa_action_where_a_comment_cannot_go(vscode):
    text = BAD.replace("return dy / tf.square(tf.math.cos(y))", "return dy / tf.square(tf.math.cos(y)) \\\n            * 1.0")
    (d,) = await vscode.open(vscode.scratch, text)
    assert d.code == "CG005"
    assert not [a for a in await vscode.code_actions(d) if "noqa" in a.title]


@pytest.mark.asyncio(loop_scope="module")
async def test_hover_on_a_noqa_code_shows_the_rule_documentation(editor):
    text = BAD.replace("tf.math.cos(y))", "tf.math.cos(y))  # noqa: E501, CG005")
    assert await editor.open(editor.scratch, text) == []
    line = txt.LineIndex(text).line(CG005_LINE)
    column = line.index("CG005") + 2
    hover = await editor.client.text_document_hover_async(lsp.HoverParams(
        lsp.TextDocumentIdentifier(editor.uri), lsp.Position(CG005_LINE, column)))
    assert hover is not None and hover.contents.kind == lsp.MarkupKind.Markdown
    assert hover.contents.value == cli_explain("CG005")
    assert hover.range == lsp.Range(lsp.Position(CG005_LINE, line.index("CG005")),
                                    lsp.Position(CG005_LINE, line.index("CG005") + 5))
    # elsewhere on the line (or on a code that is not cglint's): nothing
    for col in (4, line.index("E501") + 1):
        assert await editor.client.text_document_hover_async(lsp.HoverParams(
            lsp.TextDocumentIdentifier(editor.uri), lsp.Position(CG005_LINE, col))) is None


@pytest.mark.asyncio(loop_scope="module")
async def test_cg005_quick_fix_on_the_seed_removes_the_diagnostic(editor):
    diags = await editor.open(editor.scratch, SEED.read_text())
    (cg005,) = [d for d in diags if d.code == "CG005"]
    fixes = [a for a in await editor.code_actions(cg005) if "noqa" not in a.title]
    assert fixes, "no quick fix offered for CG005"
    fix = await editor.resolve(fixes[0])
    assert fix.kind == lsp.CodeActionKind.QuickFix and fix.diagnostics[0].code == "CG005"
    assert fix.title.startswith("Fix CG005: ") and not fix.is_preferred  # CG005's fix is unsafe: never preferred
    after = editor.apply(fix.edit)
    # a minimal edit: the changed lines, not the whole document
    edits = fix.edit.document_changes[0].edits if fix.edit.document_changes else fix.edit.changes[editor.uri]
    assert all(e.range.end.line - e.range.start.line < 10 for e in edits)
    remaining = await editor.change(after)
    assert "CG005" not in {d.code for d in remaining}


@pytest.mark.asyncio(loop_scope="module")
async def test_fix_all_applies_every_safe_fix(editor):
    diags = await editor.open(editor.scratch, SEED.read_text())
    actions = await editor.code_actions(diags[0], only=["source.fixAll"])
    (fix_all,) = actions
    assert fix_all.kind == "source.fixAll.cglint"
    fix_all = await editor.resolve(fix_all)
    remaining = await editor.change(editor.apply(fix_all.edit))
    # the safe fix (CG001: drop the nested @tf.function) is applied, the unsafe ones are not
    assert {d.code for d in diags} - {d.code for d in remaining} == {"CG001"}
    assert "    @tf.function\n" not in editor.text


@pytest.mark.asyncio(loop_scope="module")
async def test_a_safe_fix_is_the_preferred_quick_fix(editor):
    (cg001,) = [d for d in await editor.open(editor.scratch, SEED.read_text()) if d.code == "CG001"]
    (fix,) = [a for a in await editor.code_actions(cg001) if a.title.startswith("Fix CG001")]
    assert fix.is_preferred
    fix = await editor.resolve(fix)
    assert "CG001" not in {d.code for d in await editor.change(editor.apply(fix.edit))}


@pytest.mark.asyncio(loop_scope="module")
async def test_fix_all_is_not_offered_without_safe_fixes(editor):
    (d,) = await editor.open(editor.scratch, (ROOT / "fixtures" / "rules" / "cg007_bad.py").read_text())
    assert d.code == "CG007"  # a rule without a fix
    assert [a.title for a in await editor.code_actions(d)] == ["Suppress CG007 on this line (# noqa: CG007)"]
    assert await editor.code_actions(d, only=["source.fixAll"]) == []


# -- configuration ------------------------------------------------------------------------

@pytest.mark.asyncio(loop_scope="module")
async def test_workspace_pyproject_selects_the_rules(editor, tmp_path):
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[tool.cglint]\nignore = ["CG005"]\n')
    module = project / "pkg" / "ops.py"
    module.write_text(SEED.read_text())
    diags = await editor.open(module)
    assert {d.code for d in diags} == {d["code"] for d in cli_json(module, cwd=project)} == {"CG001", "CG002", "CG004"}


@pytest.mark.asyncio(loop_scope="module")
async def test_an_edited_pyproject_takes_effect(vscode, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    config = project / "pyproject.toml"
    config.write_text('[tool.cglint]\nignore = ["CG005"]\n')
    module = project / "ops.py"
    module.write_text(BAD)
    assert await vscode.open(module) == []
    before = len(vscode.published)
    config.write_text('[tool.cglint]\nignore = []\n')
    vscode.client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(config.as_uri())))

    async def republished():
        while True:
            fresh = [p for p in vscode.published[before:] if p.uri == vscode.uri]
            if fresh:
                return list(fresh[-1].diagnostics)
            await asyncio.sleep(0.01)

    assert [d.code for d in await asyncio.wait_for(republished(), 20)] == ["CG005"]


@pytest.mark.asyncio(loop_scope="module")
async def test_an_edited_tensorflow_alias_takes_effect_without_a_restart(vscode, tmp_path):
    """`tensorflow-aliases` decides which modules are TensorFlow: a live server that has linted
    a file with the old aliases lints it with the new ones once pyproject.toml changes (the
    aliases are resolved with the settings, not remembered for the process)."""
    project = tmp_path / "project"
    project.mkdir()
    config = project / "pyproject.toml"
    config.write_text("[tool.cglint]\ntensorflow-aliases = []\n")
    module = project / "ops.py"
    module.write_text(BAD.replace("import tensorflow as tf", "import tfcompat as tf"))
    assert await vscode.open(module) == []
    assert cli_json(module, cwd=project) == []
    before = len(vscode.published)
    config.write_text('[tool.cglint]\ntensorflow-aliases = ["tfcompat"]\n')
    vscode.client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(changes=[lsp.FileEvent(
        config.as_uri(), lsp.FileChangeType.Changed)]))

    async def republished():
        while True:
            fresh = [p for p in vscode.published[before:] if p.uri == vscode.uri]
            if fresh:
                return list(fresh[-1].diagnostics)
            await asyncio.sleep(0.01)

    codes = [d.code for d in await asyncio.wait_for(republished(), 20)]
    assert codes == [d["code"] for d in cli_json(module, cwd=project)] == ["CG005"]


# -- the process --------------------------------------------------------------------------

def test_importing_the_server_does_not_import_tensorflow():
    code = "import sys, cglint.lsp.server, cglint.flake8_plugin; print('tensorflow' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV)
    assert run.stdout.strip() == "False", run.stderr


def test_cglint_lsp_is_a_subcommand_and_a_path_named_lsp_stays_reachable(tmp_path):
    (tmp_path / "lsp").mkdir()
    (tmp_path / "lsp" / "ops.py").write_text(BAD)
    help_run = subprocess.run([sys.executable, "-m", "cglint", "lsp", "--help"], capture_output=True, text=True,
                              env=ENV, cwd=tmp_path)
    assert help_run.returncode == 0 and "language server" in help_run.stdout
    for spelling in ("./lsp", "lsp/"):
        run = subprocess.run([sys.executable, "-m", "cglint", spelling], capture_output=True, text=True, env=ENV,
                             cwd=tmp_path)
        assert run.returncode == 1 and "CG005" in run.stdout, (spelling, run.stdout, run.stderr)


def test_console_script_and_missing_pygls():
    tomllib = pytest.importorskip("tomllib")
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["cglint-lsp"] == "cglint.lsp:main"
    run = subprocess.run([sys.executable, "-c", "import sys; from cglint.lsp import main; sys.exit(main())",
                          "--version"], capture_output=True, text=True, env=ENV)
    assert run.returncode == 0 and run.stdout.startswith("cglint "), run.stderr
    # Without the `lsp` extra: one line and exit 2, no traceback.
    code = "import sys; sys.modules['pygls'] = None; from cglint.cli import main; sys.exit(main(['lsp']))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV)
    assert run.returncode == 2
    assert run.stderr.startswith("cglint: error: the language server needs pygls") and run.stderr.count("\n") == 1


def test_a_failing_lint_publishes_nothing_and_the_server_keeps_serving(monkeypatch, caplog):
    import asyncio as aio

    from cglint import engine
    from cglint.lsp import server as srv

    ls = srv.CglintServer()
    buffer = srv.Buffer("file:///x.py", BAD, 1, "/x.py")
    ls.buffers[buffer.uri] = buffer

    def boom(*args, **kwargs):
        raise engine.InternalError("/x.py: RecursionError: too deep")

    monkeypatch.setattr(engine, "lint_source", boom)
    monkeypatch.setattr(engine, "analyse", boom)
    sent = []
    monkeypatch.setattr(ls, "text_document_publish_diagnostics", sent.append)

    async def run():
        ls.schedule(buffer, 0)
        await buffer.pending
        monkeypatch.undo()
        monkeypatch.setattr(ls, "text_document_publish_diagnostics", sent.append)
        buffer.text = BAD + "\n"
        ls.schedule(buffer, 0)
        await buffer.pending

    aio.run(run())
    assert "lint failed" in caplog.text
    assert [[d.code for d in p.diagnostics] for p in sent] == [["CG005"]]
