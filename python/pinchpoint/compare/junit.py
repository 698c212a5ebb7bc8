"""The gate's checks as a JUnit XML report (`compare --gate --junit FILE`): one test
suite, one test case per check, a `failure` for each check that failed. CI systems
(GitHub Actions' test reporters, GitLab, Jenkins) show it as a test run."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from pinchpoint.compare.gate import Check

SUITE = "pinchpoint gate"
CLASSNAME = "pinchpoint.compare.gate"


def junit_xml(checks: list[Check], base: str, new: str) -> str:
    """The report of `checks` of NEW (`new`) against BASE (`base`)."""
    failures = sum(not c.passed for c in checks)
    suites = ET.Element("testsuites", name=SUITE, tests=str(len(checks)), failures=str(failures))
    suite = ET.SubElement(
        suites, "testsuite", name=SUITE, tests=str(len(checks)), failures=str(failures),
        errors="0", skipped="0",
    )  # fmt: skip
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="base", value=base)
    ET.SubElement(properties, "property", name="new", value=new)
    for check in checks:
        case = ET.SubElement(suite, "testcase", classname=CLASSNAME, name=check.name, time="0")
        if not check.passed:
            failure = ET.SubElement(case, "failure", message=check.line(), type="regression")
            failure.text = check.line()
        else:
            ET.SubElement(case, "system-out").text = check.line()
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode")


def write_junit(path: Path, checks: list[Check], base: str, new: str) -> None:
    path.write_text(junit_xml(checks, base, new) + "\n", encoding="utf-8")
