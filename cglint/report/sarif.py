"""`--output-format sarif`: SARIF 2.1.0, as GitHub code scanning and other viewers read it.

One run; `tool.driver.rules` lists every rule (id, name, descriptions, help, helpUri, default
level) and each result points at its rule by `ruleId` and `ruleIndex`. Locations are URIs
relative to `%SRCROOT%` (the repository root, declared in `originalUriBaseIds`); files outside
it get absolute `file:` URIs. In a notebook a region is on the lines of the `.ipynb` file that
hold the cell's code (as the github and gitlab formats place it, so viewers show it in the
file and its diff), without columns (JSON escapes and indentation shift them); its properties
hold the cell (1-based) and the position within it (`cell`, `cellLine`, `cellColumn`,
`cellEndLine`, `cellEndColumn`). Columns count code points (`columnKind`). A fixable finding
carries its fix as `artifactChanges` with one replacement per edit; in a notebook, where a
replacement in the file's JSON cannot be given, the fix is described in `properties.fix`
instead, with its edits in the cell's lines and columns.
"""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from cglint import DOCS_URL, __version__
from cglint.diagnostics import Diagnostic, FileResult

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def rule_help_uri(code: str, name: str) -> str:
    return f"{DOCS_URL}#{code.lower()}-{name}"


def _rules() -> list[dict[str, Any]]:
    from cglint.rules import ALL_RULES

    out = []
    for rule in ALL_RULES:
        doc = inspect.cleandoc(rule.__doc__ or "")
        full = " ".join(line for line in doc.splitlines() if line.strip() and not line.startswith("#"))
        out.append({
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary.replace("`", "")},
            "fullDescription": {"text": full.replace("`", "") or rule.summary},
            "help": {"text": rule.documentation(), "markdown": rule.documentation()},
            "helpUri": rule_help_uri(rule.code, rule.name),
            "defaultConfiguration": {"level": _LEVEL.get(rule.severity, "warning")},
            "properties": {"tags": ["tensorflow", "custom-gradient"]},
        })
    return out


def _location(path: str, root: Path) -> dict[str, Any]:
    absolute = Path(os.path.abspath(path))
    try:
        rel = absolute.relative_to(root)
    except ValueError:
        return {"uri": file_uri(absolute)}
    return {"uri": quote(os.fsencode(rel.as_posix())), "uriBaseId": "%SRCROOT%"}


def file_uri(path: Path) -> str:
    """`file:///...` for an absolute path, percent-encoding its bytes as they are on disk (a
    name that is not UTF-8 reaches Python as surrogates, which `Path.as_uri` cannot encode)."""
    return "file://" + quote(os.fsencode(path.as_posix()))


def _region(line: int, column: int, end_line: int, end_column: int, cell: int | None = None) -> dict[str, Any]:
    # An empty span on one line still ends at its start; a span over lines may end left of it.
    region: dict[str, Any] = {"startLine": line, "startColumn": column, "endLine": end_line,
                              "endColumn": max(end_column, column) if end_line == line else end_column}
    if cell is not None:  # a notebook: lines and columns are within this (1-based) cell
        region["properties"] = {"cell": cell}
    return region


def _notebook_region(result: FileResult, d: Diagnostic) -> dict[str, Any] | None:
    """The region of a notebook finding: the `.ipynb` file's lines, the cell's position in properties."""
    where = {"cell": d.cell, "cellLine": d.line, "cellColumn": d.column, "cellEndLine": d.end_line,
             "cellEndColumn": d.end_column}
    nb = result.notebook
    start = nb.file_line(d.cell, d.line) if nb is not None else None
    if start is None:  # the file's line cannot be told: the position in the cell only
        return {"properties": where}
    end = nb.file_line(d.cell, d.end_line) or start
    return {"startLine": start, "endLine": max(start, end), "properties": where}


def _fixes(result: FileResult, d: Diagnostic, artifact: dict[str, Any]) -> list[dict[str, Any]]:
    if d.fix is None or result.module is None:
        return []
    from cglint.fix import cell_edits, text_edits

    edits = text_edits(result.source, result.module, d.fix)
    if d.cell is not None:
        edits = cell_edits(result, edits)
    if not edits:
        return []
    replacements = [
        {"deletedRegion": _region(e.start_line, e.start_column, e.end_line, e.end_column, getattr(e, "cell", None)),
         "insertedContent": {"text": e.text}}
        for e in edits
    ]
    safety = {"safe": "", "unsafe": " (unsafe: review it)", "display-only": " (suggestion: cglint does not apply it)"}[
        d.fix.applicability]
    return [{"description": {"text": d.fix.description.replace("`", "") + safety},
             "artifactChanges": [{"artifactLocation": artifact, "replacements": replacements}]}]


RUNTIME_RULE = "runtime-check"


def _runtime_results(runtime: list[dict[str, Any]], root: Path, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`--runtime` and `cglint trace`: a custom gradient whose numeric check failed (`mismatch`,
    `error`) is a result of its own at the function's line, whether or not a static rule flagged
    it (a wrong derivative often has no static finding). The rule is added to the table."""
    failing = [r for r in runtime if r.get("verdict") in ("mismatch", "error")]
    if not failing:
        return []
    rules.append({
        "id": RUNTIME_RULE,
        "name": "runtime-check",
        "shortDescription": {"text": "the custom gradient differs from TensorFlow autodiff, or computing it raised"},
        "fullDescription": {"text": "cglint ran the function and compared its custom gradient with TensorFlow's "
                                    "autodiff of the same forward (mismatch), or TensorFlow raised (error)."},
        "helpUri": f"{DOCS_URL}#runtime-mode-confirm-findings-numerically",
        "defaultConfiguration": {"level": "error"},
        "properties": {"tags": ["tensorflow", "custom-gradient", "runtime"]},
    })
    index = len(rules) - 1
    out = []
    for r in failing:
        against = f" vs {r['reference']}" if r.get("reference") else ""
        out.append({
            "ruleId": RUNTIME_RULE,
            "ruleIndex": index,
            "level": "error",
            "message": {"text": f"{r['function']}: {r['verdict']}{against}: {r.get('detail') or ''}".rstrip(": ")},
            "locations": [{"physicalLocation": {
                "artifactLocation": _location(r["path"], root),
                "region": {"startLine": max(1, int(r.get("line") or 1))},
            }}],
            "properties": {"runtime": {k: r.get(k) for k in ("verdict", "reference", "max_rel_error", "detail",
                                                             "checked") if k in r}},
        })
    return out


def render(results: list[FileResult], context=None) -> str:
    from cglint.report.context import Context

    context = context or Context()
    root = Path(os.path.abspath(context.root))
    rules = _rules()
    index = {r["id"]: i for i, r in enumerate(rules)}
    out_results = []
    for result in results:
        for d in result.diagnostics:
            artifact = _location(d.path, root)
            entry: dict[str, Any] = {
                "ruleId": d.code,
                "ruleIndex": index.get(d.code, -1),
                "level": _LEVEL.get(d.severity, "warning"),
                "message": {"text": d.message},
                "locations": [{"physicalLocation": {
                    "artifactLocation": artifact,
                    "region": _region(d.line, d.column, d.end_line, d.end_column, d.cell),
                }}],
            }
            if entry["ruleIndex"] < 0:
                del entry["ruleIndex"]
            if d.cell is not None:
                region = _notebook_region(result, d)
                location = entry["locations"][0]["physicalLocation"]
                location["region"] = region
                if "startLine" not in region:
                    location.pop("region")
                    entry["properties"] = {"cell": region["properties"]}
            fixes = _fixes(result, d, artifact)
            if fixes and d.cell is not None:  # cell coordinates: described, not a replacement in the file
                entry.setdefault("properties", {})["fix"] = {
                    "description": fixes[0]["description"]["text"],
                    "edits": [{"region": r["deletedRegion"], "text": r["insertedContent"]["text"]}
                              for r in fixes[0]["artifactChanges"][0]["replacements"]]}
            elif fixes:
                entry["fixes"] = fixes
            if d.runtime is not None:
                entry.setdefault("properties", {})["runtime"] = d.runtime
            out_results.append(entry)
    if context.runtime is not None:
        out_results += _runtime_results(context.runtime, root, rules)
    run_properties = {"properties": {"runtime": context.runtime}} if context.runtime is not None else {}
    sarif = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "cglint",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": DOCS_URL,
                "rules": rules,
            }},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": file_uri(root).rstrip("/") + "/"}},
            "columnKind": "unicodeCodePoints",
            "results": out_results,
            **run_properties,
        }],
    }
    return json.dumps(sarif, indent=2) + "\n"
