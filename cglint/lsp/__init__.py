"""`cglint lsp` / `cglint-lsp`: the language server, over stdio.

This module only parses the command line; the server (and pygls) load when it starts, so
`import cglint.lsp` stays cheap and never needs the `lsp` extra.
"""

from __future__ import annotations

import argparse
import logging
import sys

from cglint import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="cglint lsp",
        description="Run the cglint language server on stdin/stdout (for editors; see README, 'Editor setup').",
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
    try:
        from cglint.lsp.server import BoundedStdin, build_server
    except ImportError as exc:
        print(f"cglint: error: the language server needs pygls 2.x (pip install 'cglint[lsp]'): {exc}",
              file=sys.stderr)
        return 2
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(),
                        format="cglint-lsp %(levelname)s %(name)s: %(message)s")
    server = build_server()
    if args.debounce_ms is not None:
        server.debounce = args.debounce_ms / 1000
    server.start_io(BoundedStdin(sys.stdin.buffer))
    return 0
