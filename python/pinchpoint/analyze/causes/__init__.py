"""Every cause the verdict can name, one to a module, asked in the registry's order.

The whole run is asked first: a generator short of CPU, a proxy that refuses, one request
among several whose time grows. Then, of each tier whose own time grows, from cause to
effect: a saturated resource fills the pools above it (a throttled cgroup makes each worker
hold its slot longer, a lock makes the worker wait, a full link blocks the worker's write, a
busy disk its fsync), so the resources that cause are asked first — the proxy's own queue,
the cgroup quota, database locks, the network link, the disk, memory — then a callee known
only from its records, and only then the worker pool and the CPU, told apart by what a busy
worker wants; then a network path whose ceiling no gauge shows and a callee's one saturated
thread. A tier none of them explains is named for its own time. The neighbours' CPU is a
finding of its own beside the decision.

To add a cause: a module here with its `Cause` (docs/architecture.md, "Adding a cause"), its
line in CAUSES, and a test that builds steps for it.
"""

from __future__ import annotations

from typing import Any

from pinchpoint.analyze.causes.callee import CALLEE
from pinchpoint.analyze.causes.callee_pool import CALLEE_POOL
from pinchpoint.analyze.causes.cause import Ask, Cause, Finding, Judged, RunAsk
from pinchpoint.analyze.causes.connections import CONNECTION_POOL
from pinchpoint.analyze.causes.cpu import HOST_CPU
from pinchpoint.analyze.causes.cpu_quota import CPU_QUOTA
from pinchpoint.analyze.causes.db_lock import DB_LOCK
from pinchpoint.analyze.causes.disk import DISK
from pinchpoint.analyze.causes.event_loop import BUSY_LOOPS, EVENT_LOOP
from pinchpoint.analyze.causes.flat_bytes import FLAT_BYTES
from pinchpoint.analyze.causes.generator import GENERATOR
from pinchpoint.analyze.causes.link import LINK
from pinchpoint.analyze.causes.memory import MEMORY
from pinchpoint.analyze.causes.neighbours import NEIGHBOURS
from pinchpoint.analyze.causes.own_time import OWN_TIME
from pinchpoint.analyze.causes.pool import POOL
from pinchpoint.analyze.causes.proxy_queue import PROXY_QUEUE
from pinchpoint.analyze.causes.refusals import REFUSED
from pinchpoint.analyze.causes.registry import Registry
from pinchpoint.analyze.causes.serialized import SERIALIZED
from pinchpoint.analyze.causes.wait_chain import ONE_CORE
from pinchpoint.analyze.context import Context
from pinchpoint.rundir.shapes import StepJson

__all__ = ["CAUSES", "Ask", "Cause", "Judged", "Registry", "RunAsk", "tier_cause"]

# In the order the verdict asks them, within each scope (cause.py says what a scope is).
CAUSES = Registry(
    (
        GENERATOR,
        REFUSED,
        SERIALIZED,
        NEIGHBOURS,
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
        ONE_CORE,
        OWN_TIME,
        HOST_CPU,
        BUSY_LOOPS,
    )
)


def tier_cause(
    tier: str, steps: list[StepJson], onset: StepJson, ctx: Context, estimate: dict[str, Any] | None
) -> Finding:
    """The resource behind a tier's growing time, asked of CAUSES."""
    return CAUSES.tier_finding(tier, steps, onset, ctx, estimate)
