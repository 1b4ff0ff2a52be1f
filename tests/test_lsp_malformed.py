"""A malformed request gets a JSON-RPC error response, never silence (issue 14)."""

import json
import subprocess
import sys


def _frame(obj):
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_request_with_invalid_params_gets_an_error_response():
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}, "processId": None, "rootUri": None}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover",
         "params": {"textDocument": {"uri": "file:///x.py"}, "position": "not a position"}},
        {"jsonrpc": "2.0", "id": 3, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    ]
    run = subprocess.run([sys.executable, "-m", "cglint", "lsp"], input=b"".join(map(_frame, messages)),
                         capture_output=True, timeout=120)
    replies = [json.loads(part.split(b"\r\n\r\n", 1)[1]) for part in run.stdout.split(b"Content-Length: ")[1:]]
    by_id = {r.get("id"): r for r in replies if "id" in r}
    assert by_id[2]["error"]["code"] == -32602, replies
    assert 3 in by_id  # and it went on answering
