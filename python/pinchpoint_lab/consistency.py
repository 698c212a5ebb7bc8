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
_SEEN_IN = re.compile(r"seen first in (\S+)'s time")
_FLAT = re.compile(r"(\S+)'s own time \(self \+ queue\)[^;]* does not grow")
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
    found += _seen_where_flat(verdict)
    return found


def _seen_where_flat(verdict: dict) -> list[str]:
    """A finding named as seen in a tier's time whose own evidence says that time is flat."""
    problems = []
    for finding in verdict.get("findings") or []:
        seen = _SEEN_IN.search(finding.get("name") or "")
        flat = {m.group(1) for line in finding.get("evidence") or [] if (m := _FLAT.search(line))}
        if seen is not None and seen.group(1) in flat:
            problems.append(f"{finding['name']}: its evidence says {seen.group(1)}'s time is flat")
    return problems


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
