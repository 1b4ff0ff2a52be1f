"""`cglint lsp` answers `initialize` before its libraries load (cglint.lsp.fast_start): the
answer must be the one pygls would have given for the same client, and it must come first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from lsprotocol import types as lsp
from pygls.protocol import default_converter
from pytest_lsp import client_capabilities

from cglint.lsp import fast_start
from support import ENV

CLIENTS = ["visual-studio-code@1.65.2", "neovim@0.11.0", "neovim@0.10.0", "neovim@0.8.0", "neovim@0.7.0",
           "emacs@29.1"]
HANDMADE = [
    {},
    {"general": {"positionEncodings": ["utf-32", "utf-8"]}, "notebookDocument": {"synchronization": {}},
     "textDocument": {"synchronization": {"willSave": True, "willSaveWaitUntil": False}}},
    {"general": {"positionEncodings": ["latin-1"]}, "textDocument": {"synchronization": {"didSave": True}}},
]


def pygls_answer(params: dict) -> dict:
    """What the server's pygls protocol computes for this `initialize`, in-process."""
    from cglint.lsp.server import build_server

    converter = default_converter()
    server = build_server()
    steps = server.protocol.lsp_initialize(converter.structure(params, lsp.InitializeParams))
    try:  # a generator: it hands the server's own `initialize` handler over, then answers
        handler, args, kwargs = next(steps)
        while True:
            handler, args, kwargs = steps.send(handler(*args, **(kwargs or {})))
    except StopIteration as done:
        return json.loads(json.dumps(converter.unstructure(done.value)))


@pytest.mark.parametrize("capabilities", [*CLIENTS, *range(len(HANDMADE))])
def test_the_early_answer_is_what_pygls_answers(capabilities, tmp_path):
    converter = default_converter()
    caps = (converter.unstructure(client_capabilities(capabilities)) if isinstance(capabilities, str)
            else HANDMADE[capabilities])
    params = {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": caps}
    assert json.loads(json.dumps(fast_start.result(params))) == pygls_answer(params)


def _send(proc, message: dict) -> None:
    proc.stdin.write(fast_start.frame(message))
    proc.stdin.flush()


def test_initialize_is_answered_before_the_libraries_load_and_the_server_then_serves(tmp_path):
    env = {k: v for k, v in ENV.items() if k != "PYTHONUNBUFFERED"}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import cglint.lsp.server"], check=True, env=env)
    import_time = time.perf_counter() - started

    (tmp_path / "ops.py").write_text("import tensorflow as tf\n\n\n@tf.custom_gradient\ndef op(x):\n"
                                     "    y = tf.tan(x)\n    return y, lambda dy: dy / tf.square(tf.cos(y))\n")
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "cglint", "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=tmp_path, env=env)
    try:
        _send(proc, {"jsonrpc": "2.0", "id": 7, "method": "initialize",
                     "params": {"processId": os.getpid(), "rootUri": tmp_path.as_uri(), "capabilities": {}}})
        _, answer = fast_start.read_message(proc.stdout)
        answered = time.perf_counter() - started
        assert answer["id"] == 7 and answer["result"]["serverInfo"]["name"] == "cglint"
        # The libraries alone take longer than the whole start up to the answer.
        assert answered < import_time / 2, (answered, import_time)
        uri = (tmp_path / "ops.py").as_uri()
        _send(proc, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
        _send(proc, {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": (tmp_path / "ops.py").read_text()}}})
        seen = []

        def until(done):
            while True:
                _, message = fast_start.read_message(proc.stdout)
                assert message is not None, seen
                seen.append(message)
                if done(message):
                    return

        until(lambda m: m.get("method") == "textDocument/publishDiagnostics")
        _send(proc, {"jsonrpc": "2.0", "id": 8, "method": "shutdown"})
        until(lambda m: m.get("id") == 8)
        # pygls's own answer to `initialize` is not sent a second time; the lint arrives.
        assert not [m for m in seen if m.get("id") == 7]
        published = [m for m in seen if m.get("method") == "textDocument/publishDiagnostics"]
        assert [d["code"] for d in published[0]["params"]["diagnostics"]] == ["CG005"]
        _send(proc, {"jsonrpc": "2.0", "method": "exit"})
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_push_clients_first_file_is_published_early_and_pygls_says_the_same(tmp_path):
    """The first didOpen of a push client is linted while pygls loads (fast_start.first_diagnostics)
    and published; pygls, replaying it, publishes the same diagnostics again (one conversion,
    cglint.lsp.diagnostics.as_json)."""
    source = ("import tensorflow as tf\n\n\n@tf.custom_gradient\ndef op(x):\n"
              "    y = tf.tan(x)\n    return y, lambda dy: dy / tf.square(tf.cos(y))  # é\n")
    (tmp_path / "ops.py").write_text(source)
    proc = subprocess.Popen([sys.executable, "-m", "cglint", "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=tmp_path, env=ENV)
    try:
        _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "processId": os.getpid(), "rootUri": tmp_path.as_uri(),
            "capabilities": {"general": {"positionEncodings": ["utf-16"]}}}})
        assert fast_start.read_message(proc.stdout)[1]["id"] == 1
        uri = (tmp_path / "ops.py").as_uri()
        _send(proc, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
        _send(proc, {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": uri, "languageId": "python", "version": 3, "text": source}}})
        import queue
        import threading

        inbox: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [inbox.put(fast_start.read_message(proc.stdout)[1]) for _ in range(20)],
                         daemon=True).start()
        published = []
        deadline = time.monotonic() + 120
        while len(published) < 2 and time.monotonic() < deadline:
            try:
                message = inbox.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if isinstance(message, dict) and message.get("method") == "textDocument/publishDiagnostics":
                published.append(message["params"])
        assert len(published) == 2, published  # the early one, then pygls's
        assert published[0] == published[1]
        assert published[0]["version"] == 3 and [d["code"] for d in published[0]["diagnostics"]] == ["CG005"]
        _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        while (inbox.get(timeout=60) or {}).get("id") != 2:
            pass
        _send(proc, {"jsonrpc": "2.0", "method": "exit"})
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
