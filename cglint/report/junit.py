"""`--output-format junit`: JUnit XML for CI test reports. One testcase per checked file
(passing when clean), one `<failure>` per finding in it."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from cglint.diagnostics import FileResult

# XML 1.0 cannot carry most control characters, even escaped.
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: str) -> str:
    return _INVALID_XML.sub("\ufffd", text)


def render(results: list[FileResult], context=None) -> str:
    failed_files = sum(1 for r in results if r.diagnostics)
    suites = ET.Element("testsuites", name="cglint", tests=str(len(results)), failures=str(failed_files), errors="0")
    suite = ET.SubElement(suites, "testsuite", name="cglint", tests=str(len(results)), failures=str(failed_files),
                          errors="0", skipped="0")
    for result in results:
        case = ET.SubElement(suite, "testcase", name=_clean(result.path), classname="cglint", file=_clean(result.path))
        for d in result.diagnostics:
            failure = ET.SubElement(case, "failure", message=_clean(f"{d.code} {d.message}"), type=d.code)
            failure.text = _clean(f"{d.location}: {d.code} ({d.name}) {d.message}")
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
