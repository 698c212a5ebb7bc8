"""What limits a tier whose own time grows, found from cause to effect: one cause to a
module, asked in the registry's order.

A saturated resource fills the pools above it: a throttled cgroup makes each worker hold
its slot longer, a lock makes the worker wait, a full link blocks the worker's write, a
busy disk its fsync. So the resources that cause are asked first — the proxy's own queue,
the cgroup quota, database locks, the network link, the disk, memory — then a callee known
only from its records, and only then the worker pool and the CPU, told apart by what a
busy worker wants; last, a network path whose ceiling no gauge shows. A tier none of them
explains is named for its own time.

To add a cause: a module here with its function and a `Cause` entry (what it reads, what
it saturates, whether it needs a core), its place in
TIER_CAUSES, its thresholds in analyze/thresholds.py, and a test that builds steps for it.
"""

from __future__ import annotations

from pinchpoint.analyze.causes.callee import CALLEE
from pinchpoint.analyze.causes.callee_pool import CALLEE_POOL
from pinchpoint.analyze.causes.cause import Ask, Cause
from pinchpoint.analyze.causes.connections import CONNECTION_POOL
from pinchpoint.analyze.causes.cpu import HOST_CPU
from pinchpoint.analyze.causes.cpu_quota import CPU_QUOTA
from pinchpoint.analyze.causes.db_lock import DB_LOCK
from pinchpoint.analyze.causes.disk import DISK
from pinchpoint.analyze.causes.event_loop import EVENT_LOOP
from pinchpoint.analyze.causes.flat_bytes import FLAT_BYTES
from pinchpoint.analyze.causes.generator import GENERATOR
from pinchpoint.analyze.causes.link import LINK
from pinchpoint.analyze.causes.memory import MEMORY
from pinchpoint.analyze.causes.neighbours import NEIGHBOURS
from pinchpoint.analyze.causes.own_time import OWN_TIME, own_time
from pinchpoint.analyze.causes.pool import POOL, pool_or_cpu
from pinchpoint.analyze.causes.proxy_queue import PROXY_QUEUE
from pinchpoint.analyze.causes.refusals import REFUSED
from pinchpoint.analyze.causes.serialized import SERIALIZED
from pinchpoint.analyze.causes.wait_chain import one_core_callee, waits_on_one_core
from pinchpoint.analyze.context import Context
from pinchpoint.analyze.findings import Finding
from pinchpoint.analyze.usage import process_group

__all__ = [
    "CAUSES",
    "TIER_CAUSES",
    "Ask",
    "Cause",
    "cause_of",
    "own_time",
    "pool_or_cpu",
    "tier_cause",
]

# Asked of a tier whose own time grew, in this order; the first that fires names it.
TIER_CAUSES: tuple[Cause, ...] = (
    PROXY_QUEUE,
    CPU_QUOTA,
    DB_LOCK,
    LINK,
    DISK,
    MEMORY,
    CALLEE,
    CALLEE_POOL,
    CONNECTION_POOL,
    EVENT_LOOP,
    POOL,
    FLAT_BYTES,
)
# Every cause the verdict can name, in the order the verdict asks: over the whole run (the
# generator, refusals, one request among several), then each tier's (TIER_CAUSES, the CPU
# found with the pool, the tier's own time), and the neighbours as a finding of their own.
CAUSES: tuple[Cause, ...] = (
    GENERATOR,
    REFUSED,
    SERIALIZED,
    *TIER_CAUSES,
    HOST_CPU,
    OWN_TIME,
    NEIGHBOURS,
)


def tier_cause(
    tier: str, steps: list[dict], onset: dict, ctx: Context, estimate: dict | None
) -> Finding:
    """The resource behind a tier's growing time: the first cause of TIER_CAUSES that
    fires, else the tier's own time."""
    ask = Ask(tier, steps, onset, ctx, estimate, process_group(tier, steps, ctx))
    for cause in TIER_CAUSES:
        assert cause.find is not None
        found = cause.find(ask)
        if found is not None:
            return found
    # A tier that waits on a callee running on one saturated thread, with no pool to fill.
    callee = one_core_callee(tier, steps, ctx)
    if callee is not None:
        return waits_on_one_core(tier, ask.group, callee, steps, [], ctx)
    return own_time(tier, ask.group, steps, onset, ctx)


def cause_of(resource: str) -> Cause:
    """The cause that names this resource (the first, where several do)."""
    return next(c for c in CAUSES if c.resource == resource)
