"""The request whose time grows while the plan's other requests stay flat.

A journey mixes cheap and expensive requests. A limit inside one of them (a lock the app
takes for it, a single-threaded section) shows in that request's time and throughput
only: a median over all requests, most of them flat, hides it. So each named request is
weighed by its share of the growth of the mean latency (its share of the requests × how
much its own mean grew), and when one request carries most of it while every other stays
flat (or grows by a far smaller share of its own time), the limit is named in that
request, in the tier where its time grows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pinchpoint.analyze.causes.cause import Finding
from pinchpoint.analyze.context import Context, level_of, load_text, ms_text, tier_cost
from pinchpoint.analyze.thresholds import (
    CARRIES,
    DOMINATES,
    GROWTH_MIN_MS,
    GROWTH_SHARE,
)
from pinchpoint.analyze.usage import process_group
from pinchpoint.rundir.shapes import EndpointJson, EndpointStepJson, StepJson

if TYPE_CHECKING:
    from pinchpoint.analyze.causes.cause import TierFinding


@dataclass(frozen=True)
class Grown:
    """One named request's growth from its lightest step to its heaviest."""

    entry: EndpointJson
    base: EndpointStepJson
    top: EndpointStepJson
    share: float  # of the growth of the mean latency of all requests
    # The most another request's median grew, as a share of its median at the lightest step.
    others_growth: float = 0.0

    @property
    def name(self) -> str:
        return str(self.entry["endpoint"])


def _mean_ms(step: EndpointStepJson) -> float:
    return 1000 * step["concurrency"] / step["throughput_rps"] if step["throughput_rps"] else 0.0


def _rise(base: EndpointStepJson, top: EndpointStepJson) -> float:
    return float(top["p50_ms"] - base["p50_ms"])


def _relative(base: EndpointStepJson, top: EndpointStepJson) -> float:
    return max(_rise(base, top), 0.0) / base["p50_ms"] if base["p50_ms"] > 0 else 0.0


def _grows(base: EndpointStepJson, top: EndpointStepJson) -> bool:
    rise = _rise(base, top)
    return rise > GROWTH_MIN_MS and rise > GROWTH_SHARE * base["p50_ms"]


def growing_request(endpoints: list[EndpointJson]) -> Grown | None:
    """The one named request whose time grows while every other stays flat (or grows by a
    DOMINATES times smaller share of its own time), when it carries most of the growth of
    the mean latency; None otherwise (one request, or several grow alike)."""
    ranged = []
    for entry in endpoints:
        steps = sorted(entry.get("steps") or [], key=lambda s: s["level"])
        if len(steps) >= 2:
            ranged.append((entry, steps[0], steps[-1]))
    if len(ranged) < 2:
        return None
    growing = [r for r in ranged if _grows(r[1], r[2])]
    if not growing:
        return None
    most = max(growing, key=lambda r: _rise(r[1], r[2]))
    beside = _relative(most[1], most[2]) / DOMINATES
    if any(r is not most and _relative(r[1], r[2]) > beside for r in growing):
        return None
    total = sum(top["requests"] for _, _, top in ranged) or 1
    weights = {
        id(entry): top["requests"] / total * max(0.0, _mean_ms(top) - _mean_ms(base))
        for entry, base, top in ranged
    }
    entry, base, top = most
    share = weights[id(entry)] / (sum(weights.values()) or 1.0)
    others = max(_relative(b, t) for e, b, t in ranged if e is not entry)
    return Grown(entry, base, top, share, others) if share >= CARRIES else None


def _tier_deltas(grown: Grown) -> dict[str, float]:
    """Each tier's own time (self + queue) for this request, heaviest step less lightest."""
    deltas = {}
    for tier in grown.top.get("tiers") or {}:
        a, b = tier_cost(grown.base, tier), tier_cost(grown.top, tier)
        if a is not None and b is not None:
            deltas[tier] = b - a
    return deltas


@dataclass(frozen=True)
class InRequest:
    """Where a request's time grows: the tier, its process group, the step it grew from,
    the lines that say so, and what the tier's causes found there."""

    tier: str
    group: str
    onset: StepJson
    evidence: list[str]
    found: Finding


def request_cause(
    grown: Grown, steps: list[StepJson], ctx: Context, tier_finding: TierFinding
) -> InRequest | None:
    """What the tier the request's time grows in is limited by, asked of `tier_finding`; None
    when no tier logged this request."""
    deltas = _tier_deltas(grown)
    if not deltas:
        return None
    tier = max(deltas, key=lambda t: deltas[t])
    group = process_group(tier, steps, ctx) or tier
    onset = _onset(grown, steps)
    evidence = _evidence(grown, tier, deltas)
    found = tier_finding(tier, steps, onset, ctx, None)
    found = replace(found, evidence=[*evidence, *found.evidence])
    return InRequest(tier, group, onset, evidence, found)


def _onset(grown: Grown, steps: list[StepJson]) -> StepJson:
    """The run's step at which the request's time first grew past the mark."""
    mark = max(GROWTH_MIN_MS, GROWTH_SHARE * grown.base["p50_ms"])
    ordered = sorted(grown.entry["steps"], key=lambda s: s["level"])
    first = next((s for s in ordered if s["p50_ms"] - grown.base["p50_ms"] > mark), grown.top)
    return next((s for s in steps if level_of(s) == first["level"]), steps[-1])


def _evidence(grown: Grown, tier: str, deltas: dict[str, float]) -> list[str]:
    base, top, entry = grown.base, grown.top, grown.entry
    growth = top["p50_ms"] - base["p50_ms"]
    lines = [
        f"{grown.name} p50 {ms_text(base['p50_ms'])} at {_level(base)} → "
        f"{ms_text(top['p50_ms'])} at {_level(top)}; it carries {grown.share:.0%} of the "
        "growth of the mean latency of all requests, while every other request stays flat "
        f"(its median grew {grown.others_growth:.0%} at most, this one's "
        f"{_relative(base, top):.0%})",
        f"{grown.name}'s time in {tier} (self + queue) grows by {ms_text(deltas[tier])}, "
        f"{100 * deltas[tier] / growth:.0f}% of its growth"
        + "".join(f"; {t} {ms_text(d)}" for t, d in deltas.items() if t != tier),
    ]
    # A request's workers are estimated only where it has a shortest time.
    least = entry["min_latency_ms"]
    if entry.get("workers") is not None and least is not None:
        lines.append(
            f"{grown.name}'s peak throughput × its shortest time ({entry['peak_throughput_rps']:.0f} "
            f"req/s × {ms_text(least)}) is {entry['workers']:.2f} served at once "
            f"(Little's law); its throughput {base['throughput_rps']:.0f} → "
            f"{top['throughput_rps']:.0f} req/s"
        )
    return lines


def _level(step: EndpointStepJson) -> str:
    kind = "users" if step.get("users") else "rate"
    return load_text({"users": step["users"], "kind": kind, "level": step["level"]})
