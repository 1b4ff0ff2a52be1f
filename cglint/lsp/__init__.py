"""`cglint lsp` / `cglint-lsp`: the language server, over stdio.

This module only parses the command line; the server (and pygls) load when it starts, so
`import cglint.lsp` stays cheap and never needs the `lsp` extra.
"""

from __future__ import annotations

import logging
import sys

from cglint import __version__


def main(argv: list[str] | None = None) -> int:
    from cglint.usage import Parser

    parser = Parser(
        prog="cglint lsp",
        description="Run the cglint language server on stdin/stdout (for editors; see docs/editor.md).",
    )
    parser.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="warning",
                        help="what to log on stderr (editors show it in the server's output; default: warning)")
    parser.add_argument("--debounce-ms", type=float, default=None, metavar="MS",
                        help="push mode: wait this long after a change for the next one before linting (default 0: "
                             "the client's own debounce is enough; initializationOptions.debounceMs overrides)")
    parser.add_argument("--version", action="version", version=f"cglint {__version__}")
    args = parser.parse_args(argv)
    if args.debounce_ms is not None and not 0 <= args.debounce_ms <= 10_000:
        parser.error("--debounce-ms must be between 0 and 10000")
    import importlib.util

    if importlib.util.find_spec("pygls") is None or importlib.util.find_spec("lsprotocol") is None:
        return _missing("pygls is not installed")
    # The server's libraries load on a thread while the client's `initialize` is read and
    # answered here (fast_start): the editor is not kept waiting for the imports.
    import threading

    from cglint.lsp import fast_start

    loaded: list[BaseException] = []
    engine_ready, first_done = threading.Event(), threading.Event()
    loader = threading.Thread(target=_load, args=(loaded, engine_ready, first_done), name="cglint-lsp-import",
                              daemon=True)
    loader.start()
    stdin, stdout = fast_start.BoundedStdin(sys.stdin.buffer), sys.stdout.buffer
    raw, first = fast_start.read_message(stdin)
    answered = isinstance(first, dict) and first.get("method") == "initialize" and "id" in first
    answer = None
    if answered:
        params = first.get("params") if isinstance(first.get("params"), dict) else {}
        try:
            answer = fast_start.result(params)
        except Exception:  # noqa: BLE001 - capabilities of an odd shape: pygls answers instead
            answered = False
    if answered and answer is not None:
        stdout.write(fast_start.frame({"jsonrpc": "2.0", "id": first["id"], "result": answer}))
        stdout.flush()
        if "diagnosticProvider" not in answer["capabilities"]:  # a push client: the first file, now
            raw += fast_start.first_diagnostics(stdin, stdout, answer["capabilities"]["positionEncoding"],
                                                engine_ready, loaded)
    first_done.set()
    loader.join()
    if loaded:
        return _missing(str(loaded[0]))
    from cglint.lsp.server import build_server, log_input_errors_as_one_line

    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(),
                        format="cglint-lsp %(levelname)s %(name)s: %(message)s")
    log_input_errors_as_one_line()
    server = build_server()
    if args.debounce_ms is not None:
        server.debounce = args.debounce_ms / 1000
    server.start_io(fast_start.Replay(raw, stdin),
                    fast_start.DropAnswer(stdout, first["id"]) if answered else stdout)
    return 0


def _load(failed: list, engine_ready, first_done) -> None:
    try:
        # What the first lint needs first (libcst and the rules), then pygls and lsprotocol.
        from cglint.lsp import diagnostics  # noqa: F401
        from cglint import engine  # noqa: F401
    except ImportError as exc:
        failed.append(exc)
    finally:
        engine_ready.set()
    # pygls's import would share the interpreter with the first lint: it waits for the lint (or
    # for a client that opens no file at once).
    first_done.wait(timeout=1.0)
    try:
        import cglint.lsp.server  # noqa: F401 - pygls, lsprotocol
    except ImportError as exc:
        failed.append(exc)


def _missing(why: str) -> int:
    # The pip line is run as printed by tests/test_install_recipes.py (cglint is not on the package index).
    import shlex

    print(f"cglint: error: the language server needs pygls 2.x: {why}. Install it into this environment: "
          f"{shlex.quote(sys.executable)} -m pip install 'pygls>=2.1,<3'", file=sys.stderr)
    return 2
