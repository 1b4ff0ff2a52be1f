"""Output formats. Each formatter takes the file results and returns the text to print."""

from __future__ import annotations

from typing import Callable

from cglint.diagnostics import FileResult
from cglint.report import json_format, text

FORMATTERS: dict[str, Callable[[list[FileResult]], str]] = {
    "text": text.render,
    "json": json_format.render,
}
