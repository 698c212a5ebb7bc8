"""One named request served one at a time inside the app (a lock it takes, a
single-threaded section): its throughput stops near 1 ÷ its own shortest time, about one
served at once, while the plan's other requests stay flat."""

from __future__ import annotations

from pinchpoint.analyze.causes.cause import Cause, Finding, Judged, RunAsk
from pinchpoint.analyze.causes.own_time import OWN_TIME
from pinchpoint.analyze.context import load_text, rate_of
from pinchpoint.analyze.per_request import (
    Grown,
    InRequest,
    growing_request,
    request_cause,
)
from pinchpoint.analyze.thresholds import ONE_AT_ONCE, WEAK_EVIDENCE
from pinchpoint.rundir.shapes import EndpointJson, StepJson


def serialized(
    name: str, entry: EndpointJson, tier: str, group: str, onset: StepJson, evidence: list[str]
) -> Finding | None:
    """The finding when the request `name` (its entry of the requests' table) is served
    about one at a time and its throughput stopped; None otherwise."""
    at_once = entry.get("workers")
    if at_once is None or at_once >= ONE_AT_ONCE or entry.get("behaviour") != "synchronous":
        return None
    top = max(entry["steps"], key=lambda s: s["level"])
    summary = (
        f"{name}'s throughput stops near {top['throughput_rps']:.0f} req/s from "
        f"{load_text(onset)} with about {at_once:.1f} served at once, while its time inside "
        f"{tier} grows and the other requests stay flat: the app serves this request one at "
        "a time (a lock it takes, a single-threaded section, a row every such request "
        f"updates). {SERIALIZED.advice}"
    )
    return Finding(
        group, SERIALIZED, onset["users"], evidence,
        f"{name}: serialized inside {group} (about {at_once:.1f} at once)", summary,
        rate_of(onset),
    )  # fmt: skip


def _judge_one_request(ask: RunAsk) -> Judged | None:
    """The one named request whose time grows while the others stay flat, and what limits
    it: how much of the growth it carries, and how strong its cause is, make it sure."""
    grown = growing_request(ask.ctx.endpoints)
    seen = request_cause(grown, ask.steps, ask.ctx, ask.tier_finding) if grown is not None else None
    if grown is None or seen is None:
        return None
    finding = _in_request(grown, seen)
    strength = WEAK_EVIDENCE if finding.cause.saturates is None else 1.0
    return Judged(finding, 0.5 * grown.share + 0.5 * strength, request=grown.name)


def _in_request(grown: Grown, seen: InRequest) -> Finding:
    """A resource below that the request waits on (a locked row, a quota) is the cause of
    its serializing; a pool it fills, or the tier's time, is its effect: then the request
    served one at a time is named, or failing that its own time."""
    cause = seen.found.cause
    if not cause.effect_of_one_at_a_time:
        return seen.found
    found = serialized(grown.name, grown.entry, seen.tier, seen.group, seen.onset, seen.evidence)
    if found is not None:
        return found
    return seen.found if cause.saturates is not None else request_time(grown, seen)


def request_time(grown: Grown, seen: InRequest) -> Finding:
    """The request's own time inside its tier, where nothing saturated explains it."""
    summary = (
        f"{grown.name}'s time inside {seen.tier} grows from {load_text(seen.onset)} while the "
        "other requests stay flat: what limits the stack lives in this request."
    )
    return Finding(
        seen.group, OWN_TIME, seen.onset["users"], seen.evidence,
        f"{grown.name}: its time inside {seen.tier} grows", summary, rate_of(seen.onset),
    )  # fmt: skip


# Asked of the one named request whose time grows while the others stay flat
# (per_request.py), before any tier of all the requests.
SERIALIZED = Cause(
    name="serialized",
    resource="serialized",
    scope="run",
    doc=__doc__,
    advice="Shorten or remove what it holds; more workers or CPU will not help.",
    saturates="one request at a time inside the app",
    reads=(
        "endpoints.workers",
        "endpoints.behaviour",
        "endpoints.steps.tiers",
        "endpoints.steps.level",
        "endpoints.steps.p50_ms",
    ),
    thresholds=("ONE_AT_ONCE", "CARRIES", "DOMINATES", "WEAK_EVIDENCE"),
    needs_cpu=False,
    judge=_judge_one_request,
)
