"""Names the bottleneck: the tier whose own time (self plus queue) grows with load,
the load where it starts, and the resource behind it, with the evidence."""

from __future__ import annotations

from pinchpoint.analyze.context import (
    Context,
    busy_of,
    cpu_of,
    load_text,
    ms_text,
    rate_of,
    resource_of,
    start_text,
    users_text,
    workers_of,
)
from pinchpoint.analyze.findings import (
    REFUSALS,
    Finding,
    cpu_quota,
    db_lock,
    estimate_line,
    proxy_limit,
    workers_estimate,
)
from pinchpoint.analyze.host_findings import host_finding

__all__ = ["Context", "decide", "tier_cost"]

# Latency "grows" when it rises by more than this share of its lowest-load value...
GROWTH_SHARE = 0.25
# ...and by more than this, so sub-millisecond jitter on fast endpoints is not a finding.
GROWTH_MIN_MS = 1.0
# A host is CPU-saturated above this share of its cores.
CPU_SATURATED = 0.85
# ...or when, below that, tasks wait for a core (PSI "some") this share of the time, having
# waited at least CPU_PRESSURE_RISE less at the lightest step: the rise is the load's own.
CPU_PRESSURE_SATURATED = 0.4
CPU_PRESSURE_RISE = 0.2
# A worker pool is full when Little's-law concurrency reaches this share of its size.
POOL_FULL = 0.8
# Workers using more than this share of a core each are computing, not waiting.
WORKER_CPU_BOUND = 0.7
# The generator is saturated when its CPU reaches this share of the threads it runs on.
GENERATOR_SATURATED = 0.9
# Tiers whose own time grew by this share of the latency's growth are findings too.
OTHER_TIER_SHARE = 0.1
# How much a finding with no saturated resource behind it counts, against 1 for one with.
WEAK_EVIDENCE = 0.3


def tier_cost(step: dict, tier: str) -> float | None:
    """A tier's own contribution to the latency of a step: self time plus queue time."""
    t = step.get("tiers", {}).get(tier)
    if not t or t.get("self_p50_ms") is None:
        return None
    return t["self_p50_ms"] + (t.get("queue_p50_ms") or 0.0)


def _latency(step: dict) -> float | None:
    return step["latency_ms"]["p50"]


_users = users_text
_fmt = ms_text
_cpu = cpu_of


def generator_check(steps: list[dict], ctx: Context) -> dict:
    peak = max((_cpu(s, "generator") or 0.0 for s in steps), default=0.0)
    saturated = peak >= GENERATOR_SATURATED * ctx.generator_threads
    return {
        "saturated": saturated,
        "cpu_cores_max": round(peak, 3),
        "threads": ctx.generator_threads,
    }


def decide(steps: list[dict], ctx: Context) -> dict:
    """The verdict's findings, without the per-step table."""
    estimate = workers_estimate(steps, ctx.min_latency_ms, ctx.endpoint)
    verdict = _decide(steps, ctx, estimate)
    verdict["workers_estimate"] = [estimate] if estimate else []
    return verdict


def _decide(steps: list[dict], ctx: Context, estimate: dict | None) -> dict:
    generator = generator_check(steps, ctx)
    usable = [s for s in steps if _latency(s) is not None]
    if len(usable) < 2:
        return {
            "bottleneck": None,
            "headline": "Not enough steps with responses to judge (need at least two).",
            "generator": generator,
            "findings": [],
        }
    if generator["saturated"]:
        return {
            "bottleneck": None,
            "headline": (
                f"The load generator is saturated ({generator['cpu_cores_max']:.2f} cores of "
                f"{ctx.generator_threads}): these results measure the generator, not the target."
            ),
            "generator": generator,
            "findings": [],
        }
    refusing = None if generator["saturated"] else proxy_limit(usable, ctx)
    if refusing is not None:
        return _verdict(
            [(_finding_dict(refusing), refusing.name, _refused_share(usable[-1]))], generator
        )
    base, top = usable[0], usable[-1]
    threshold = max(GROWTH_MIN_MS, GROWTH_SHARE * _latency(base))
    growth = _latency(top) - _latency(base)
    onset = next((s for s in usable if _latency(s) - _latency(base) > threshold), None)
    if onset is None:
        return {
            "bottleneck": None,
            "headline": _no_bottleneck(usable, ctx),
            "generator": generator,
            "findings": [],
        }

    deltas = {}
    for tier in ctx.order:
        a, b = tier_cost(base, tier), tier_cost(top, tier)
        if a is not None and b is not None:
            deltas[tier] = b - a
    if not deltas:
        headline = (
            f"Latency grows from {load_text(onset)} ({_fmt(_latency(base))} → {_fmt(_latency(top))}), "
            "but no tier logged records for this run: the growth cannot be attributed."
        )
        return {
            "bottleneck": None,
            "headline": headline,
            "generator": generator,
            "unattributed": True,
            "findings": [],
        }
    # The tier whose own time grew most is the bottleneck; others that grew by a good share
    # of the latency follow as further findings.
    ranked = sorted(deltas, key=lambda t: deltas[t], reverse=True)
    found = []
    for i, tier in enumerate(ranked):
        if i and deltas[tier] < OTHER_TIER_SHARE * growth:
            break
        bottleneck, name = _tier_finding(tier, usable, ctx, deltas, growth, threshold, estimate)
        if any(_same(bottleneck, f[0]) for f in found):
            # A finding already made (a database this tier calls): what of the tier itself?
            bottleneck, name = _tier_finding(
                tier, usable, ctx, deltas, growth, threshold, estimate, specials=False
            )
        strength = WEAK_EVIDENCE if bottleneck["resource"] == "time" else 1.0
        attribution = min(1.0, max(0.0, deltas[tier] / growth)) if growth > 0 else 0.0
        found.append((bottleneck, name, 0.5 * attribution + 0.5 * strength))
    return _verdict(found, generator)


def _tier_finding(
    tier: str,
    usable: list[dict],
    ctx: Context,
    deltas: dict[str, float],
    growth: float,
    threshold: float,
    estimate: dict | None,
    specials: bool = True,
) -> tuple[dict, str]:
    """What limits one tier whose own time grew, as a bottleneck entry and its name;
    without `specials`, only its worker pool, the host's CPU or its own time."""
    base, top = usable[0], usable[-1]
    tier_onset = next(
        (
            s
            for s in usable
            if (tier_cost(s, tier) or 0.0) - (tier_cost(base, tier) or 0.0) > threshold
        ),
        usable[-1],
    )
    growth_lines = [
        f"client p50 latency grows from {_fmt(_latency(base))} at {load_text(base)} "
        f"to {_fmt(_latency(top))} at {load_text(top)}",
        f"{tier}'s own time (self + queue) grows by {_fmt(deltas[tier])}, "
        f"{_share(deltas[tier], growth)} of the growth; "
        + ", ".join(f"{t} {_fmt(d)}" for t, d in deltas.items() if t != tier),
    ]
    special = (
        cpu_quota(tier, usable, ctx)
        or db_lock(tier, usable, ctx, tier_onset["users"])
        or host_finding(tier, usable, ctx)
        if specials
        else None
    )
    if special is not None:
        special.evidence = [*growth_lines, *special.evidence]
        return _finding_dict(special), special.name
    resource, evidence = _resource(tier, usable, tier_onset, ctx)
    if resource == "worker_pool" and estimate is not None:
        evidence.append(estimate_line(estimate))
    bottleneck = {
        "component": tier,
        "resource": resource,
        "starts_at_users": tier_onset["users"],
        **({"starts_at_rate": rate_of(tier_onset)} if rate_of(tier_onset) is not None else {}),
        "evidence": [*growth_lines, *evidence],
    }
    bottleneck["summary"] = _summary(bottleneck, ctx)
    return bottleneck, _name(bottleneck, ctx)


def _same(a: dict, b: dict) -> bool:
    return (a["component"], a["resource"]) == (b["component"], b["resource"])


def _finding_dict(finding: Finding) -> dict:
    return {
        "component": finding.component,
        "resource": finding.resource,
        "starts_at_users": finding.starts_at_users,
        **(
            {"starts_at_rate": finding.starts_at_rate} if finding.starts_at_rate is not None else {}
        ),
        "evidence": finding.evidence,
        "summary": finding.summary,
    }


def _refused_share(top: dict) -> float:
    """The share of the heaviest step's failures that were refusals."""
    by_class = top.get("errors_by_class") or {}
    failed = sum(by_class.values())
    refused = sum(n for name, n in by_class.items() if name in REFUSALS)
    return 0.5 + 0.5 * refused / failed if failed else 0.5


def _verdict(found: list[tuple[dict, str, float]], generator: dict) -> dict:
    """The first finding is the bottleneck; the others follow it by confidence."""
    first, *others = found
    others.sort(key=lambda f: f[2], reverse=True)
    findings = []
    seen = set()
    for bottleneck, name, confidence in [first, *others]:
        key = (bottleneck["component"], bottleneck["resource"])
        if key in seen:
            continue
        seen.add(key)
        findings.append({**bottleneck, "name": name, "confidence": round(confidence, 2)})
    bottleneck, name, confidence = first
    bottleneck = {**bottleneck, "confidence": round(confidence, 2)}
    headline = f"Bottleneck: {name} from {start_text(bottleneck)}"
    return {
        "bottleneck": bottleneck,
        "headline": headline,
        "generator": generator,
        "findings": findings,
    }


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole > 0 else "all"


def _resource(tier: str, steps: list[dict], onset: dict, ctx: Context) -> tuple[str, list[str]]:
    base, top = steps[0], steps[-1]
    t_top = top["tiers"].get(tier, {})
    queue_growth = (t_top.get("queue_p50_ms") or 0.0) - (
        base["tiers"].get(tier, {}).get("queue_p50_ms") or 0.0
    )
    self_growth = (t_top.get("self_p50_ms") or 0.0) - (
        base["tiers"].get(tier, {}).get("self_p50_ms") or 0.0
    )
    host_at_onset = _cpu(onset, "host")
    host_peak = max((_cpu(s, "host") or 0.0 for s in steps), default=0.0)
    evidence = []
    if host_peak:
        evidence.append(
            f"host CPU {host_at_onset or 0.0:.2f} of {ctx.cpu_count} cores at {load_text(onset)}, "
            f"peak {host_peak:.2f}"
        )
    gen = max((_cpu(s, "generator") or 0.0 for s in steps), default=0.0)
    if gen and host_peak:
        evidence.append(f"the load generator itself used up to {gen:.2f} cores of this host")
    # Latency bends while a host nears full use, so the CPU counts as the limit when it
    # saturates at the onset or at any heavier step after it.
    after_onset = next((steps[i:] for i, s in enumerate(steps) if s is onset), [onset])
    host_after = max((_cpu(s, "host") or 0.0 for s in after_onset), default=0.0)
    pressure_line, pressed = _cpu_pressure(base, after_onset)
    if pressure_line:
        evidence.append(pressure_line)
    host_saturated = host_after >= CPU_SATURATED * ctx.cpu_count or pressed
    workers = _workers(tier, top, ctx)
    if queue_growth >= 0.5 * max(queue_growth + self_growth, 1e-9) and workers:
        busy = _busy(tier, top)
        evidence.append(
            f"queue time before {tier} p50 {_fmt(queue_growth)} higher at {load_text(top)}: "
            "requests wait for a free worker"
        )
        evidence.append(
            f"{tier} concurrency by Little's law (throughput × time in {tier}) is {busy:.2f} "
            f"at {load_text(top)} against {workers} workers"
        )
        own_cpu = _cpu(top, tier)
        per_worker = own_cpu / busy if own_cpu is not None and busy > 0 else None
        if per_worker is not None:
            evidence.append(
                f"{tier}'s processes used {own_cpu:.2f} cores: {per_worker:.2f} per busy worker"
            )
        # A pool is the limit when it is full while its workers mostly wait, not compute;
        # workers that compute all the time are limited by the CPU instead.
        if busy >= POOL_FULL * workers and (per_worker is None or per_worker < WORKER_CPU_BOUND):
            return "worker_pool", evidence
    if host_saturated:
        return "cpu", evidence
    own_cpu = _cpu(top, tier)
    if own_cpu is not None:
        evidence.append(f"{tier} processes used {own_cpu:.2f} cores at {load_text(top)}")
    return "time", evidence


def _cpu_pressure(base: dict, after_onset: list[dict]) -> tuple[str | None, bool]:
    """The evidence line of the host's CPU pressure, and whether tasks queued for a core."""
    at_base = resource_of(base, "host", "cpu_pressure")
    measured = [
        (p, s) for s in after_onset if (p := resource_of(s, "host", "cpu_pressure")) is not None
    ]
    if at_base is None or not measured:
        return None, False
    peak, step = max(measured, key=lambda m: m[0])
    line = (
        f"some task waited for a CPU {100 * peak:.0f}% of the time at {load_text(step)} "
        f"({100 * at_base:.0f}% at {load_text(base)})"
    )
    pressed = peak >= CPU_PRESSURE_SATURATED and peak - at_base >= CPU_PRESSURE_RISE
    return line, pressed


_busy = busy_of
_workers = workers_of


def _name(b: dict, ctx: Context) -> str:
    if b["resource"] == "worker_pool":
        return f"{b['component']} worker pool"
    if b["resource"] == "cpu":
        return f"host CPU ({ctx.cpu_count} cores), seen first in {b['component']}'s time"
    return f"{b['component']} (its own time grows; no saturated resource found)"


def _summary(b: dict, ctx: Context) -> str:
    if b["resource"] == "worker_pool":
        return (
            f"{b['component']}'s worker pool is full from {start_text(b)}: requests "
            "queue for a free worker while the workers themselves mostly wait rather than compute. "
            "Add workers (or make each request shorter)."
        )
    if b["resource"] == "cpu":
        return (
            f"The host's CPU is saturated from {start_text(b)}; {b['component']}'s time "
            "grows as its work waits for a core. More workers will not help; less CPU per request or "
            "more cores will."
        )
    return f"{b['component']}'s own time grows with load from {start_text(b)}."


def _no_bottleneck(steps: list[dict], ctx: Context) -> str:
    top = steps[-1]
    host = max((_cpu(s, "host") or 0.0 for s in steps), default=0.0)
    room = f"; host CPU peaked at {host:.2f} of {ctx.cpu_count} cores" if host else ""
    return (
        f"No bottleneck from {load_text(steps[0]).split()[0]} to {load_text(top)}: latency stays flat "
        f"(p50 {_fmt(_latency(steps[0]))} → {_fmt(_latency(top))}) while throughput reaches "
        f"{top['throughput_rps']:.0f} req/s{room}."
    )
