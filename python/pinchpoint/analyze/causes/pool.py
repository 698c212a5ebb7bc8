"""A pool of workers that is full, told apart from the CPU by what a busy worker wants: a
worker that computes all the time (its CPU plus its wait for a core near one core) is
limited by the cores it can get, one that waits by the number of workers."""

from __future__ import annotations

from typing import Any

from pinchpoint.analyze.causes.cause import Ask, Cause, Finding
from pinchpoint.analyze.causes.cpu import (
    CPU_LINES_READS,
    consumer,
    cpu_finding,
    cpu_lines,
    first_filled,
    host_saturated,
    neighbour_made_wait,
    neighbour_wait_line,
    stack_fills_cpu,
)
from pinchpoint.analyze.causes.queues import queue_grows
from pinchpoint.analyze.causes.wait_chain import (
    computing_callee,
    one_core_callee,
    waits_on_cpu,
    waits_on_one_core,
)
from pinchpoint.analyze.ceilings import predict_pool
from pinchpoint.analyze.context import Context, load_text, ms_text, pool_known, position, rate_of
from pinchpoint.analyze.findings import estimate_line
from pinchpoint.analyze.knobs import PoolTerms, pool_terms
from pinchpoint.analyze.thresholds import (
    CPU_BOUND,
    IDLE_CORE,
    PER_USER_SLOWED,
    POOL_FULL,
    POOL_QUEUED,
    QUEUE_GROWTH_MS,
)
from pinchpoint.analyze.usage import GroupUse, group_use, host_use
from pinchpoint.rundir.shapes import StepJson


def pool_or_cpu(
    tier: str,
    group: str,
    steps: list[StepJson],
    onset: StepJson,
    ctx: Context,
    estimate: dict[str, Any] | None,
) -> Finding | None:
    """A full pool of waiting workers; a full pool of computing workers on a host with idle
    cores (too few workers); computing workers on a host without (the CPU)."""
    top = steps[-1]
    use, host = group_use(group, top, ctx), host_use(top, ctx)
    evidence = cpu_lines(tier, group, steps, onset, ctx)
    full = use.pool is not None and (
        use.pool >= POOL_FULL or (use.pool >= POOL_QUEUED and queue_grows(group, steps))
    )
    computing = use.demand_per_worker is not None and use.demand_per_worker >= CPU_BOUND
    waited_on_neighbour = computing and neighbour_made_wait(host, ctx)
    computing = computing and not waited_on_neighbour
    if _users_fit(use, top):
        # No request can have waited for a worker: more workers would change nothing.
        full = False
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
        if not computing and (callee := computing_callee(tier, group, steps, onset, ctx)):
            return waits_on_cpu(tier, group, callee, steps, onset, evidence, ctx)
        if not computing and (callee := one_core_callee(tier, steps, ctx)):
            return waits_on_one_core(tier, group, callee, steps, evidence, ctx)
        if not computing:
            return _pool(group, steps, evidence, ctx, computing=False, idle=host.idle, knee=onset)
        if host.idle >= IDLE_CORE:
            return _pool(group, steps, evidence, ctx, computing=True, idle=host.idle, knee=onset)
        return cpu_finding(tier, group, steps, onset, evidence, ctx)
    if host_saturated(steps, onset, ctx) and _computes(use) and stack_fills_cpu(use, host, ctx):
        return cpu_finding(tier, group, steps, onset, evidence, ctx)
    if _processes_busy(use) and host.idle >= IDLE_CORE and not _users_fit(use, top, processes=True):
        # Threads of one process share its interpreter lock: every process wanting a core
        # is a pool of processes too small, whatever its threads' occupancy says.
        evidence = [*_pool_lines(tier, use, steps, ctx), *evidence]
        return _pool(
            group, steps, evidence, ctx, computing=True, idle=host.idle, knee=onset, onset=onset
        )
    return None


def _cpu_filled_first(group: str, steps: list[StepJson], onset: StepJson, ctx: Context) -> bool:
    """Whether another of the stack's groups used most of the host's CPU, and the stack
    filled the cores at a lighter step than the one where this pool of waiting workers
    filled: its workers wait on work that waits for a core, and the pool is full because
    the CPU is."""
    top = consumer(steps[-1], ctx)
    filled = first_filled(steps, ctx)
    if top is None or top[0] == group or filled is None:
        return False
    return position(steps, filled) < position(steps, _pool_onset(group, steps, ctx, onset))


def _users_fit(use: GroupUse, step: StepJson, processes: bool = False) -> bool:
    """Whether the pool has a slot (or a process) for every user of a closed-loop step:
    its users have at most one request each in flight, so none waited for a worker."""
    slots = (use.processes or use.workers) if processes else use.workers
    return step.get("kind", "users") == "users" and slots is not None and step["users"] <= slots


def _processes_busy(use: GroupUse) -> bool:
    """Whether each of the group's worker processes wanted about a core (used plus waited)."""
    processes = use.processes or use.workers
    demand = use.demand
    return bool(processes and demand is not None and demand >= CPU_BOUND * processes)


def _locked(use: GroupUse) -> bool:
    """Whether the group's threads outnumber its processes and every process wants a core."""
    return bool(use.processes and use.workers and use.processes < use.workers) and (
        _processes_busy(use)
    )


def _computes(use: GroupUse) -> bool:
    """Whether the group's threads wanted CPU: they used or waited for a good part of a core."""
    demand = use.demand
    return demand is not None and demand >= 0.25


def _pool_onset(
    group: str, steps: list[StepJson], ctx: Context, knee: StepJson, waited: bool = False
) -> StepJson:
    """The first step whose occupancy reads full (POOL_FULL), and where `waited`, whose
    requests waited for a slot (the start a finding names); for a pool full by its queue
    (its logged time leaves part of its work out), the first step near the occupancy it
    read when full, or the knee where the latency began to grow, whichever came first."""
    top = group_use(group, steps[-1], ctx).pool or 0.0
    mark = POOL_FULL if top >= POOL_FULL else 0.9 * top
    first = next(
        (s for s in steps if _full(group, s, ctx, mark, steps[0] if waited else None)), steps[-1]
    )
    return first if top >= POOL_FULL else min(first, knee, key=lambda s: s["users"])


def _full(
    group: str, step: StepJson, ctx: Context, mark: float, waited_since: StepJson | None
) -> bool:
    """Whether the step's occupancy reached `mark`, and, given `waited_since`, requests
    waited for a slot too (_waited)."""
    if (group_use(group, step, ctx).pool or 0.0) < mark:
        return False
    return waited_since is None or _waited(group, step, waited_since, ctx)


def _waited(group: str, step: StepJson, base: StepJson, ctx: Context) -> bool:
    """Whether requests waited for one of the group's slots: more users than slots, a
    queue before it grown since `base`, or, in closed loop, each user's throughput fallen
    below PER_USER_SLOWED of the base's (every slot busy, each request slower). All slots
    busy with one for every user, no queue and each user served as fast is not yet a
    limit (a uWSGI pool of 4 at 4 users)."""
    use = group_use(group, step, ctx)
    queue = [s["tiers"].get(use.component, {}).get("queue_p50_ms") or 0.0 for s in (base, step)]
    return (
        not _users_fit(use, step)
        or queue[1] - queue[0] >= QUEUE_GROWTH_MS
        or _per_user(step) < PER_USER_SLOWED * _per_user(base)
    )


def _per_user(step: StepJson) -> float:
    """A closed-loop step's throughput per user (0 in open loop or without users)."""
    users = step.get("users") or 0
    if step.get("kind", "users") != "users" or users <= 0:
        return 0.0
    return float(step.get("throughput_rps") or 0.0) / users


def _pool(
    group: str,
    steps: list[StepJson],
    evidence: list[str],
    ctx: Context,
    computing: bool,
    idle: float,
    knee: StepJson,
    onset: StepJson | None = None,
) -> Finding:
    onset = onset or _pool_onset(group, steps, ctx, knee, waited=True)
    use = group_use(group, steps[-1], ctx)
    workers = use.workers
    terms = pool_terms(group, steps[-1], use.processes)
    if computing and use.processes and _locked(use):
        summary = _locked_summary(group, use.processes, onset, idle, _knob(terms, "processes"))
    elif computing:
        summary = (
            f"{group}'s {workers} workers are all busy from {load_text(onset)}, each computing "
            f"about a core, while the host still had {idle:.1f} idle cores: the pool is too small "
            f"for the host. Add workers (up to {int(workers or 0) + int(idle + 0.25)}, one per "
            f"idle core){_knob(terms, 'workers')}; more than the cores will not help."
        )
    else:
        summary = (
            f"{group}'s worker pool is full from {load_text(onset)}: requests queue for a free "
            "worker while the workers themselves mostly wait rather than compute. Add workers"
            f"{_knob(terms, 'workers')} (or make each request shorter)."
        )
    return Finding(
        group, POOL, onset["users"], evidence, f"{group} worker pool", summary,
        rate_of(onset),
    )  # fmt: skip


def _knob(terms: PoolTerms, setting: str) -> str:
    """The server's own setting for `setting`: " with gunicorn --threads"."""
    knob = terms.knob(setting)
    return f" with {terms.server} {knob}" if knob else ""


def _locked_summary(
    group: str, processes: int, onset: StepJson, idle: float, knob: str = ""
) -> str:
    """Threads of a process share its interpreter lock: the processes are the pool."""
    some = f"{processes} worker processes each" if processes > 1 else "one worker process"
    verb = "compute" if processes > 1 else "computes"
    return (
        f"{group}'s {some} {verb} about a core from {load_text(onset)} (the threads of "
        f"one process share its interpreter lock), while the host still had {idle:.1f} idle "
        f"cores: add processes (up to {processes + int(idle + 0.25)}, one per idle core){knob}; "
        "more threads will not help."
    )


def _pool_lines(tier: str, use: GroupUse, steps: list[StepJson], ctx: Context) -> list[str]:
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
    if use.pool is not None and use.pool < POOL_FULL and _locked(use):
        lines.append(
            f"{use.pool:.0%} occupancy counts as full: each of its worker processes wants a core, "
            "and a request waits for the process's interpreter lock before a thread takes it, "
            "outside the time its log gives"
        )
    elif use.pool is not None and use.pool < POOL_FULL:
        lines.append(
            f"{use.pool:.0%} occupancy counts as full: requests queued before {use.component} "
            "while its own time stayed flat, so each worker is busy longer than its log says "
            "(between requests, or connections spread unevenly over its processes)"
        )
    if use.cpu is not None and use.busy > 0:
        wait = f" and waited for {use.cpu_wait:.2f} more" if use.cpu_wait else ""
        if use.cpu_wait and use.handed_over:
            wait += " (for cores that processes at low priority held, not counted)"
        lines.append(
            f"{use.component}'s processes used {use.cpu:.2f} cores{wait}: "
            f"{use.demand_per_worker or 0.0:.2f} cores wanted per busy worker"
        )
    return lines


def _find_pool(ask: Ask) -> Finding | None:
    return (
        pool_or_cpu(ask.tier, ask.group, ask.steps, ask.onset, ask.ctx, ask.estimate)
        if ask.group
        else None
    )


POOL = Cause(
    name="worker_pool",
    resource="worker_pool",
    scope="tier",
    doc=__doc__,
    advice="Add workers (or make each request shorter).",
    saturates="a pool of workers (or the cores its workers compute on)",
    reads=(
        "tiers.queue_p50_ms",
        "tiers.self_p50_ms",
        "tiers.p50_ms",
        "resources.pool_kind",
        "resources.pool_server",
        *CPU_LINES_READS,
    ),
    thresholds=(
        "CPU_BOUND",
        "IDLE_CORE",
        "PER_USER_SLOWED",
        "POOL_FULL",
        "POOL_QUEUED",
        "QUEUE_GROWTH_MS",
    ),
    needs_cpu=False,
    find=_find_pool,
    computes=True,
    predict=predict_pool,
    effect_of_one_at_a_time=True,
)
