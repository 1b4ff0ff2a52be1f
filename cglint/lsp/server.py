"""The cglint language server (pygls 2.x, stdio).

What the editor gets:
- diagnostics for the buffer's text (not the file on disk): pushed on open, save and change
  (no server-side debounce by default; a newer edit supersedes a queued lint and stops a
  running one), or pulled with `textDocument/diagnostic` when the client pulls and can be
  refreshed (`pulls`; then nothing is pushed; a cancelled pull's lint still lands in the
  cache). Each lint re-parses
  only the statements an edit changed (`cglint.lsp.incremental`);
- code actions: a rule's fix as a quick fix (preferred when safe), "suppress with
  `# noqa: CGxxx`" (merged into an existing noqa comment), and `source.fixAll.cglint`;
- hover on a code in a `# noqa:` comment: the rule's documentation;
- an edited pyproject.toml re-lints the open buffers: watched by the client where it can
  (dynamic registration), else polled; pull clients get `workspace/diagnostic/refresh`, push
  clients the new diagnostics.

Positions cross `text.LineIndex` (code points <-> the negotiated encoding). Rules come from
`_workspace_rules`, fixes for "fix all" from `_fix_all`: the one place each for configuration
and fixing. A lint that raises is logged and publishes nothing; the server keeps serving.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method

from cglint import __version__, config, engine
from cglint import fix as fixing
from cglint.diagnostics import Diagnostic, FileResult
from cglint.lsp import text as txt
from cglint.lsp.diagnostics import as_json, doc_url, workspace_rules as _workspace_rules  # noqa: F401 - doc_url: tests
from cglint.lsp.text import fs_path
from cglint.rules import RULES_BY_CODE, Rule, select_rules

log = logging.getLogger("cglint.lsp")

# Push mode: how long a change waits for the next one before it is linted. 0 by default: the
# client already waits between keystrokes (Neovim 150 ms, `debounce_text_changes`), so a
# server-side wait would only add to it; a change arriving while a lint runs waits for that
# lint and supersedes any change queued before it, so lints never pile up. Set with
# `initializationOptions: {"debounceMs": N}` or `cglint lsp --debounce-ms N`.
DEBOUNCE_SECONDS = 0.0
# Clients that cannot watch files for the server (Neovim on Linux) get pyproject.toml polled.
CONFIG_POLL_SECONDS = 1.0
FIX_ALL_KIND = "source.fixAll.cglint"
CONFIG_FILES = config.CONFIG_FILES


# -- configuration and fixing: one plug point each ---------------------------------------

def _config_key(path: str | None) -> tuple[tuple[str, int, int], ...]:
    """What the configuration of `path` depends on (`config.config_key` of its directory). A
    changed key means the settings must be resolved (and the buffer linted) again; no file
    watcher is needed, so every client gets it."""
    if path is None:
        return ()
    try:
        return config.config_key(Path(path).parent)
    except (OSError, ValueError):
        return ()


def _fix_all(source: str, path: str, rules: list[type[Rule]]) -> str:
    """The buffer with every safe fix applied, as `cglint --fix` would write it (a buffer over
    the size limit is not fixed, as `cglint --fix` leaves such a file alone)."""
    if txt.too_large(source) is not None:
        return source
    return fixing.fix_source(source, path, rules).new_source


# -- the log: a message the client got wrong is one line ----------------------------------------

# The root causes pygls meets reading a client's message that is not JSON, not UTF-8, nested
# beyond the parser or not of the protocol's types: the client's error, logged as one line.
_INPUT_ERRORS = (ValueError, RecursionError, JsonRpcException)  # JSONDecodeError, UnicodeDecodeError included


def _root_cause(formatted: str) -> str | None:
    """The last `SomeError: message` line of a formatted traceback (cattrs nests its causes
    in `|`-indented groups)."""
    for line in reversed(formatted.splitlines()):
        name, sep, message = line.strip(" \t|").partition(": ")
        if sep and name.endswith(("Error", "Exception")) and name.replace(".", "").replace("_", "").isalnum():
            return f"{name}: {message}"
    return None


class OneLineInputErrors(logging.Filter):
    """pygls logs a message it cannot read with a traceback ("Unable to deserialize message"
    with the formatted traceback, then "Unable to handle message" with the exception): both
    become one line naming the cause, as any other error on an input does. A failure in
    cglint's own handlers keeps its traceback (pygls logs those under other messages)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("pygls"):
            return True
        if record.msg == "Unable to deserialize message\n%s" and record.args:
            record.msg, record.args = "cannot read a message (dropped): %s", (
                _root_cause(str(record.args[0])) or "its params are not of the protocol's types",)
        elif record.msg == "Unable to handle message" and record.exc_info and isinstance(record.exc_info[1], _INPUT_ERRORS):
            exc = record.exc_info[1]
            record.msg, record.args = "cannot read a message (dropped): %s: %s", (type(exc).__name__, str(exc)[:200])
            record.exc_info = record.exc_text = None
        return True


def log_input_errors_as_one_line() -> None:
    for handler in logging.getLogger().handlers:
        handler.addFilter(OneLineInputErrors())


# -- per-buffer state -------------------------------------------------------------------------

@dataclass
class Lint:
    """One lint of one buffer text under one configuration."""

    text: str
    key: Any
    rules: list[type[Rule]]
    result: FileResult  # from statements parsed alone: positions and fixes' metadata, no full tree
    diagnostics: list[lsp.Diagnostic]  # parallel to result.diagnostics
    result_id: str
    full: FileResult | None = None  # the same lint on the full tree, made when a fix is applied
    fixed: dict[int, str | None] = field(default_factory=dict)  # fixed_text's answers
    incremental: Any = None  # cglint.lsp.incremental.Lint: the statements, for fixes

    def fixed_text(self, index: int) -> str | None:
        """The text with diagnostic `index`'s fix applied (runs on the lint thread), or None
        when `cglint --fix` would refuse it (display-only, or the result does not parse or
        compile: `cglint.fix.validated`, the CLI's check). Fixes replace nodes of the full
        tree, so the full lint is made once, on first use."""
        if index not in self.fixed:
            self.fixed[index] = self._fixed_text(index)
        return self.fixed[index]

    def _fixed_text(self, index: int) -> str | None:
        # The statement the fix edits is applied alone and spliced in (cglint.lsp.incremental);
        # whatever that cannot do is fixed on the full tree, as `cglint --fix` does.
        if self.incremental is not None:
            return self.incremental.fixed_text(self.result.diagnostics[index], self.rules)
        d = self.result.diagnostics[index]
        if self.full is None:
            self.full = engine.lint_source(self.text, self.result.path, self.rules)
        same = [f for f in self.full.diagnostics if f.is_fixable(unsafe=True) and (f.code, f.line, f.column,
                f.end_line, f.end_column, f.message) == (d.code, d.line, d.column, d.end_line, d.end_column, d.message)]
        if not same or self.full.module is None:
            return None
        return fixing.validated(self.full.module, same[0].fix, self.result.path)[0]  # type: ignore[arg-type]


@dataclass
class Buffer:
    uri: str
    text: str
    version: int | None
    path: str | None
    lint: Lint | None = None
    published: tuple[int | None, str] | None = None  # (version, result_id) last pushed
    pending: asyncio.Task | None = field(default=None, repr=False)
    # The lint running or queued for (text, config key): requests for the same text share it,
    # and a cancelled request leaves it to finish into `lint` instead of linting again.
    inflight: tuple[str, Any, asyncio.Future] | None = field(default=None, repr=False)


def pulls(caps: lsp.ClientCapabilities) -> bool:
    """Whether a client gets pull diagnostics: it pulls (`textDocument.diagnostic`) and can be
    asked to pull again (`workspace.diagnostics.refreshSupport`). Neovim 0.10 and 0.11 pull
    without refresh: a configuration change could not reach them until the user types (pushed
    diagnostics go to another namespace and leave the pulled ones on screen), so they are pushed
    to, and `diagnosticProvider` is not offered to them (cglint.lsp.fast_start says the same)."""
    text, workspace = caps.text_document, caps.workspace
    return bool(text and text.diagnostic is not None and workspace and workspace.diagnostics
                and workspace.diagnostics.refresh_support)


class _Protocol(LanguageServerProtocol):
    @lsp_method(lsp.INITIALIZE)
    def lsp_initialize(self, params: lsp.InitializeParams):  # type: ignore[override]
        result = yield from super().lsp_initialize(params)
        if not pulls(params.capabilities):  # pushed to (see `pulls`)
            result.capabilities.diagnostic_provider = None
        return result

    def structure_message(self, data):  # type: ignore[override]
        # pygls drops a request whose params do not deserialize (the client would wait forever):
        # answer it with the JSON-RPC error (-32602 invalid params) instead.
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if isinstance(data, dict) and "id" in data and "method" in data:
                self._send_response(data["id"], error=exc.to_response_error())
            raise

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: lsp.DidChangeTextDocumentParams):  # type: ignore[override]
        # pygls would apply the change to its own copy of the text first, splitting lines with
        # str.splitlines (which also breaks at form feeds and U+2028) and clamping the change's
        # positions in place; cglint keeps its own buffers (Buffer), so hand the change over
        # untouched.
        if (handler := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None


class CglintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("cglint", __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
                         protocol_cls=_Protocol)
        self.buffers: dict[str, Buffer] = {}
        # One lint at a time: runs queue up behind each other and a superseded one is
        # dropped before it starts (see _lint_now).
        self.linter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cglint-lint")
        # Fixes (a quick fix's edit, fix all) run on their own thread: a lint never waits behind one.
        self.fixer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cglint-fix")
        self.debounce = DEBOUNCE_SECONDS
        self.watch_registration = False  # the client can watch files for us
        self._config_seen: dict[str, Any] = {}
        self._poller: asyncio.Task | None = None
        self.encoding = txt.UTF16
        self.pull = False
        self.document_changes = False
        self.resolve_edits = False
        self._rules: dict[Any, list[type[Rule]]] = {}
        self._generation = 0
        self.lints = 0  # lints that ran to completion (tests: cancelled work is not redone)
        from cglint.lsp.incremental import Analysis

        self.analysis = Analysis()

    # -- linting ------------------------------------------------------------------------

    def rules_for(self, path: str | None) -> list[type[Rule]]:
        key = (path, _config_key(path))
        if key not in self._rules:
            try:
                self._rules[key] = _workspace_rules(path)
            except Exception as exc:  # a broken pyproject.toml: say so once, lint with defaults
                message = f"cglint: cannot read the configuration for {path}: {exc}"
                log.warning("%s", message)
                self.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=message))
                self._rules[key] = select_rules()
        return self._rules[key]

    def _lint_now(self, buffer: Buffer, text: str, key: Any, rules: list[type[Rule]]) -> Lint | None:
        """Runs on the lint thread. None when the buffer moved on meanwhile (before or during
        the lint: superseded work stops) or the lint failed (logged; nothing is published)."""

        def superseded() -> bool:
            return self.buffers.get(buffer.uri) is not buffer or buffer.text is not text

        if superseded():
            return None
        try:
            path = buffer.path or buffer.uri
            started = time.perf_counter()
            # What `engine.lint_source(text, path, rules)` gives, re-parsing only
            # the statements this edit changed (cglint.lsp.incremental).
            previous = buffer.lint.incremental if buffer.lint is not None else None
            if (reason := txt.too_large(text)) is not None:  # as a file over the limit: one CG000
                incremental, result = None, engine.unreadable(path, rules, reason)
            else:
                incremental = self.analysis.lint(text, path, rules, superseded, previous)
                if incremental is None:
                    log.debug("lint of %s v%s superseded", buffer.uri, buffer.version)
                    return None
                result = incremental.result
            index = txt.LineIndex(text)
            diagnostics = [self.to_lsp(d, index) for d in result.diagnostics]
        except Exception:
            log.exception("lint failed for %s", buffer.uri)
            return None
        self._generation += 1
        self.lints += 1
        lint = Lint(text, key, rules, result, diagnostics, f"{self._generation}", incremental=incremental)
        if buffer.text is text:
            buffer.lint = lint  # kept even when the request that asked for it was cancelled
        log.debug("linted %s in %.1f ms", buffer.uri, (time.perf_counter() - started) * 1000)
        return lint

    async def current_lint(self, buffer: Buffer) -> Lint | None:
        """The lint of the buffer's current text: cached when nothing changed, shared with a
        lint of the same text already running."""
        text, key = buffer.text, _config_key(buffer.path)
        cached = buffer.lint
        if cached is not None and cached.text is text and cached.key == key:
            return cached
        running = buffer.inflight
        if running is not None and running[0] is text and running[1] == key and not running[2].done():
            future = running[2]
        else:
            rules = self.rules_for(buffer.path)  # here, not on the lint thread: it may message the client
            future = asyncio.get_running_loop().run_in_executor(self.linter, self._lint_now, buffer, text, key, rules)
            buffer.inflight = (text, key, future)
        # Shielded: a cancelled request ($/cancelRequest, or a newer edit in push mode) stops
        # waiting, the lint itself finishes or notices it is superseded.
        return await asyncio.shield(future)

    def to_lsp(self, d: Diagnostic, index: txt.LineIndex) -> lsp.Diagnostic:
        """`cglint.lsp.diagnostics.as_json`'s fields, as lsprotocol's type (one conversion)."""
        j = as_json(d, index, self.encoding)
        (start, end), href = (j["range"]["start"], j["range"]["end"]), j.get("codeDescription", {}).get("href")
        return lsp.Diagnostic(
            range=lsp.Range(lsp.Position(start["line"], start["character"]), lsp.Position(end["line"], end["character"])),
            message=j["message"], severity=lsp.DiagnosticSeverity(j["severity"]), code=j["code"],
            code_description=lsp.CodeDescription(href=href) if href else None, source=j["source"],
        )

    # -- push -------------------------------------------------------------------------------

    def schedule(self, buffer: Buffer, delay: float) -> None:
        """Lint and push after `delay`, replacing any lint still pending for the buffer (push
        mode; a pull client asks for them)."""
        if self.pull:
            return
        if buffer.pending is not None:
            buffer.pending.cancel()
        buffer.pending = asyncio.get_running_loop().create_task(self._push_later(buffer, delay))

    async def _push_later(self, buffer: Buffer, delay: float) -> None:
        try:
            if delay:
                await asyncio.sleep(delay)
            version = buffer.version
            lint = await self.current_lint(buffer)
            if lint is None or self.buffers.get(buffer.uri) is not buffer or buffer.text is not lint.text:
                return  # failed, closed, or superseded by a newer edit
            if buffer.published == (version, lint.result_id):
                return
            buffer.published = (version, lint.result_id)
            self.text_document_publish_diagnostics(
                lsp.PublishDiagnosticsParams(uri=buffer.uri, diagnostics=lint.diagnostics, version=version))
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("publishing diagnostics failed for %s", buffer.uri)

    def config_changed(self) -> None:
        """A pyproject.toml changed: every open buffer's diagnostics may have. Pull clients are
        asked to pull again (`workspace/diagnostic/refresh`: every pull client can be, `pulls`);
        to the others the new diagnostics are pushed."""
        self._rules.clear()
        self._config_seen = {uri: _config_key(b.path) for uri, b in self.buffers.items()}
        if self.pull:
            self.workspace_diagnostic_refresh(None)
            return
        for buffer in self.buffers.values():
            self.schedule(buffer, 0)

    async def poll_config(self) -> None:
        """For clients that cannot watch files: notice an edited pyproject.toml by its mtime."""
        while True:
            await asyncio.sleep(CONFIG_POLL_SECONDS)
            changed = False
            for uri, buffer in list(self.buffers.items()):
                try:  # one buffer's failure never stops the watch for the others
                    key = _config_key(buffer.path)
                except Exception:
                    log.exception("watching the configuration of %s failed", uri)
                    continue
                if self._config_seen.setdefault(uri, key) != key:
                    changed = True
            if changed:
                try:
                    log.info("configuration changed; linting the open buffers again")
                    self.config_changed()
                except Exception:
                    log.exception("linting after a configuration change failed")

    # -- code actions -------------------------------------------------------------------

    def text_edit(self, buffer: Buffer, old: str, new: str) -> lsp.WorkspaceEdit | None:
        edit = txt.line_edit(old, new)
        if edit is None:
            return None
        start, end, replacement = edit
        index = txt.LineIndex(old)
        a, b = index.position(start, self.encoding), index.position(end, self.encoding)
        return self.workspace_edit(buffer, [lsp.TextEdit(
            range=lsp.Range(lsp.Position(a.line, a.character), lsp.Position(b.line, b.character)),
            new_text=replacement)])

    def workspace_edit(self, buffer: Buffer, edits: list[lsp.TextEdit]) -> lsp.WorkspaceEdit:
        if self.document_changes:
            return lsp.WorkspaceEdit(document_changes=[lsp.TextDocumentEdit(
                text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=buffer.uri, version=buffer.version),
                edits=edits)])
        return lsp.WorkspaceEdit(changes={buffer.uri: edits})

    async def quick_fix(self, buffer: Buffer, lint: Lint, index: int) -> lsp.CodeAction | None:
        """Diagnostic `index`'s fix as a quick fix. Its edit costs a full parse and a code
        generation of the module, so clients that resolve code actions get it only when they
        pick the action."""
        d, diag = lint.result.diagnostics[index], lint.diagnostics[index]
        if d.fix is None or not d.is_fixable(unsafe=True):  # display-only: never applied
            return None
        title = f"Fix {d.code}: {d.fix.description}" + ("" if d.fix.safe else " (unsafe: review the change)")
        action = lsp.CodeAction(title=title, kind=lsp.CodeActionKind.QuickFix, diagnostics=[diag],
                                is_preferred=d.is_fixable(unsafe=False))
        # Offered only when the CLI would apply it: the same validation first (memoised, so a
        # resolve that follows costs nothing more).
        edit = await self.fix_edit(buffer, lint, index)
        if edit is None:
            return None
        if self.resolve_edits:
            action.data = {"uri": buffer.uri, "version": buffer.version, "fix": index}
            return action
        action.edit = edit
        return action

    async def fix_edit(self, buffer: Buffer, lint: Lint, index: int) -> lsp.WorkspaceEdit | None:
        loop = asyncio.get_running_loop()
        try:
            fixed = await loop.run_in_executor(self.fixer, lint.fixed_text, index)
        except Exception:
            log.exception("fix for %s failed", lint.result.diagnostics[index].code)
            return None
        return self.text_edit(buffer, lint.text, fixed) if fixed is not None else None

    def suppress(self, buffer: Buffer, lint: Lint, index: int) -> lsp.CodeAction | None:
        d, diag = lint.result.diagnostics[index], lint.diagnostics[index]
        if lint.incremental is None and txt.too_large(lint.text) is not None:
            # Never parsed: its one CG000 is the buffer's, not a line's, and finding where a
            # comment could go would tokenize 10 MB on the event loop (90 s under load).
            return None
        # Where a comment can go needs the tokenizer: over the line's top-level statement, not
        # the whole buffer (a statement starts with no string or bracket open, so its tokens are
        # those of the whole file there).
        source, line = lint.text, d.line
        for chunk in getattr(lint.incremental, "chunks", None) or ():
            if chunk.first_line <= line < chunk.first_line + chunk.lines:
                source, line = chunk.text, line - chunk.first_line + 1
                break
        where = txt.noqa_edit(source, line, d.code)
        if where is None:
            return None
        start, end, insert = where
        index = txt.LineIndex(lint.text)
        a = index.from_cglint(d.line, start + 1, self.encoding)
        b = index.from_cglint(d.line, end + 1, self.encoding)
        edit = self.workspace_edit(buffer, [lsp.TextEdit(
            range=lsp.Range(lsp.Position(a.line, a.character), lsp.Position(b.line, b.character)), new_text=insert)])
        return lsp.CodeAction(title=f"Suppress {d.code} on this line (# noqa: {d.code})",
                              kind=lsp.CodeActionKind.QuickFix, diagnostics=[diag], edit=edit)

    async def fix_all_edit(self, buffer: Buffer) -> lsp.WorkspaceEdit | None:
        text, rules = buffer.text, self.rules_for(buffer.path)
        loop = asyncio.get_running_loop()
        try:
            fixed = await loop.run_in_executor(self.fixer, _fix_all, text, buffer.path or buffer.uri, rules)
        except Exception:
            log.exception("fix all failed for %s", buffer.uri)
            return None
        if buffer.text is not text:
            return None  # edited meanwhile: the edit would not apply
        return self.text_edit(buffer, text, fixed)


def _wanted(kind: str, only: Sequence[str] | None) -> bool:
    """Code action kinds are hierarchical: asking for `source` includes `source.fixAll.cglint`."""
    if only is None:
        return True
    return any(not k or kind == k or kind.startswith(k + ".") for k in only)


def _identity(d: lsp.Diagnostic) -> tuple:
    r = d.range
    return (str(d.code), r.start.line, r.start.character, r.end.line, r.end.character, d.message)


def _overlaps(a: lsp.Range, b: lsp.Range) -> bool:
    def key(p: lsp.Position) -> tuple[int, int]:
        return (p.line, p.character)

    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)


def build_server() -> CglintServer:
    server = CglintServer()
    from cglint.lsp import notebook as notebooks

    notebooks.register(server)  # notebookDocument/* sync: diagnostics per cell (cglint/lsp/notebook.py)

    @server.feature(lsp.INITIALIZE)
    def initialize(ls: CglintServer, params: lsp.InitializeParams) -> None:
        caps = params.capabilities
        ls.encoding = str(getattr(ls.workspace.position_encoding, "value", ls.workspace.position_encoding) or txt.UTF16)
        text_caps = caps.text_document
        ls.pull = pulls(caps)
        workspace = caps.workspace
        ls.document_changes = bool(workspace and workspace.workspace_edit
                                   and workspace.workspace_edit.document_changes)
        resolve = text_caps and text_caps.code_action and text_caps.code_action.resolve_support
        ls.resolve_edits = bool(resolve and "edit" in resolve.properties)
        watched = workspace and workspace.did_change_watched_files
        ls.watch_registration = bool(watched and watched.dynamic_registration)
        options = params.initialization_options if isinstance(params.initialization_options, dict) else {}
        debounce = options.get("debounceMs")
        if isinstance(debounce, (int, float)) and not isinstance(debounce, bool) and 0 <= debounce <= 10_000:
            ls.debounce = debounce / 1000
        log.info("cglint %s: position encoding %s, %s diagnostics", __version__, ls.encoding,
                 "pull" if ls.pull else "push")

    # -- document sync: plain functions, so changes apply in the order they arrive ----------

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: CglintServer, params: lsp.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        buffer = Buffer(doc.uri, doc.text, doc.version, fs_path(doc.uri))
        old = ls.buffers.pop(doc.uri, None)
        if old is not None and old.pending is not None:
            old.pending.cancel()
        ls.buffers[doc.uri] = buffer
        ls._config_seen[doc.uri] = _config_key(buffer.path)
        ls.schedule(buffer, 0)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: CglintServer, params: lsp.DidChangeTextDocumentParams) -> None:
        buffer = ls.buffers.get(params.text_document.uri)
        if buffer is None:
            return
        text = buffer.text
        for change in params.content_changes:
            if isinstance(change, lsp.TextDocumentContentChangePartial):
                start = txt.Position(change.range.start.line, change.range.start.character)
                end = txt.Position(change.range.end.line, change.range.end.character)
                text = txt.apply_change(text, start, end, change.text, ls.encoding)
            else:
                text = change.text
        buffer.text, buffer.version = text, params.text_document.version
        ls.schedule(buffer, ls.debounce)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE, lsp.SaveOptions(include_text=False))
    def did_save(ls: CglintServer, params: lsp.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        if uri.endswith(tuple("/" + name for name in CONFIG_FILES)):
            ls.config_changed()
        buffer = ls.buffers.get(uri)
        if buffer is not None:
            ls.schedule(buffer, 0)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: CglintServer, params: lsp.DidCloseTextDocumentParams) -> None:
        buffer = ls.buffers.pop(params.text_document.uri, None)
        if buffer is None:
            return
        if buffer.pending is not None:
            buffer.pending.cancel()
        if not ls.pull:
            ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=buffer.uri, diagnostics=[]))

    @server.feature(lsp.INITIALIZED)
    async def initialized(ls: CglintServer, params: lsp.InitializedParams) -> None:
        # pyproject.toml decides the rules: have the client watch it, or watch it ourselves.
        if ls.watch_registration:
            try:
                await ls.client_register_capability_async(lsp.RegistrationParams(registrations=[lsp.Registration(
                    id="cglint-config", method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                    register_options=lsp.DidChangeWatchedFilesRegistrationOptions(
                        watchers=[lsp.FileSystemWatcher(glob_pattern=f"**/{name}") for name in CONFIG_FILES]))]))
                return
            except Exception:
                log.warning("the client refused to watch %s; polling it instead", ", ".join(CONFIG_FILES))
        ls._poller = asyncio.get_running_loop().create_task(ls.poll_config())

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched_files(ls: CglintServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        if any(c.uri.endswith(tuple("/" + name for name in CONFIG_FILES)) for c in params.changes):
            ls.config_changed()

    # -- pull ---------------------------------------------------------------------------

    @server.feature(lsp.TEXT_DOCUMENT_DIAGNOSTIC,
                    lsp.DiagnosticOptions(identifier="cglint", inter_file_dependencies=False, workspace_diagnostics=False))
    async def diagnostic(ls: CglintServer, params: lsp.DocumentDiagnosticParams) -> lsp.DocumentDiagnosticReport:
        buffer = ls.buffers.get(params.text_document.uri)
        if buffer is None and (cell := await notebooks.pull(ls, params.text_document.uri)) is not None:
            return lsp.RelatedFullDocumentDiagnosticReport(items=cell)  # a notebook cell
        lint = await ls.current_lint(buffer) if buffer is not None else None
        if lint is None:
            return lsp.RelatedFullDocumentDiagnosticReport(items=[])
        if params.previous_result_id == lint.result_id:
            return lsp.RelatedUnchangedDocumentDiagnosticReport(result_id=lint.result_id)
        return lsp.RelatedFullDocumentDiagnosticReport(items=lint.diagnostics, result_id=lint.result_id)

    # -- code actions -------------------------------------------------------------------

    @server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(
        code_action_kinds=[lsp.CodeActionKind.QuickFix, FIX_ALL_KIND], resolve_provider=True))
    async def code_action(ls: CglintServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction] | None:
        buffer = ls.buffers.get(params.text_document.uri)
        if buffer is None:
            return None
        lint = await ls.current_lint(buffer)
        if lint is None or buffer.text is not lint.text:
            return None
        only = params.context.only
        actions: list[lsp.CodeAction] = []
        if _wanted(lsp.CodeActionKind.QuickFix, only):
            # The diagnostics under the cursor or selection, and those the client names in
            # `context.diagnostics` (Neovim and VS Code send every diagnostic on the cursor
            # line), matched to this lint by code, range and message (as ruff's server does).
            named = {_identity(d) for d in params.context.diagnostics or () if d.source in (None, "cglint")}
            here = [i for i, diag in enumerate(lint.diagnostics)
                    if _overlaps(diag.range, params.range) or _identity(diag) in named]
            fixes = [await ls.quick_fix(buffer, lint, i) for i in here]
            noqas = [ls.suppress(buffer, lint, i) for i in here]
            actions += [a for a in fixes + noqas if a is not None]
        if _wanted(FIX_ALL_KIND, only) and any(d.is_fixable(unsafe=False) for d in lint.result.diagnostics):
            action = lsp.CodeAction(title="cglint: fix all safely fixable problems", kind=FIX_ALL_KIND,
                                    data={"uri": buffer.uri, "version": buffer.version})
            if not ls.resolve_edits:
                action.edit = await ls.fix_all_edit(buffer)
            if action.edit is not None or ls.resolve_edits:
                actions.append(action)
        return actions

    @server.feature(lsp.CODE_ACTION_RESOLVE)
    async def resolve(ls: CglintServer, action: lsp.CodeAction) -> lsp.CodeAction:
        data = action.data if isinstance(action.data, dict) else {}
        buffer = ls.buffers.get(data.get("uri", ""))
        if buffer is None or buffer.version != data.get("version"):
            return action  # the document changed since: no edit (the client asks again)
        if action.kind == FIX_ALL_KIND:
            action.edit = await ls.fix_all_edit(buffer)
        elif isinstance(data.get("fix"), int):
            lint = buffer.lint
            if lint is not None and lint.text is buffer.text and 0 <= data["fix"] < len(lint.diagnostics):
                action.edit = await ls.fix_edit(buffer, lint, data["fix"])
        return action

    # -- hover ----------------------------------------------------------------------------

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(ls: CglintServer, params: lsp.HoverParams) -> lsp.Hover | None:
        buffer = ls.buffers.get(params.text_document.uri)
        if buffer is None:
            return None
        index = txt.LineIndex(buffer.text)
        line = index.line(params.position.line)
        column = txt.code_points(line, params.position.character, ls.encoding)
        found = txt.noqa_code_at(line, column)
        if found is None or found[0] not in RULES_BY_CODE:
            return None
        code, start, end = found
        a = index.from_cglint(params.position.line + 1, start + 1, ls.encoding)
        b = index.from_cglint(params.position.line + 1, end + 1, ls.encoding)
        return lsp.Hover(
            contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=RULES_BY_CODE[code].documentation()),
            range=lsp.Range(lsp.Position(a.line, a.character), lsp.Position(b.line, b.character)))

    @server.feature(lsp.SHUTDOWN)
    def shutdown(ls: CglintServer, params: Any) -> None:
        for buffer in ls.buffers.values():
            if buffer.pending is not None:
                buffer.pending.cancel()
        if ls._poller is not None:
            ls._poller.cancel()
        ls.linter.shutdown(wait=False, cancel_futures=True)
        ls.fixer.shutdown(wait=False, cancel_futures=True)

    return server
