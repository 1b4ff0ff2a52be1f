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
    parser.add_argument("--version", action="version", version=f"cglint {__version__}")
    args = parser.parse_args(argv)
    try:
        from cglint.lsp.server import build_server
    except ImportError as exc:
        print(f"cglint: error: the language server needs pygls 2.x (pip install 'cglint[lsp]'): {exc}",
              file=sys.stderr)
        return 2
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(),
                        format="cglint-lsp %(levelname)s %(name)s: %(message)s")
    build_server().start_io()
    return 0
