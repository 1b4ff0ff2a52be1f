"""Answer `initialize` before the server's libraries have loaded.

lsprotocol, pygls and libcst take ~0.7 s to import, and an editor waits for the `initialize`
answer before it sends anything else (ruff's server answers in a few milliseconds). So
`cglint lsp` starts importing the server on a thread, reads the client's first message itself,
and answers it with the capabilities pygls would compute (`result`, built from the client's
capabilities the way pygls's builder does; tests/test_lsp_startup.py compares the two for
several editors). pygls then gets the same `initialize` replayed, so the server's own state
(encoding, pull mode, options) is set as usual, and its second answer is dropped.
Only json here: this module must stay cheap to import.
"""

from __future__ import annotations

import json
import logging
import re
from typing import BinaryIO

from cglint import __version__

_ENCODINGS = ("utf-8", "utf-16", "utf-32")  # pygls's supported position encodings
_NOTEBOOK_SYNC = {"notebookSelector": [{"notebook": "*", "cells": [{"language": "python"}]}], "save": True}


def read_message(stream: BinaryIO) -> tuple[bytes, dict | None]:
    """One JSON-RPC message from `stream`: its raw bytes (headers included) and its body
    (None when it is not a JSON object, or the stream ended)."""
    raw = b""
    length = None
    while True:
        line = stream.readline()
        raw += line
        if not line:
            return raw, None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            try:
                length = int(value.strip())
            except ValueError:
                return raw, None
    if length is None or not 0 < length <= MAX_MESSAGE_BYTES:
        return raw, None
    body = stream.read(length)
    raw += body
    try:
        message = json.loads(body)
    except (ValueError, RecursionError, MemoryError):  # not JSON, or nested beyond the parser
        return raw, None  # pygls gets it as it came, and answers or drops it
    return raw, message if isinstance(message, dict) else None


def frame(message: dict) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def result(params: dict) -> dict:
    """The `InitializeResult` cglint's pygls server answers to these `initialize` params."""
    caps = params.get("capabilities") if isinstance(params.get("capabilities"), dict) else {}
    encoding = "utf-16"
    for offered in (caps.get("general") or {}).get("positionEncodings") or ():
        if offered in _ENCODINGS:  # the client's preference first, as pygls chooses
            encoding = offered
            break
    sync = ((caps.get("textDocument") or {}).get("synchronization")) or {}
    text_sync: dict = {"openClose": True, "change": 2, "save": {"includeText": False}}
    for key in ("willSave", "willSaveWaitUntil"):  # false where the client says anything (no handler)
        if sync.get(key) is not None:
            text_sync[key] = False
    server = {
        "positionEncoding": encoding,
        "textDocumentSync": text_sync,
        "hoverProvider": True,
        "codeActionProvider": {"codeActionKinds": ["quickfix", "source.fixAll.cglint"], "resolveProvider": True},
        "executeCommandProvider": {"commands": []},
        "workspace": {"workspaceFolders": {"supported": True, "changeNotifications": True}, "fileOperations": {}},
    }
    workspace = caps.get("workspace") or {}
    if (caps.get("textDocument") or {}).get("diagnostic") is not None and (
            (workspace.get("diagnostics") or {}).get("refreshSupport")):  # server.pulls: pull diagnostics
        server["diagnosticProvider"] = {"identifier": "cglint", "interFileDependencies": False,
                                        "workspaceDiagnostics": False}
    if caps.get("notebookDocument") is not None:
        server["notebookDocumentSync"] = _NOTEBOOK_SYNC
    return {"capabilities": server, "serverInfo": {"name": "cglint", "version": __version__}}


def first_diagnostics(stdin: BinaryIO, stdout: BinaryIO, encoding: str, engine_ready, failed: list) -> bytes:
    """For a push client, the diagnostics of the first Python file it opens, published while
    pygls is still loading (its libraries take most of the start-up): the messages up to that
    `didOpen` (usually `initialized`, then the `didOpen`) are read here, returned to be replayed
    to pygls, which lints the file again and publishes the same diagnostics (cglint.lsp.
    diagnostics.as_json, both times). Anything else first (a request, a notebook) ends this."""
    raw = b""
    for _ in range(4):
        data, message = read_message(stdin)
        raw += data
        if not isinstance(message, dict) or message.get("method") == "initialized":
            if message is None:
                return raw
            continue
        if message.get("method") != "textDocument/didOpen":
            return raw
        params = message.get("params")
        doc = params.get("textDocument") if isinstance(params, dict) else None
        if not isinstance(doc, dict) or not isinstance(doc.get("uri"), str) or not isinstance(doc.get("text"), str) or doc.get("languageId") != "python":
            return raw
        engine_ready.wait()
        if failed:
            return raw
        try:
            published = _lint(doc, encoding)
        except Exception:  # noqa: BLE001 - pygls lints it again and says what went wrong
            return raw
        stdout.write(frame({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": published}))
        stdout.flush()
        return raw
    return raw


def _lint(doc: dict, encoding: str) -> dict:
    from cglint import engine
    from cglint.lsp import diagnostics, text as txt

    path = txt.fs_path(doc["uri"])
    text = doc["text"]
    rules = diagnostics.workspace_rules(path)
    reason = txt.too_large(text)
    result = engine.unreadable(path or doc["uri"], rules, reason) if reason else engine.lint_source(
        text, path or doc["uri"], rules)
    index = txt.LineIndex(text)
    out = {"uri": doc["uri"], "diagnostics": [diagnostics.as_json(d, index, encoding) for d in result.diagnostics]}
    if isinstance(doc.get("version"), int):
        out["version"] = doc["version"]
    return out


# The largest message the server reads: a client's Content-Length beyond it (10**12 killed the
# server with a MemoryError) is a framing error, logged and skipped.
MAX_MESSAGE_BYTES = 256 * 2**20
_CONTENT_LENGTH = re.compile(rb"Content-Length:[ \t]*(-?\d+)", re.IGNORECASE)


class BoundedStdin:
    """stdin for pygls' reader with hostile framing neutralised: a Content-Length over
    MAX_MESSAGE_BYTES or below 1 is dropped (logged; the body, if any, is skipped as junk), a
    header glued to junk (`{}Content-Length: 60`) is found again, header lines are bounded. The
    server stays up and answers the next well-framed message."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw

    def readline(self, *args) -> bytes:
        line = self.raw.readline(64 * 1024)
        match = _CONTENT_LENGTH.search(line)
        if match is None:
            return line
        length = int(match.group(1))
        if not 0 < length <= MAX_MESSAGE_BYTES:
            logging.getLogger("cglint.lsp").error(
                "a message header with Content-Length %s (limit %d); message dropped", length, MAX_MESSAGE_BYTES)
            return b"X-Dropped: \r\n"
        return b"Content-Length: %d\r\n" % length

    def read(self, n: int = -1) -> bytes:
        return self.raw.read(n)


class Replay:
    """A binary stream that yields `prefix` first, then `stream` (what pygls reads)."""

    def __init__(self, prefix: bytes, stream: BinaryIO) -> None:
        self.prefix, self.stream = prefix, stream

    def readline(self, *args) -> bytes:
        if self.prefix:
            end = self.prefix.find(b"\n") + 1 or len(self.prefix)
            line, self.prefix = self.prefix[:end], self.prefix[end:]
            return line
        return self.stream.readline(*args)

    def read(self, n: int = -1) -> bytes:
        if self.prefix:
            take = len(self.prefix) if n < 0 else min(n, len(self.prefix))
            data, self.prefix = self.prefix[:take], self.prefix[take:]
            if n < 0 or len(data) < n:
                data += self.stream.read(-1 if n < 0 else n - len(data))
            return data
        return self.stream.read(n)


class DropAnswer:
    """pygls's writer target: every message goes through except the answer to request `id`
    (answered already), which is dropped once. pygls writes one whole message per call."""

    def __init__(self, stream: BinaryIO, request_id) -> None:
        self.stream, self.request_id, self.dropped = stream, request_id, False

    def write(self, data: bytes) -> int:
        if not self.dropped:
            body = data.split(b"\r\n\r\n", 1)[-1]
            try:
                message = json.loads(body)
            except ValueError:
                message = None
            if isinstance(message, dict) and message.get("id") == self.request_id and "method" not in message:
                self.dropped = True
                return len(data)
        return self.stream.write(data)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)
