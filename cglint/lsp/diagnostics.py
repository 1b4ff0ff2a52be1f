"""Diagnostics as the language server sends them, without pygls or lsprotocol: the JSON of an
LSP `Diagnostic`, rule documentation links, and the rules a buffer is linted with. The server
builds its lsprotocol objects from `as_json`, and `cglint lsp`'s fast start publishes the first
diagnostics with it before pygls has loaded, so both say the same thing."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from cglint import __version__, config
from cglint.diagnostics import Diagnostic
from cglint.lsp import text as txt
from cglint.rules import RULES_BY_CODE, Rule

log = logging.getLogger("cglint.lsp")

SEVERITY = {"error": 1, "warning": 2, "info": 3}  # LSP's DiagnosticSeverity


def as_json(d: Diagnostic, index: txt.LineIndex, encoding: str) -> dict:
    start = index.from_cglint(d.line, d.column, encoding)
    end = index.from_cglint(d.end_line, d.end_column, encoding)
    out = {"range": {"start": {"line": start.line, "character": start.character},
                     "end": {"line": end.line, "character": end.character}},
           "message": d.editor_message,  # a short first line, then the details (as the CLI)
           "severity": SEVERITY.get(d.severity, 1), "code": d.code, "source": "cglint"}
    href = doc_url(d.code)
    if href:
        out["codeDescription"] = {"href": href}
    return out


def doc_url(code: str) -> str | None:
    """`codeDescription.href` for a rule: a Markdown file holding exactly what
    `cglint --explain CODE` prints, written once per installed version under the user cache
    (`$XDG_CACHE_HOME/cglint/docs/<version>/<CODE>.md`), so the link works offline and always
    matches the rules that produced the diagnostic. None if it cannot be written."""
    rule = RULES_BY_CODE.get(code)
    if rule is None:
        return None
    cached = _DOC_URLS.get(code)
    if cached is not None:
        return cached or None
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cglint" / "docs" / __version__
    target = base / f"{code}.md"
    try:
        body = rule.documentation()
        if not target.exists() or target.read_text(encoding="utf-8") != body:
            base.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(body, encoding="utf-8")
            os.replace(tmp, target)  # atomic: a concurrent reader never sees half a file
        url = target.resolve().as_uri()
    except OSError as exc:
        log.warning("cannot write rule documentation to %s: %s", target, exc)
        url = ""
    _DOC_URLS[code] = url
    return url or None


_DOC_URLS: dict[str, str] = {}



def workspace_rules(path: str | None) -> list[type[Rule]]:
    """The rules `cglint` would run on `path`: [tool.cglint] from the nearest pyproject.toml,
    read by `cglint.config` as the CLI reads it. Raises config.ConfigError for a broken file."""
    start = str(Path(path).parent) if path else os.getcwd()
    settings = config.load(start)
    return list(settings.rules_for(path or os.path.join(start, "<untitled>.py")))
