"""A tier that holds a few connections to what it calls (an app's database pool): its
requests wait inside it for a free one, while the callee, its time flat, serves no more at
once than the connections it is given.

Told apart by Little's law: the callee's concurrency (its throughput × its own time) stops
at a level while the load and the requests inside the tier keep growing, and the tier's
workers wait rather than compute. A tier that computes would hold its requests as long,
but its workers would want a core each."""

from __future__ import annotations

import math

from pinchpoint.analyze.causes.cause import Ask, Cause, Finding
from pinchpoint.analyze.causes.cpu import CPU_LINES_READS, cpu_lines
from pinchpoint.analyze.ceilings import (
    Prediction,
    cpu_ceiling,
    limited,
    load_ceiling,
    process_cpu_ceiling,
    workers_ceiling,
)
from pinchpoint.analyze.context import Context, busy_of, load_text, ms_text, rate_of
from pinchpoint.analyze.thresholds import (
    CARRIES,
    CPU_BOUND,
    CPU_SATURATED,
    GROWTH_MIN_MS,
    GROWTH_SHARE,
    HELD_LEAST,
    HELD_OVER,
    POOL_FLAT_RATIO,
    POOL_LOAD_GROWTH,
    POOL_QUEUED,
)
from pinchpoint.analyze.usage import GroupUse, group_use, process_group
from pinchpoint.rundir.shapes import StepJson


def held_connections(
    tier: str, group: str, steps: list[StepJson], onset: StepJson, ctx: Context
) -> Finding | None:
    """The first callee of `tier` that it reaches through a few connections, as a finding
    of `tier`; None when every callee serves as many at once as the load sends."""
    found = held_callee(tier, group, steps, ctx)
    if found is None:
        return None
    callee, held = found
    return _finding(tier, group, callee, held, steps, onset, ctx)


def held_callee(
    tier: str, group: str, steps: list[StepJson], ctx: Context
) -> tuple[str, list[StepJson]] | None:
    """The first callee `tier` reaches through a few connections, and the steps over which
    its concurrency stayed at their number; None when there is none."""
    top = steps[-1]
    use = group_use(group, top, ctx)
    own_ms = top["tiers"].get(tier, {}).get("self_p50_ms")
    if use.workers is None or _computes(use, top, own_ms) is not False:
        return None
    for callee in ctx.calls.get(tier, []):
        if ctx.roles.get(callee) == "app" and process_group(callee, steps, ctx) == group:
            continue  # the app inside the server's workers: handed requests, not connections
        held = _held(tier, callee, steps)
        # A level near the tier's own workers is its pool of workers (pool.py), not of
        # connections: the app inside gunicorn's threads, each holding one request.
        if held is not None and busy_of(callee, top) < POOL_QUEUED * use.workers:
            return callee, held
    return None


def _computes(use: GroupUse, top: StepJson, own_ms: float | None) -> bool | None:
    """Whether its busy workers compute rather than wait (None: not known): a process whose
    threads share one core (an interpreter lock) near it, or, per request, a time computing
    or waiting for a core that carries half the tier's own time. Threads that waited for a
    core a few milliseconds a request did not wait the rest of it for one."""
    used = use.cpu_per_worker
    if use.cpu is None or used is None or not top["throughput_rps"] or own_ms is None:
        return None
    if used >= CPU_BOUND:
        return True
    core_ms = 1000 * (use.cpu + (use.cpu_wait or 0.0)) / top["throughput_rps"]
    return core_ms >= CARRIES * own_ms


def _held(tier: str, callee: str, steps: list[StepJson]) -> list[StepJson] | None:
    """The steps over which the callee's concurrency stays flat while the load and the
    requests inside the tier grow past it, its own time flat; None when there are none."""
    usable = [s for s in steps if s["tiers"].get(callee, {}).get("p50_ms") is not None]
    if len(usable) < 3:
        return None
    base, top = usable[0], usable[-1]
    own = [_own_p50(callee, s) for s in (base, top)]
    if own[1] - own[0] > max(GROWTH_MIN_MS, GROWTH_SHARE * own[0]):
        return None
    at_once = busy_of(callee, top)
    if at_once < HELD_LEAST:
        return None
    # The steps from where the callee's concurrency reached its level on.
    flat = [s for s in usable if busy_of(callee, s) * POOL_FLAT_RATIO >= at_once]
    if len(flat) < 2 or flat[-1] is not top:
        return None
    if top["users"] < POOL_LOAD_GROWTH * flat[0]["users"]:
        return None
    if busy_of(tier, top) < max(at_once + 1.0, HELD_OVER * at_once):
        return None
    return flat


def _own_p50(tier: str, step: StepJson) -> float:
    p50 = step["tiers"][tier].get("p50_ms")
    if p50 is None:
        raise TypeError(f"{tier} logged no p50 in the step at {load_text(step)}")
    return float(p50)


def _finding(
    tier: str,
    group: str,
    callee: str,
    flat: list[StepJson],
    steps: list[StepJson],
    onset: StepJson,
    ctx: Context,
) -> Finding:
    first, top = flat[0], flat[-1]
    at_once = busy_of(callee, top)
    slots = max(1, round(at_once))
    own = [_own_p50(callee, s) for s in (steps[0], top)]
    mine = [s["tiers"].get(tier, {}).get("self_p50_ms") for s in (steps[0], top)]
    evidence = [
        f"{callee} served {busy_of(callee, first):.2f} requests at once at {load_text(first)} "
        f"and {at_once:.2f} at {load_text(top)} (Little's law: its throughput × its own "
        f"time), while {tier} held {busy_of(tier, first):.2f} and {busy_of(tier, top):.2f}",
        f"{callee}'s own time stayed flat: p50 {ms_text(own[0])} at {load_text(steps[0])}, "
        f"{ms_text(own[1])} at {load_text(top)}: it had room for more",
    ]
    if None not in mine:
        evidence.append(
            f"{tier}'s own time (outside {callee}) grew: p50 {ms_text(float(mine[0] or 0))} "
            f"→ {ms_text(float(mine[1] or 0))}: its requests waited inside it"
        )
    use = group_use(group, top, ctx)
    if use.cpu is not None:
        evidence.append(
            f"{group}'s processes used {use.cpu:.2f} cores for {use.busy:.2f} requests at "
            f"once at {load_text(top)}: its workers wait rather than compute"
        )
    evidence += cpu_lines(tier, group, steps, onset, ctx)
    summary = (
        f"{tier} reaches {callee} through about {slots} connection{'s' if slots > 1 else ''} "
        f"at once from {load_text(first)}: its requests wait inside it for a free one, while "
        f"{callee}'s own time stays flat and {group}'s workers wait rather than compute. Its pool "
        f"of connections to {callee} is too small (SQLAlchemy's pool_size and max_overflow, "
        f"psycopg_pool's max_size, a client's max connections): raise it; {callee} has room."
    )
    return Finding(
        tier, CONNECTION_POOL, first["users"], evidence,
        f"{tier}'s connections to {callee} (about {slots} at once)", summary, rate_of(first),
    )  # fmt: skip


def _find_held(ask: Ask) -> Finding | None:
    if ask.group is None or not ask.ctx.calls.get(ask.tier):
        return None
    return held_connections(ask.tier, ask.group, ask.steps, ask.onset, ask.ctx)


def predict_connections(tier: str, steps: list[StepJson], ctx: Context) -> Prediction | None:
    top, low = steps[-1], steps[0]
    group = process_group(tier, steps, ctx)
    found = held_callee(tier, group, steps, ctx) if group is not None else None
    if group is None or found is None:
        return None
    at_once, x = busy_of(found[0], top), top["throughput_rps"]
    use = group_use(group, top, ctx)
    assert use.workers is not None  # held_callee found them
    ceilings = {"load": load_ceiling(steps), "cpu": cpu_ceiling(steps, ctx)}
    if workers := workers_ceiling(group, use.workers, low, ctx):
        ceilings["workers"] = workers  # before any request waited for a connection
    if use.threaded and (most := process_cpu_ceiling(use, x)):
        ceilings["process_cpu"] = most
    # Connections for the first of the other ceilings, each in use at most CPU_SATURATED of
    # the time there (past it requests queue for one), and no more than the workers that
    # could hold them.
    now = max(1, round(at_once))
    to = math.ceil(at_once * min(ceilings.values()) / (x * CPU_SATURATED))
    to = max(now + 1, min(to, use.workers))
    ceilings = {"connections": x * to / at_once, **ceilings}
    return limited(tier, "connections", now, to, top, ceilings, ctx)


CONNECTION_POOL = Cause(
    name="connection_pool",
    resource="connection_pool",
    scope="tier",
    doc=__doc__,
    advice="Raise the tier's pool of connections to its callee.",
    saturates="the connections a tier holds to what it calls",
    reads=("tiers.p50_ms", "tiers.self_p50_ms", *CPU_LINES_READS),
    thresholds=(
        "CARRIES",
        "CPU_BOUND",
        "GROWTH_MIN_MS",
        "GROWTH_SHARE",
        "HELD_LEAST",
        "HELD_OVER",
        "POOL_FLAT_RATIO",
        "POOL_LOAD_GROWTH",
        "POOL_QUEUED",
    ),
    needs_cpu=False,
    find=_find_held,
    predict=predict_connections,
    effect_of_one_at_a_time=True,
)
