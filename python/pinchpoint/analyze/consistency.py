"""What a verdict says against its own evidence: the contradictions a reader would see.

A verdict is consistent when its bottleneck's evidence says it explains a good part of the
growth, no time said to grow fell, and no load level is quoted twice for two different
steps. The bench and the tests run this over every verdict they make.
"""

from __future__ import annotations

import re

from pinchpoint.analyze.thresholds import (
    BOTTLENECK_SHARE,
    FINDING_SHARE,
)

_SHARE = re.compile(
    r"(\S+)'s own time \(self \+ queue\)[^,;]* grows by (-?[\d.]+) ms, (\d+)% of the growth"
)
_FROM_TO = re.compile(r"grows from (-?[\d.]+) ms at [^;]*? to (-?[\d.]+) ms")
_ARROW = re.compile(r"grows[^;.]*?\((?:p50|mean) (-?[\d.]+) ms → (-?[\d.]+) ms\)")
_NEGATIVE = re.compile(r"grows? by -[\d.]+ ms")
_TWICE = re.compile(r"at (\d+(?:\.\d+)? (?:users?|req/s))[^;:]*?, [\d.]+ at \1\b")


def contradictions(verdict: dict) -> list[str]:
    """Each place the verdict's words contradict its own numbers; [] when none."""
    found = []
    texts = [("headline", verdict.get("headline") or "")]
    bottleneck = verdict.get("bottleneck")
    for i, finding in enumerate(verdict.get("findings") or []):
        least = BOTTLENECK_SHARE if i == 0 and bottleneck else FINDING_SHARE
        for line in finding.get("evidence") or []:
            texts.append((f"finding {finding.get('name')}", line))
            share = _SHARE.search(line)
            if share is not None and int(share.group(3)) < least and finding["resource"] == "time":
                found.append(
                    f"{finding.get('name')}: named for its time, which carries only "
                    f"{share.group(3)}% of the growth: {line}"
                )
        texts.append((f"finding {finding.get('name')}", finding.get("summary") or ""))
    for where, text in texts:
        found += [f"{where}: {problem}: {text}" for problem in _text_problems(text)]
    return found


def _text_problems(text: str) -> list[str]:
    problems = []
    for pattern in (_FROM_TO, _ARROW):
        for a, b in pattern.findall(text):
            if float(b) <= float(a):
                problems.append(f"says it grows from {a} to {b} ms")
    if _NEGATIVE.search(text):
        problems.append("says a time grows by a negative amount")
    if _TWICE.search(text):
        problems.append("quotes the same load twice")
    return problems
