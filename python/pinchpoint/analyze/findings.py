"""The verdict's findings beyond a full worker pool and the host's CPU: a cgroup CPU quota,
database lock waits, a proxy that refuses requests; and the worker count that Little's law
gives from peak throughput × minimal latency."""

from __future__ import annotations

from dataclasses import dataclass

from pinchpoint.analyze.context import (
    Context,
    busy_of,
    cpu_of,
    load_text,
    ms_text,
    rate_of,
    resource_of,
    workers_of,
)
from pinchpoint.analyze.thresholds import (
    AT_QUOTA,
    FAST_ERRORS,
    HALF_USED,
    IDLE_POOL,
    LOCK_WAITS,
    PROXY_ERRORS,
    REFUSED_SHARE,
    THROTTLED,
    THROTTLED_GROWTH,
)
from pinchpoint.analyze.usage import process_group as host_of

REFUSALS = frozenset({"503", "502", "429", "reset", "closed", "connect_refused"})
CONNECTION_REFUSALS = frozenset({"reset", "closed", "connect_refused"})


@dataclass
class Finding:
    component: str
    resource: str
    starts_at_users: int
    evidence: list[str]
    name: str  # for the headline: "Bottleneck: <name> from <n> users"
    summary: str
    # Open loop: the target rate (requests/s) of the step where it starts.
    starts_at_rate: float | None = None


def _pct(share: float) -> str:
    # Not "100%" for a share that is not all.
    return (
        f"{100 * share:.1f}%" if 0.995 <= share < 1 or 0 < share < 0.005 else f"{100 * share:.0f}%"
    )


def cpu_quota(tier: str, steps: list[dict], ctx: Context) -> Finding | None:
    """The processes of the tier, or of one below it, are held back by their cgroup's CPU
    quota: a throttled tier below fills the pools of every tier above it."""
    groups = []
    for name in below(tier, ctx):
        group = host_of(name, steps, ctx)
        if group is not None and group not in groups:
            groups.append(group)
    for group in groups:
        found = _cpu_quota(tier, group, steps, ctx)
        if found is not None:
            return found
    return None


def _cpu_quota(tier: str, host: str, steps: list[dict], ctx: Context) -> Finding | None:
    shares = [resource_of(s, host, "cpu_throttled_share") or 0.0 for s in steps]
    top, base = steps[-1], steps[0]
    quota_top = resource_of(top, host, "cpu_quota_cores") or 0.0
    # Throttled more as the load grew, or throttled while using all of the quota: then
    # it limited from the lowest load on.
    at_quota = quota_top > 0 and (cpu_of(top, host) or 0.0) >= AT_QUOTA * quota_top
    # Throttled from the lightest step on, using a good part of its quota, binds from there
    # even when neighbours leave the cgroup too little of the host to use all of it (a
    # share of a quota used in bursts is no limit: periods count only when it ran).
    throughout = shares[0] >= THROTTLED and (cpu_of(top, host) or 0.0) >= HALF_USED * quota_top
    if shares[-1] < THROTTLED or (
        shares[-1] - shares[0] < THROTTLED_GROWTH and not at_quota and not throughout
    ):
        return None
    onset = next(s for s, share in zip(steps, shares, strict=True) if share >= THROTTLED)
    quota = resource_of(top, host, "cpu_quota_cores") or 0.0
    throttled = _pct(shares[-1])
    evidence = [
        f"{host}'s cgroup has a CPU quota of {quota:.2f} cores: the kernel throttled it in "
        f"{throttled} of its periods at {load_text(top)}, "
        f"{_pct(shares[0])} at {load_text(base)}",
        f"{host}'s processes used {cpu_of(top, host) or 0.0:.2f} cores at "
        f"{load_text(top)}; the host used {cpu_of(top, 'host') or 0.0:.2f} of "
        f"{ctx.cpu_count}",
        f"{host} waited {resource_of(top, host, 'cpu_throttled_s') or 0.0:.1f} s throttled "
        f"during the step at {load_text(top)}",
    ]
    if host != tier and host not in below(tier, ctx)[1:]:
        evidence.insert(0, f"{tier} runs in {host}'s processes")
    elif host != tier:
        evidence.insert(0, f"{tier} waits on {host}, below it")
    summary = (
        f"{host}'s CPU quota ({quota:.2f} cores) is used up from {load_text(onset)}: "
        f"the kernel throttled its cgroup in {throttled} of the periods at "
        f"{load_text(top)}, so requests wait for CPU time the quota does not give. "
        "Raise the quota (or use less CPU per request); more workers will not help."
    )
    name = f"{host} CPU quota ({quota:.2f} cores, throttled {throttled} of periods)"
    return Finding(host, "cpu_quota", onset["users"], evidence, name, summary, rate_of(onset))


def below(tier: str, ctx: Context) -> list[str]:
    """The tier and every tier it calls, directly or through others, nearest first."""
    found: list[str] = []
    todo = [tier]
    while todo:
        name = todo.pop(0)
        if name not in found:
            found.append(name)
            todo.extend(ctx.calls.get(name, []))
    return found


def db_lock(tier: str, steps: list[dict], ctx: Context, grows_from: int = 0) -> Finding | None:
    """The tier, or one below it, is a database whose processes wait for locks; it starts
    where they wait and the tier's time has grown (from `grows_from` users). A slow tier
    below fills the pools of every tier above it, so the whole chain below is asked."""
    for name in below(tier, ctx):
        waits = [resource_of(s, name, "lock_waits") or 0.0 for s in steps]
        if waits[-1] >= LOCK_WAITS and waits[-1] - waits[0] >= LOCK_WAITS / 2:
            return _db_lock_finding(name, steps, waits, grows_from)
    return None


def _db_lock_finding(name: str, steps: list[dict], waits: list[float], grows_from: int) -> Finding:
    base, top = steps[0], steps[-1]
    onset = next(
        s
        for s, w in zip(steps, waits, strict=True)
        if (w >= LOCK_WAITS and s["users"] >= grows_from) or s is top
    )
    evidence = [
        f"{name}'s processes waiting for a lock: {waits[-1]:.1f} on average at "
        f"{load_text(top)}, {waits[0]:.1f} at {load_text(base)} "
        "(sampled from their process titles)",
    ]
    own = [s.get("tiers", {}).get(name, {}).get("p50_ms") for s in (base, top)]
    if None not in own:
        evidence.append(
            f"{name}'s time per request p50 {ms_text(own[0])} at {load_text(base)}, "
            f"{ms_text(own[1])} at {load_text(top)}"
        )
    cpu = cpu_of(top, name)
    if cpu is not None:
        evidence.append(
            f"{name}'s processes used {cpu:.2f} cores at {load_text(top)}: "
            "they wait rather than compute"
        )
    evidence.append(
        f"throughput {base['throughput_rps']:.0f} req/s at {load_text(base)}, "
        f"{top['throughput_rps']:.0f} at {load_text(top)}"
    )
    summary = (
        f"Requests wait for locks in {name} from {load_text(onset)}: transactions "
        "queue for rows that other transactions hold (a hot row), while the database "
        "itself is mostly idle. Hold locks shorter (less work inside the transaction), or "
        "spread the writes over more rows; more workers or CPU will not help."
    )
    return Finding(
        name, "db_lock", onset["users"], evidence, f"{name} lock waits", summary, rate_of(onset)
    )


def proxy_limit(steps: list[dict], ctx: Context) -> Finding | None:
    """Requests fail fast at a tier that answers them itself, while the tier behind idles."""
    base, top = steps[0], steps[-1]
    top_rate, base_rate = top.get("error_rate", 0.0), base.get("error_rate", 0.0)
    if top_rate < PROXY_ERRORS or base_rate > top_rate / 2:
        return None
    classes = top.get("errors_by_class", {})
    refused = {c: n for c, n in classes.items() if c in REFUSALS}
    if sum(refused.values()) < REFUSED_SHARE * max(top["errors"], 1):
        return None
    failed_ms, ok_ms = top.get("error_latency_p50_ms"), top["latency_ms"]["p50"]
    if failed_ms is None or (ok_ms is not None and failed_ms > FAST_ERRORS * ok_ms):
        return None
    proxy = _refusing_tier(top, ctx, refused)
    if proxy is None:
        return None
    onset = next(s for s in steps if s.get("error_rate", 0.0) >= PROXY_ERRORS)
    behind = [_idle_line(callee, top, ctx) for callee in ctx.calls.get(proxy, [])]
    evidence = [
        f"{_pct(top['error_rate'])} of requests failed at {load_text(top)} ("
        + ", ".join(f"{n} × {c}" for c, n in sorted(refused.items()))
        + f"), {_pct(base['error_rate'])} at {load_text(base)}",
        f"failed requests took {ms_text(failed_ms)} (p50) against "
        f"{ms_text(ok_ms or 0.0)} for answered ones: refused at once, not timed out",
        _refusal_line(proxy, top, ctx),
        *[line for line in behind if line],
    ]
    callees = " and ".join(ctx.calls.get(proxy, [])) or "the tier behind it"
    summary = (
        f"{proxy} refuses requests beyond its limit from {load_text(onset)}: "
        f"{_pct(top['error_rate'])} failed at once at {load_text(top)} while "
        f"{callees} had room. Raise the proxy's limit (limit_conn, max_conns, maxconn) to "
        "what the tier behind it can take, or queue instead of refusing."
    )
    name = f"{proxy} connection limit"
    return Finding(proxy, "proxy_limit", onset["users"], evidence, name, summary, rate_of(onset))


def _refusing_tier(top: dict, ctx: Context, refused: dict[str, int]) -> str | None:
    """The tier that answered the failures itself; the entry tier for connection errors
    that no tier logged."""
    tiers = top.get("tiers", {})
    for name in ctx.order:
        if (tiers.get(name, {}).get("rejected") or 0) >= 0.5 * top["errors"]:
            return name
    if ctx.order and set(refused) <= CONNECTION_REFUSALS:
        return ctx.order[0]
    return None


def _refusal_line(proxy: str, top: dict, ctx: Context) -> str:
    rejected = top.get("tiers", {}).get(proxy, {}).get("rejected")
    callees = " or ".join(ctx.calls.get(proxy, [])) or "anything"
    if not rejected:
        return f"no tier logged these failures: the connections were refused before {proxy}"
    return (
        f"{proxy} answered {rejected} requests itself with an error at "
        f"{load_text(top)}, without calling {callees}"
    )


def _idle_line(callee: str, top: dict, ctx: Context) -> str | None:
    if callee not in top.get("tiers", {}):
        return None
    busy, workers = busy_of(callee, top), workers_of(callee, top, ctx)
    cpu = cpu_of(top, callee)
    room = f" against {workers} workers" if workers else ""
    state = "it had room" if not workers or busy < IDLE_POOL * workers else "it was full too"
    used = f", its processes used {cpu:.2f} cores" if cpu is not None else ""
    return (
        f"behind it, {callee} ran {busy:.2f} requests at a time (Little's law){room}{used}: {state}"
    )


def workers_estimate(steps: list[dict], min_latency_ms: float | None, endpoint: str) -> dict | None:
    """Little's law as a worker count: peak throughput × minimal latency (the concurrency the
    server reaches when each request takes its shortest time)."""
    answered = [s for s in steps if s["throughput_rps"] > 0]
    if min_latency_ms is None or not answered:
        return None
    peak = max(answered, key=lambda s: s["throughput_rps"])
    return {
        "endpoint": endpoint,
        "peak_throughput_rps": peak["throughput_rps"],
        "at_users": peak["users"],
        "min_latency_ms": min_latency_ms,
        "workers": peak["throughput_rps"] * min_latency_ms / 1000,
    }


def estimate_line(estimate: dict) -> str:
    return (
        f"peak throughput × minimal latency ({estimate['peak_throughput_rps']:.0f} req/s × "
        f"{ms_text(estimate['min_latency_ms'])}) estimates {estimate['workers']:.1f} workers "
        f"serving {estimate['endpoint']}"
    )
