"""What bench/fuzz_hostile.py's stdin, flake8 and language-server channels found, one test per
class, and the language-server channel itself at a fixed seed (so the channel cannot rot).

Real processes throughout: `python -m cglint`, `python -m flake8` with the installed plugin,
and `cglint lsp` driven by the fuzzer's own JSON-RPC client (bench/fuzz_hostile.LspServer).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
OP = ("import tensorflow as tf\n\n@tf.custom_gradient\ndef op(x):\n    y = tf.math.tan(x)\n"
      "    def grad(dy):\n        return dy * tf.math.cos(y)\n    return y, grad\n")  # one CG005, line 7


def _fuzz():
    spec = importlib.util.spec_from_file_location("fuzz_hostile", ROOT / "bench" / "fuzz_hostile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


needs_lsp = pytest.mark.skipif(importlib.util.find_spec("pygls") is None, reason="the language server needs pygls")


# ---- flake8: a broken [tool.cglint] is a finding, never a plugin crash ---------------------------------


@pytest.mark.parametrize("config", [
    b'[tool.cglint]\nunknown-key = 1\n',
    b'[tool.cglint]\nextend-exclude = [' + b'[' * 2000 + b']' * 2000 + b']\n',
    b'[tool.cglint]\nselect = ["CG"]\n\xff\xfe',
], ids=["unknown-key", "nested-2000-deep", "not-utf8"])
def test_flake8_with_a_broken_configuration_reports_it_on_each_file(tmp_path, config):
    """Found by the flake8 channel: ConfigError escaped the plugin, flake8 died with a traceback
    ("There was a critical error") and checked nothing."""
    (tmp_path / "pyproject.toml").write_bytes(config)
    (tmp_path / "op.py").write_text(OP)
    (tmp_path / "other.py").write_text("x = 1\n")
    run = subprocess.run([sys.executable, "-m", "flake8", "--select", "CG", "-j", "1", "--", "op.py", "other.py"],
                         capture_output=True, text=True, cwd=tmp_path, env=ENV, timeout=300)
    assert "Traceback" not in run.stderr and "critical error" not in run.stderr, run.stderr[-2000:]
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    for name in ("op.py", "other.py"):
        assert [x for x in lines if x.startswith(f"{name}:1:1: CG000 cannot read the cglint configuration: ")], lines


# ---- text output: a name that is not UTF-8 under a strict stream --------------------------------


@pytest.mark.parametrize("encoding", ["utf-8:strict", "ascii:strict"])
def test_a_file_name_that_is_not_utf8_is_reported_under_a_strict_output_stream(tmp_path, encoding):
    """Found by the stdin channel: under a UTF-8 locale other than C.UTF-8 (stdout strict), a
    name that is not UTF-8 ended the text report with a UnicodeEncodeError and exit 1 looked
    like findings. Its bytes are written as they are (as `ls` shows them); what an ASCII stream
    cannot carry is backslash-escaped."""
    name = b"bad\xff\xc3\xa9.py"
    (tmp_path / os.fsdecode(name)).write_text(OP)
    env = {**ENV, "PYTHONIOENCODING": encoding}
    run = subprocess.run([sys.executable, "-m", "cglint", "--no-cache", "--", os.fsdecode(name)], capture_output=True,
                         cwd=tmp_path, env=env, timeout=300)
    assert b"Traceback" not in run.stderr, run.stderr[-2000:]
    assert run.returncode == 1
    shown = b"bad\xff\xc3\xa9.py" if encoding.startswith("utf-8") else b"bad\xff\\xe9.py"
    assert run.stdout.startswith(shown + b":7:21: CG005"), run.stdout[:300]
    run = subprocess.run([sys.executable, "-m", "cglint", "--no-cache", "--stdin-filename", os.fsdecode(name), "-"],
                         input=OP.encode(), capture_output=True, cwd=tmp_path, env=env, timeout=300)
    assert b"Traceback" not in run.stderr and run.returncode == 1 and run.stdout.startswith(shown + b":7:21: CG005"), run


# ---- the language server ---------------------------------------------------------------------------


@pytest.fixture
def server(tmp_path):
    (tmp_path / ".git").mkdir()
    client = _fuzz().LspServer(tmp_path, tmp_path / "server.log")
    yield client
    client.close()


@needs_lsp
def test_a_buffer_over_the_file_limit_is_one_cg000_and_never_parsed(server, tmp_path):
    """Found by the LSP channel: an 11 MB buffer was parsed and linted (no answer within a
    minute under load; `cglint` refuses such a file at 10 MB). Now the editor gets what the CLI
    says of the file; a notebook whose cells add up to more gets it on its first cell."""
    from cglint.files import MAX_FILE_BYTES

    uri = (tmp_path / "big.py").as_uri()
    text = OP * (MAX_FILE_BYTES // len(OP) + 1)
    server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})
    assert server.pump(lambda: server.published.get(uri, {}).get("version") == 1, 600)
    diagnostics = server.published[uri]["diagnostics"]
    assert [(d["code"], d["message"]) for d in diagnostics] == [
        ("CG000", "cannot read: more than 10 MB, cglint's limit for one file")], diagnostics
    # A code action on it offers nothing: no `# noqa` line is looked for in a text never parsed
    # (the fuzzer found the server tokenizing all 11 MB on its event loop for one).
    reply = server.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": {
        "start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "context": {"diagnostics": []}},
        timeout=600)
    assert reply is not None and reply["result"] == [], reply
    # One byte under the limit is linted as usual (its first site's CG005 is there).
    server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": OP}]})
    assert server.pump(lambda: server.published.get(uri, {}).get("version") == 2, 600)
    assert [d["code"] for d in server.published[uri]["diagnostics"]] == ["CG005"]
    cells = [f"vscode-notebook-cell:{tmp_path}/nb.ipynb#C{i}" for i in range(2)]
    server.notify("notebookDocument/didOpen", {
        "notebookDocument": {"uri": (tmp_path / "nb.ipynb").as_uri(), "notebookType": "jupyter-notebook", "version": 1,
                             "cells": [{"kind": 2, "document": c} for c in cells]},
        "cellTextDocuments": [{"uri": c, "languageId": "python", "version": 1, "text": text[: len(text) // 2 + 10]}
                              for c in cells]})
    reply = server.request("textDocument/diagnostic", {"textDocument": {"uri": cells[0]}}, timeout=600)
    assert [(d["code"], d["message"]) for d in reply["result"]["items"]] == [
        ("CG000", "cannot read: more than 10 MB, cglint's limit for one file")], reply
    assert "Traceback" not in server.new_log()


@needs_lsp
def test_a_message_the_server_cannot_read_is_one_log_line_and_the_server_goes_on(server, tmp_path):
    """Found by the LSP channel: pygls logged every unreadable client message (not JSON, not
    UTF-8, nested beyond the parser, params not of the protocol's types) with a traceback of
    30-60 lines. Each is one line naming the cause; requests still get their error answer."""
    fuzz = _fuzz()
    uri = (tmp_path / "a.py").as_uri()
    server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": OP}})
    junk = [b"{not json", b'{"jsonrpc": "2.0", "method": "textDocument/didChange", "params": \xff\xfe}',
            b"[" * 100000 + b"]",
            b'{"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {"textDocument": {"uri": "%s", '
            b'"version": null}, "contentChanges": [{"text": "x"}]}}' % uri.encode(),
            b'{"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {"textDocument": {"uri": "%s", '
            b'"version": 2}, "contentChanges": [{"range": {"start": {"line": -1, "character": 0}, '
            b'"end": {"line": 0, "character": 0}}, "text": "x"}]}}' % uri.encode()]
    for body in junk:
        server.send_raw(fuzz.frame(body))
    reply = server.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": -1, "character": 0}})
    assert reply["error"]["code"] == -32602, reply  # invalid params, answered
    reply = server.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": {
        "start": {"line": 6, "character": 0}, "end": {"line": 6, "character": 30}}, "context": {"diagnostics": []}})
    assert any("CG005" in a["title"] for a in reply["result"]), reply  # the text is still OP: nothing applied
    log = server.new_log()
    assert "Traceback" not in log and "\n  File " not in log, log
    dropped = [x for x in log.splitlines() if "cannot read a message (dropped)" in x]
    assert len(dropped) >= len(junk), log
    assert any("JSONDecodeError" in x for x in dropped) and any("UnicodeDecodeError" in x for x in dropped), dropped
    assert any("RecursionError" in x for x in dropped), dropped
    assert any("Position.line should be in range" in x for x in dropped), dropped


@needs_lsp
@pytest.mark.parametrize("client", ["push-utf16", "pull-utf8"])
def test_the_fuzzers_language_server_channel_at_a_fixed_seed(tmp_path, client):
    """bench/fuzz_hostile.py's LSP channel, 50 messages at seed 7, for a client that gets
    diagnostics pushed and counts UTF-16 units and for one that pulls and counts UTF-8 bytes:
    edits in and out of bounds, malformed changes, protocol junk, requests; each answered, the
    server alive and its log free of tracebacks, and each session's last diagnostics equal to a
    fresh open of the same text."""
    campaign = _fuzz().run_lsp(7, 50, base=tmp_path, client=client)
    assert campaign.failures == [], campaign.failures
    assert campaign.cases >= 50
    kinds = {kind for kind, (n, _) in campaign.totals.items() if n}
    assert {"edit", "malformed", "protocol", "out-of-bounds", "compare"} <= kinds, campaign.totals
