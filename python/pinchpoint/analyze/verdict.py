"""Names the bottleneck: the tier whose own time (self plus queue) grows with load,
the load where it starts, and the resource behind it, with the evidence."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pinchpoint.analyze.carrier import carrying_request
from pinchpoint.analyze.causes import CAUSES, Judged, Registry, RunAsk
from pinchpoint.analyze.causes.cause import Finding
from pinchpoint.analyze.causes.cpu import cpu_contended
from pinchpoint.analyze.causes.generator import generator_check
from pinchpoint.analyze.causes.own_time import own_time
from pinchpoint.analyze.causes.pool import pool_or_cpu
from pinchpoint.analyze.context import (
    Context,
    cpu_of,
    load_text,
    ms_text,
    rate_of,
    tier_cost,
)
from pinchpoint.analyze.decision import Decision, decided, findings_json
from pinchpoint.analyze.findings import workers_estimate
from pinchpoint.analyze.thresholds import (
    CPU_NEED,
    EXPLAINS,
    GROWTH_MIN_MS,
    GROWTH_SHARE,
    OTHER_TIER_SHARE,
    SCALING_LOAD,
    SCALING_SHARE,
    WEAK_EVIDENCE,
)
from pinchpoint.analyze.usage import group_use, process_group
from pinchpoint.rundir.shapes import StepJson

__all__ = ["Context", "decide"]


def _usable(step: StepJson) -> bool:
    """Whether the step has a latency to judge: some of its requests were answered."""
    return step["latency_ms"]["p50"] is not None


def _p50(step: StepJson) -> float:
    """The p50 of a usable step."""
    p50 = step["latency_ms"]["p50"]
    assert p50 is not None, "a usable step has a p50"
    return float(p50)


def _grew(step: StepJson, base: StepJson) -> float:
    """How much the step's latency grew over the base's, as a share of the base's: the median's
    or the mean's growth, whichever is larger. A closed loop's mean is users ÷ throughput
    (Little's law), so it grows when throughput stops scaling even where the median hides it
    (a throttled quota delays a third of the requests by a whole period)."""
    shares = []
    for key in (_p50, _mean):
        a, b = key(base), key(step)
        if a is not None and b is not None and b - a > GROWTH_MIN_MS:
            shares.append((b - a) / a if a > 0 else float("inf"))
    return max([*shares, _stopped_scaling(step, base)])


def _stopped_scaling(step: StepJson, base: StepJson) -> float:
    """In closed loop, the growth of users ÷ throughput (the mean time a user waits for an
    answer, by Little's law) when the load grew but the throughput per user collapsed; 0
    otherwise. It finds the knee of endpoints too fast for a millisecond to show it."""
    if rate_of(step) is not None or rate_of(base) is not None:
        return 0.0
    n0, n1 = float(base["users"] or 0), float(step["users"] or 0)
    x0, x1 = base["throughput_rps"] or 0.0, step["throughput_rps"] or 0.0
    if n0 <= 0 or x0 <= 0 or x1 <= 0 or n1 < SCALING_LOAD * n0:
        return 0.0
    per_user = (x1 / n1) / (x0 / n0)
    return 1 / per_user - 1 if per_user <= SCALING_SHARE else 0.0


def _mean(step: StepJson) -> float | None:
    return step.get("latency_mean_ms")


def measure(base: StepJson, top: StepJson) -> tuple[str, float, float]:
    """The latency that grew most from base to top, in words and numbers: the median, or
    the mean where a tail grew under a flat median (users ÷ throughput, Little's law)."""
    a, b = _mean(base), _mean(top)
    if a is not None and b is not None and b - a > _p50(top) - _p50(base):
        return "mean", a, b
    return "p50", _p50(base), _p50(top)


def _grown_text(base: StepJson, top: StepJson) -> str:
    label, a, b = measure(base, top)
    return f"{label} {_fmt(a)} → {_fmt(b)}"


_fmt = ms_text
_cpu = cpu_of


def decide(steps: list[StepJson], ctx: Context, causes: Registry = CAUSES) -> Decision:
    """The verdict's findings, without the per-step table, asking `causes`."""
    estimate = workers_estimate(steps, ctx.min_latency_ms, ctx.endpoint)
    verdict = _decide(steps, ctx, estimate, causes)
    verdict["workers_estimate"] = [estimate] if estimate else []
    _name_carrier(verdict, [s for s in steps if _usable(s)], ctx)
    return verdict


def _name_carrier(verdict: Decision, usable: list[StepJson], ctx: Context) -> None:
    """Names the request that carries the bottleneck's work, where one does."""
    bottleneck = verdict["bottleneck"]
    if not bottleneck or bottleneck.get("request") or not usable:
        return
    carrier = carrying_request(bottleneck["component"], usable, ctx)
    if carrier is None:
        return
    line = carrier.line(usable[-1])
    first = verdict["findings"][0]
    bottleneck["request"] = first["request"] = carrier.name
    bottleneck["evidence"] = [*bottleneck["evidence"], line]
    first["evidence"] = [*first["evidence"], line]
    verdict["headline"] += (
        f", in {carrier.name} ({carrier.share:.0%} of {carrier.component}'s work)"
    )


def _decide(
    steps: list[StepJson], ctx: Context, estimate: dict[str, Any] | None, causes: Registry
) -> Decision:
    generator = generator_check(steps, ctx)
    usable = [s for s in steps if _usable(s)]
    if len(usable) < 2:
        return {
            "bottleneck": None,
            "headline": "Not enough steps with responses to judge (need at least two).",
            "generator": generator,
            "findings": [],
        }
    ask = RunAsk(usable, ctx, generator, causes.tier_finding)
    beside = [j for c in causes.asked("beside") if c.judge and (j := c.judge(ask)) is not None]
    extra = beside
    neighbour = beside[0].finding if beside else None
    for cause in causes.asked("run"):
        judged = cause.judge(ask) if cause.judge else None
        if judged is not None:
            verdict = decided([judged, *extra], generator, usable)
            if judged.headline is not None:
                verdict["headline"] = judged.headline
            return verdict
    base, top = usable[0], usable[-1]
    growth = max(_p50(top) - _p50(base), (_mean(top) or 0.0) - (_mean(base) or 0.0))
    onset = next((s for s in usable if _grew(s, base) > GROWTH_SHARE), None)
    # A tier's time counts as grown by a millisecond, or, where the whole latency grew by
    # less, by its share of the lowest load's latency.
    floor = GROWTH_MIN_MS if growth > GROWTH_MIN_MS else 0.0
    threshold = max(floor, GROWTH_SHARE * _p50(base))
    if onset is None:
        return {
            "bottleneck": None,
            "headline": _no_bottleneck(usable, ctx),
            "generator": generator,
            "findings": findings_json(extra),
        }

    deltas = {}
    for tier in ctx.order:
        a, b = tier_cost(base, tier), tier_cost(top, tier)
        if a is not None and b is not None:
            deltas[tier] = b - a
    if not deltas:
        headline = (
            f"Latency grows from {load_text(onset)} ({_grown_text(base, top)}), "
            "but no tier logged records for this run: the growth cannot be attributed."
        )
        return {
            "bottleneck": None,
            "headline": headline,
            "generator": generator,
            "unattributed": True,
            "findings": findings_json(extra),
        }
    # The tier whose own time grew most is the bottleneck; others that grew by a good share
    # of the latency follow as further findings.
    ranked = sorted(deltas, key=lambda t: deltas[t], reverse=True)
    found: list[Judged] = []
    for i, tier in enumerate(ranked):
        if i and (deltas[tier] <= 0 or deltas[tier] < OTHER_TIER_SHARE * growth):
            break
        finding = _tier_finding(
            tier, usable, ctx, deltas, growth, threshold, estimate, found, causes
        )
        strength = WEAK_EVIDENCE if finding.cause.saturates is None else 1.0
        attribution = min(1.0, max(0.0, deltas[tier] / growth)) if growth > 0 else 0.0
        found.append(Judged(finding, 0.5 * attribution + 0.5 * strength))
    if _unexplained(found[0], deltas[ranked[0]], growth, threshold, base, top):
        return {
            "bottleneck": None,
            "headline": _unexplained_headline(onset, base, top, ranked[0], deltas[ranked[0]]),
            "generator": generator,
            "unattributed": True,
            "findings": findings_json([*extra, *found]),
        }
    if neighbour is not None and _neighbour_explains(found, usable, onset, ctx):
        return {
            "bottleneck": None,
            "headline": _neighbour_headline(usable, onset, neighbour),
            "generator": generator,
            "findings": findings_json([*extra, *found]),
        }
    return decided([*found, *extra], generator, usable)


def _unexplained(
    first: Judged, delta: float, growth: float, threshold: float, base: StepJson, top: StepJson
) -> bool:
    """Whether the tier that grew most, with no resource behind it, explains too little of
    the growth to be named: under EXPLAINS of the median's growth, or, where only the mean
    grew (a tail), no more than the threshold at its median."""
    if first.finding.cause.saturates is not None:
        return False
    if measure(base, top)[0] == "mean":
        return delta <= threshold
    return delta < EXPLAINS * growth


def _unexplained_headline(
    onset: StepJson, base: StepJson, top: StepJson, tier: str, delta: float
) -> str:
    return (
        f"Latency grows from {load_text(onset)} ({_grown_text(base, top)}), but no tier's own "
        f"time explains it (the most, {tier}, grew {_fmt(delta)}): the time goes where no tier "
        "logs it (the network, the client, a tier without records), or to a few requests "
        "(see the requests' table)."
    )


def _neighbour_explains(
    found: list[Judged], steps: list[StepJson], onset: StepJson, ctx: Context
) -> bool:
    """No tier's growth has a saturated resource of the stack behind it, while processes
    outside the stack took the host's CPU (it is full, or its tasks waited for a core more
    as the load grew): the neighbour, not the stack, made it grow."""
    for judged in found:
        cause = judged.finding.cause
        if cause.saturates is not None or not cause.needs_cpu:
            return False
        if not _wants_cpu(judged.finding.component, steps, ctx):
            return False
    return cpu_contended(steps, onset, ctx)


def _wants_cpu(tier: str, steps: list[StepJson], ctx: Context) -> bool:
    """Whether the tier's work needs a core, so that a neighbour's CPU can slow it: its
    busy workers used or waited for at least CPU_NEED of a core each. Workers that wait on
    I/O, a lock or a link need none, whatever the host's CPU does. Unknown (no sampled
    processes, no run-queue wait) counts as needing one."""
    group = process_group(tier, steps, ctx)
    if group is None:
        return True
    use = group_use(group, steps[-1], ctx)
    if use.cpu_wait is None or use.demand_per_worker is None:
        return True
    return use.demand_per_worker >= CPU_NEED


def _neighbour_headline(steps: list[StepJson], onset: StepJson, neighbour: Finding) -> str:
    base, top = steps[0], steps[-1]
    return (
        f"No bottleneck of the stack's own from {load_text(base).split()[0]} to "
        f"{load_text(top)}: latency grows from {load_text(onset)} ({_grown_text(base, top)}) "
        "with no resource of the stack saturated, while "
        f"{neighbour.name} took the host's CPU: its tiers waited for a core."
    )


def _tier_finding(
    tier: str,
    usable: list[StepJson],
    ctx: Context,
    deltas: dict[str, float],
    growth: float,
    threshold: float,
    estimate: dict[str, Any] | None,
    found: list[Judged],
    causes: Registry,
) -> Finding:
    """What limits one tier whose own time grew; a finding already made (a database this
    tier calls) gives way to the tier's own."""
    base, top = usable[0], usable[-1]
    tier_onset = next(
        (
            s
            for s in usable
            if (tier_cost(s, tier) or 0.0) - (tier_cost(base, tier) or 0.0) > threshold
        ),
        usable[-1],
    )
    growth_lines = _growth_lines(tier, base, top, deltas, growth)
    cause = causes.tier_finding(tier, usable, tier_onset, ctx, estimate)
    if any(_same(cause, j.finding) for j in found):
        group = process_group(tier, usable, ctx)
        cause = (
            pool_or_cpu(tier, group, usable, tier_onset, ctx, estimate) if group else None
        ) or own_time(tier, group, usable, tier_onset, ctx)
    return replace(cause, evidence=[*growth_lines, *cause.evidence])


def _growth_lines(
    tier: str, base: StepJson, top: StepJson, deltas: dict[str, float], growth: float
) -> list[str]:
    """The latency's growth and the tier's part of it. Tier times are medians: they carry a
    share of the median's growth, not of a mean a tail of slow requests made grow."""
    label, a, b = measure(base, top)
    own = deltas[tier]
    grew = f"grows by {_fmt(own)}" if own > 0 else f"does not grow ({_fmt(own)})"
    part = f", {_share(own, growth)} of the growth" if label == "p50" and own > 0 else ""
    where = " at the median" if label == "mean" else ""
    others = ", ".join(f"{t} {_fmt(d)}" for t, d in deltas.items() if t != tier)
    return [
        f"client {label} latency grows from {_fmt(a)} at {load_text(base)} to {_fmt(b)} at "
        f"{load_text(top)}",
        f"{tier}'s own time (self + queue){where} {grew}{part}" + (f"; {others}" if others else ""),
    ]


def _same(a: Finding, b: Finding) -> bool:
    return (a.component, a.resource) == (b.component, b.resource)


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole > 0 else "all"


def _no_bottleneck(steps: list[StepJson], ctx: Context) -> str:
    top = steps[-1]
    host = max((_cpu(s, "host") or 0.0 for s in steps), default=0.0)
    room = f"; host CPU peaked at {host:.2f} of {ctx.cpu_count} cores" if host else ""
    return (
        f"No bottleneck from {load_text(steps[0]).split()[0]} to {load_text(top)}: latency stays flat "
        f"(p50 {_fmt(_p50(steps[0]))} → {_fmt(_p50(top))}) while throughput reaches "
        f"{top['throughput_rps']:.0f} req/s{room}."
    )
