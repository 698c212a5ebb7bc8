"""The decision as verdict.json has it: the findings judged, ranked by how sure each is, the
first one the bottleneck, and the headline that names it."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from pinchpoint.analyze.causes import Judged
from pinchpoint.analyze.context import start_text
from pinchpoint.rundir.shapes import FindingJson, StepJson


class Decision(TypedDict):
    """verdict.json's keys the decision writes (`rundir.shapes.VerdictJson`'s)."""

    bottleneck: dict[str, Any] | None
    headline: str
    generator: dict[str, Any]
    findings: list[FindingJson]
    # The latency grew, but no tier's own time explains it.
    unattributed: NotRequired[bool]
    workers_estimate: NotRequired[list[dict[str, Any]]]


class _Rate(TypedDict, total=False):
    starts_at_rate: float


class _Request(TypedDict, total=False):
    request: str


class _Tail(TypedDict, total=False):
    at_lowest_load: bool
    # Added after the decision (analyze/database/evidence.py, analyze/redis.py).
    database: dict[str, Any]
    redis: dict[str, Any]


def finding_json(judged: Judged, tail: _Tail | None = None) -> FindingJson:
    f = judged.finding
    rate: _Rate = {"starts_at_rate": f.starts_at_rate} if f.starts_at_rate is not None else {}
    request: _Request = {"request": judged.request} if judged.request is not None else {}
    return {
        "component": f.component,
        "resource": f.resource,
        "starts_at_users": f.starts_at_users,
        **rate,
        "evidence": list(f.evidence),
        "summary": f.summary,
        **request,
        "name": f.name,
        "confidence": round(judged.confidence, 2),
        **(tail or _Tail()),
    }


def findings_json(found: list[Judged]) -> list[FindingJson]:
    return [finding_json(j) for j in found]


def decided(found: list[Judged], generator: dict[str, Any], steps: list[StepJson]) -> Decision:
    """The first finding is the bottleneck; the others follow it by confidence, one to a
    component and resource."""
    first, *others = found
    others.sort(key=lambda j: j.confidence, reverse=True)
    lowest_step = steps[0]
    at_lowest = first.finding.starts_at_users == lowest_step["users"] and (
        lowest_step.get("kind", "users") == "users"
    )
    # Saturated already at the lightest load: where it begins lies below what was tested.
    lowest: _Tail = {"at_lowest_load": True} if at_lowest else {}
    findings = [finding_json(first, lowest)]
    seen = {(first.finding.component, first.finding.resource)}
    for judged in others:
        key = (judged.finding.component, judged.finding.resource)
        if key not in seen:
            seen.add(key)
            findings.append(finding_json(judged))
    bottleneck: dict[str, Any] = {k: v for k, v in findings[0].items() if k != "name"}
    name = first.finding.name
    if at_lowest:
        headline = f"Bottleneck: {name} at or below {start_text(bottleneck)}, " + _lower(
            lowest_step
        )
    else:
        headline = f"Bottleneck: {name} from {start_text(bottleneck)}"
    return {
        "bottleneck": bottleneck,
        "headline": headline,
        "generator": generator,
        "findings": findings,
    }


def _lower(lowest: StepJson) -> str:
    """What would show where a limit already reached at the lightest step begins."""
    if lowest["users"] > 1:
        return "the lowest load tested: start lower to see where it begins"
    return (
        "the lightest load a closed loop has: an arrival rate below one user's "
        f"{lowest['throughput_rps']:.0f} req/s (an open-loop plan) would show where it begins"
    )
