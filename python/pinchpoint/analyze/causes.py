"""What limits a tier whose own time grows, found from cause to effect.

A saturated resource fills the pools above it: a throttled cgroup makes each worker hold
its slot longer, a lock makes the worker wait, a full link blocks the worker's write, a busy
disk its fsync. So the resources that cause are asked first — the cgroup quota, database
locks, the network link, the disk, memory — and only then the worker pool and the CPU,
told apart by what a busy worker wants: a worker that computes all the time (its CPU plus
its wait for a core near one core) is limited by the cores it can get, one that waits is
limited by the number of workers.
"""

from __future__ import annotations

from pinchpoint.analyze.context import (
    Context,
    busy_of,
    from_onset,
    load_text,
    ms_text,
    pool_known,
    position,
    rate_of,
)
from pinchpoint.analyze.findings import Finding, cpu_quota, db_lock, estimate_line
from pinchpoint.analyze.host_cpu import (
    consumer,
    cpu_finding,
    cpu_lines,
    first_filled,
    host_saturated,
    neighbour_made_wait,
    neighbour_wait_line,
    stack_fills_cpu,
)
from pinchpoint.analyze.host_findings import bandwidth, disk, memory
from pinchpoint.analyze.thresholds import (
    CPU_BOUND,
    FLAT_LOAD_GROWTH,
    FLAT_SPREAD,
    IDLE_CORE,
    LARGE_RESPONSE,
    POOL_FULL,
    POOL_QUEUED,
    QUEUE_OVER_SERVICE,
)
from pinchpoint.analyze.usage import GroupUse, group_use, host_use, process_group


def tier_cause(
    tier: str, steps: list[dict], onset: dict, ctx: Context, estimate: dict | None
) -> Finding:
    """The resource behind a tier's growing time, first from the causes that fill pools."""
    group = process_group(tier, steps, ctx)
    found = (
        proxy_queue(tier, steps, ctx)
        or cpu_quota(tier, steps, ctx)
        or db_lock(tier, steps, ctx, onset["users"])
        or bandwidth(tier, steps, ctx)
        or disk(tier, steps, ctx)
        or memory(tier, steps, ctx)
    )
    if found is not None:
        return found
    if group != tier and (found := remote_concurrency(tier, steps, ctx)) is not None:
        return found
    if group is not None:
        found = pool_or_cpu(tier, group, steps, onset, ctx, estimate)
        if found is not None:
            return found
    return flat_bytes(tier, steps, onset) or own_time(tier, group, steps, onset, ctx)


def flat_bytes(tier: str, steps: list[dict], onset: dict) -> Finding | None:
    """Nothing measured saturates, yet the bytes the client receives per second stop at a
    ceiling past the onset while the load grows, and responses are large enough for a link
    to be what stops them: a network path with a ceiling the host does not expose."""
    after = from_onset(steps, onset)
    rates = [s.get("bytes_per_s") or 0.0 for s in after]
    sent = [s.get("requests") or 0 for s in after]
    if len(after) < 2 or min(rates) <= 0 or not all(sent):
        return None
    mean_size = sum(rates) / sum(s["throughput_rps"] or 1e-9 for s in after)
    grew = after[-1]["users"] >= FLAT_LOAD_GROWTH * max(after[0]["users"], 1)
    flat = max(rates) <= FLAT_SPREAD * min(rates)
    if not (grew and flat and mean_size >= LARGE_RESPONSE):
        return None
    ceiling = sum(rates) / len(rates)
    evidence = [
        f"the client received {ceiling * 8 / 1e6:.1f} Mbit/s from {load_text(onset)} to "
        f"{load_text(after[-1])} (within {100 * (FLAT_SPREAD - 1):.0f}%) while the load grew "
        f"{after[-1]['users'] / max(after[0]['users'], 1):.1f}×; responses of "
        f"{mean_size / 1024:.0f} KiB on average",
        "no worker pool, CPU, quota, lock or disk was saturated, and no link's ceiling is known",
    ]
    summary = (
        f"Throughput stops at a constant {ceiling * 8 / 1e6:.1f} Mbit/s from {load_text(onset)} "
        f"while nothing measured saturates and {tier}'s time grows: a network path with a "
        "ceiling (a shaped or slow link between the tiers, or to the client) is the likely "
        "limit. Check the link's speed and shaping (tc -s qdisc), or send fewer bytes."
    )
    return Finding(
        "network", "bandwidth", onset["users"], evidence,
        f"a network path at {ceiling * 8 / 1e6:.1f} Mbit/s (inferred)", summary, rate_of(onset),
    )  # fmt: skip


def proxy_queue(tier: str, steps: list[dict], ctx: Context) -> Finding | None:
    """The tier queues requests itself (it logs the wait: HAProxy's Tw) while what it calls
    has room: its own connection limit holds them back (maxconn)."""
    base, top = steps[0], steps[-1]
    queued = [s["tiers"].get(tier, {}).get("logged_queue_p50_ms") for s in (base, top)]
    if queued[1] is None:
        return None
    grew = queued[1] - (queued[0] or 0.0)
    own = [s["tiers"].get(tier, {}).get("self_p50_ms") or 0.0 for s in (base, top)]
    if grew <= 0 or grew < 0.5 * (own[1] - own[0]):
        return None
    full = [
        callee
        for callee in ctx.calls.get(tier, [])
        if (group_use(callee, top, ctx).pool or 0.0) >= POOL_FULL
    ]
    if full:
        return None
    onset = _queue_onset(tier, steps, "logged_queue_p50_ms")
    behind = ", ".join(
        f"{c} ran {group_use(c, top, ctx).busy:.2f} requests at a time"
        + (f" against {w} workers" if (w := group_use(c, top, ctx).workers) else "")
        for c in ctx.calls.get(tier, [])
    )
    evidence = [
        f"{tier} logged its requests waiting in its own queue p50 {ms_text(queued[1])} at "
        f"{load_text(top)}, {ms_text(queued[0] or 0.0)} at {load_text(base)}",
        f"behind it {behind}: they had room",
    ]
    summary = (
        f"{tier} holds requests in its queue from {load_text(onset)} while the tier behind it "
        "has room: its own limit on connections to the server (maxconn) is the ceiling. "
        "Raise it to what the server can take."
    )
    return Finding(
        tier, "proxy_limit", onset["users"], evidence, f"{tier} connection limit (queueing)",
        summary, rate_of(onset),
    )  # fmt: skip


def _queue_onset(tier: str, steps: list[dict], key: str) -> dict:
    """The first step whose queue time before the tier (`key`) grew by more than a quarter
    of its growth from the lightest step to the heaviest; the heaviest without one."""

    def queued(step: dict) -> float:
        return float(step["tiers"].get(tier, {}).get(key) or 0.0)

    grew = queued(steps[-1]) - queued(steps[0])
    return next((s for s in steps if queued(s) - queued(steps[0]) > 0.25 * grew), steps[-1])


def remote_concurrency(tier: str, steps: list[dict], ctx: Context) -> Finding | None:
    """A tier whose processes are not sampled (a service known from its log or spans) and
    whose callers wait longer for it while its own time stays flat: it serves a limited
    number of requests at once. A CPU that slowed it would lengthen its own time; the CPU
    of the processes that call it says nothing of its own."""
    if not _queue_grows(tier, steps):
        return None
    base, top = (s["tiers"].get(tier, {}) for s in (steps[0], steps[-1]))
    onset = _queue_onset(tier, steps, "queue_p50_ms")
    at_once = busy_of(tier, steps[-1])
    evidence = [
        f"requests waited for {tier} p50 {ms_text(top.get('queue_p50_ms') or 0.0)} at "
        f"{load_text(steps[-1])}, {ms_text(base.get('queue_p50_ms') or 0.0)} at "
        f"{load_text(steps[0])}, while its own time stayed at p50 "
        f"{ms_text(base.get('p50_ms') or 0.0)} → {ms_text(top.get('p50_ms') or 0.0)}: "
        "they queue for it, its work is not slower",
        f"{tier} served {at_once:.2f} requests at once by Little's law (throughput × its own "
        f"time) at {load_text(steps[-1])}",
        f"{tier}'s processes are not sampled: give it a process (pid_file or match) to see "
        "its workers and CPU",
    ]
    host = host_use(steps[-1], ctx)
    if host.busy is not None and host_saturated(steps, onset, ctx):
        evidence.append(
            f"host CPU {host.busy:.2f} of {ctx.cpu_count} cores at {load_text(steps[-1])} (the "
            f"stack {host.stack:.2f}, other processes {host.neighbours:.2f}) does not explain "
            f"it: {tier}'s own time did not grow"
        )
    slots = max(1, round(at_once))
    summary = (
        f"{tier} serves about {slots} request{'s' if slots > 1 else ''} at once and its "
        f"callers queue for it from {load_text(onset)}, while its own time stays flat: its "
        f"workers (or the connections to it) are too few, not its CPU. Give {tier} more "
        "workers or connections."
    )
    return Finding(
        tier, "worker_pool", onset["users"], evidence,
        f"{tier} concurrency (about {slots} at once)", summary, rate_of(onset),
    )  # fmt: skip


def pool_or_cpu(
    tier: str, group: str, steps: list[dict], onset: dict, ctx: Context, estimate: dict | None
) -> Finding | None:
    """A full pool of waiting workers; a full pool of computing workers on a host with idle
    cores (too few workers); computing workers on a host without (the CPU)."""
    top = steps[-1]
    use, host = group_use(group, top, ctx), host_use(top, ctx)
    evidence = cpu_lines(tier, group, steps, onset, ctx)
    full = use.pool is not None and (
        use.pool >= POOL_FULL or (use.pool >= POOL_QUEUED and _queue_grows(group, steps))
    )
    computing = use.demand_per_worker is not None and use.demand_per_worker >= CPU_BOUND
    waited_on_neighbour = computing and neighbour_made_wait(host, ctx)
    computing = computing and not waited_on_neighbour
    if full and not computing and not pool_known(group, ctx):
        # Workers counted from processes, not found: an event loop or a thread pool may
        # hold many waiting requests each, so only computing ones say the pool is full.
        full = False
    if full:
        evidence = [*_pool_lines(tier, use, steps, ctx), *evidence]
        if waited_on_neighbour:
            evidence.append(neighbour_wait_line(host, ctx))
        if estimate is not None:
            evidence.append(estimate_line(estimate))
        if not computing and _cpu_filled_first(group, steps, onset, ctx):
            return cpu_finding(tier, group, steps, onset, evidence, ctx)
        if not computing:
            return _pool(group, steps, evidence, ctx, computing=False, idle=host.idle, knee=onset)
        if host.idle >= IDLE_CORE:
            return _pool(group, steps, evidence, ctx, computing=True, idle=host.idle, knee=onset)
        return cpu_finding(tier, group, steps, onset, evidence, ctx)
    if host_saturated(steps, onset, ctx) and _computes(use) and stack_fills_cpu(use, host, ctx):
        return cpu_finding(tier, group, steps, onset, evidence, ctx)
    if _processes_busy(use) and host.idle >= IDLE_CORE:
        # Threads of one process share its interpreter lock: every process wanting a core
        # is a pool of processes too small, whatever its threads' occupancy says.
        evidence = [*_pool_lines(tier, use, steps, ctx), *evidence]
        return _pool(
            group, steps, evidence, ctx, computing=True, idle=host.idle, knee=onset, onset=onset
        )
    return None


def _cpu_filled_first(group: str, steps: list[dict], onset: dict, ctx: Context) -> bool:
    """Whether another of the stack's groups used most of the host's CPU, and the stack
    filled the cores at a lighter step than the one where this pool of waiting workers
    filled: its workers wait on work that waits for a core, and the pool is full because
    the CPU is."""
    top = consumer(steps[-1], ctx)
    filled = first_filled(steps, ctx)
    if top is None or top[0] == group or filled is None:
        return False
    return position(steps, filled) < position(steps, _pool_onset(group, steps, ctx, onset))


def _processes_busy(use: GroupUse) -> bool:
    """Whether each of the group's worker processes wanted about a core (used plus waited)."""
    processes = use.processes or use.workers
    demand = use.demand
    return bool(processes and demand is not None and demand >= CPU_BOUND * processes)


def _computes(use: GroupUse) -> bool:
    """Whether the group's threads wanted CPU: they used or waited for a good part of a core."""
    demand = use.demand
    return demand is not None and demand >= 0.25


def _queue_grows(group: str, steps: list[dict]) -> bool:
    """Whether requests waited longer before the group at the heaviest step, by far more than
    its own time grew: they queued for a worker rather than took longer in one."""
    base, top = (s["tiers"].get(group, {}) for s in (steps[0], steps[-1]))
    queued = (top.get("queue_p50_ms") or 0.0) - (base.get("queue_p50_ms") or 0.0)
    served = (top.get("p50_ms") or 0.0) - (base.get("p50_ms") or 0.0)
    return queued >= 1.0 and queued >= QUEUE_OVER_SERVICE * max(served, 0.0)


def _pool_onset(group: str, steps: list[dict], ctx: Context, knee: dict) -> dict:
    """The first step whose occupancy reads full (POOL_FULL); for a pool full by its queue
    (its logged time leaves part of its work out), the first step near the occupancy it
    read when full, or the knee where the latency began to grow, whichever came first."""
    top = group_use(group, steps[-1], ctx).pool or 0.0
    mark = POOL_FULL if top >= POOL_FULL else 0.9 * top
    first = next((s for s in steps if (group_use(group, s, ctx).pool or 0.0) >= mark), steps[-1])
    return first if top >= POOL_FULL else min(first, knee, key=lambda s: s["users"])


def _pool(
    group: str,
    steps: list[dict],
    evidence: list[str],
    ctx: Context,
    computing: bool,
    idle: float,
    knee: dict,
    onset: dict | None = None,
) -> Finding:
    onset = onset or _pool_onset(group, steps, ctx, knee)
    workers = group_use(group, steps[-1], ctx).workers
    if computing:
        summary = (
            f"{group}'s {workers} workers are all busy from {load_text(onset)}, each computing "
            f"about a core, while the host still had {idle:.1f} idle cores: the pool is too small "
            f"for the host. Add workers (up to {int(workers or 0) + int(idle + 0.25)}, one per "
            "idle core); more than the cores will not help."
        )
    else:
        summary = (
            f"{group}'s worker pool is full from {load_text(onset)}: requests queue for a free "
            "worker while the workers themselves mostly wait rather than compute. Add workers "
            "(or make each request shorter)."
        )
    return Finding(
        group, "worker_pool", onset["users"], evidence, f"{group} worker pool", summary,
        rate_of(onset),
    )  # fmt: skip


def own_time(tier: str, group: str | None, steps: list[dict], onset: dict, ctx: Context) -> Finding:
    evidence = cpu_lines(tier, group, steps, onset, ctx) if group else []
    return Finding(
        tier, "time", onset["users"], evidence,
        f"{tier} (its own time grows; no saturated resource found)",
        f"{tier}'s own time grows with load from {load_text(onset)}.", rate_of(onset),
    )  # fmt: skip


def _pool_lines(tier: str, use: GroupUse, steps: list[dict], ctx: Context) -> list[str]:
    top = steps[-1]
    queue = (top["tiers"].get(use.component, {}).get("queue_p50_ms") or 0.0) - (
        steps[0]["tiers"].get(use.component, {}).get("queue_p50_ms") or 0.0
    )
    lines = [
        f"{use.component} concurrency by Little's law (throughput × time in {use.component}) is "
        f"{use.busy:.2f} at {load_text(top)} against {use.workers} workers"
    ]
    if use.component in ctx.pools:
        lines.append(ctx.pools[use.component].line(use.component))
    if queue > 0:
        lines.insert(
            0,
            f"queue time before {use.component} p50 {ms_text(queue)} higher at {load_text(top)}: "
            "requests wait for a free worker",
        )
    if use.pool is not None and use.pool < POOL_FULL:
        lines.append(
            f"{use.pool:.0%} occupancy counts as full: requests queued before {use.component} "
            "while its own time stayed flat, so each worker is busy longer than its log says "
            "(between requests, or connections spread unevenly over its processes)"
        )
    if use.cpu is not None and use.busy > 0:
        wait = f" and waited for {use.cpu_wait:.2f} more" if use.cpu_wait else ""
        lines.append(
            f"{use.component}'s processes used {use.cpu:.2f} cores{wait}: "
            f"{use.demand_per_worker or 0.0:.2f} cores wanted per busy worker"
        )
    return lines
