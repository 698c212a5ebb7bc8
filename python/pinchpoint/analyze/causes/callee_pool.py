"""A callee whose own workers are all busy: its callers wait for it.

A request a tier passes on waits in the callee's listen backlog until one of the callee's
workers takes it, and the callee's log times it from then: its own time stays flat while
its callers hold more and more requests. When the callee's pool size is known (its server's
settings, the plan, or Little's law) and it serves about that many at once, the callee's
pool is the limit — not the caller's connections to it, and not an event loop of the
caller's that waits well. Its workers are then judged as any pool's: waiting or computing.
"""

from __future__ import annotations

from dataclasses import replace

from pinchpoint.analyze.causes.cause import Ask, Cause, Finding
from pinchpoint.analyze.causes.cpu import CPU_LINES_READS
from pinchpoint.analyze.causes.pool import pool_or_cpu
from pinchpoint.analyze.ceilings import predict_pool
from pinchpoint.analyze.context import Context, busy_of, load_text, logged_callees, workers_of
from pinchpoint.analyze.thresholds import POOL_FULL
from pinchpoint.analyze.usage import process_group
from pinchpoint.rundir.shapes import StepJson


def full_callee(tier: str, group: str | None, steps: list[StepJson], ctx: Context) -> str | None:
    """The first callee of `tier`, in processes of its own, whose known pool served at
    least POOL_FULL of its slots at the heaviest step while `tier` held a request more than
    it served; None otherwise."""
    top = steps[-1]
    for callee in logged_callees(tier, ctx.calls, set(top.get("tiers", {}))):
        callee_group = process_group(callee, steps, ctx)
        if callee_group is None or callee_group == group:
            continue
        slots = workers_of(callee_group, top, ctx)
        if (callee_group not in ctx.pools and callee_group not in ctx.workers) or not slots:
            continue
        served = busy_of(callee, top)
        if served >= POOL_FULL * slots and busy_of(tier, top) >= served + 1.0:
            return callee
    return None


def _find_full_callee(ask: Ask) -> Finding | None:
    callee = full_callee(ask.tier, ask.group, ask.steps, ask.ctx)
    if callee is None:
        return None
    steps, ctx, top = ask.steps, ask.ctx, ask.steps[-1]
    callee_group = process_group(callee, steps, ctx) or callee
    found = pool_or_cpu(callee, callee_group, steps, ask.onset, ctx, None)
    if found is None:
        return None
    waits = (
        f"{ask.tier} held {busy_of(ask.tier, top):.2f} requests at once at {load_text(top)} "
        f"while {callee} served {busy_of(callee, top):.2f} of its "
        f"{workers_of(callee_group, top, ctx)} slots: {ask.tier}'s requests wait for "
        f"{callee}'s workers, in its listen backlog, outside {callee}'s own log"
    )
    return replace(found, evidence=[waits, *found.evidence])


CALLEE_POOL = Cause(
    name="callee_pool",
    resource="worker_pool",
    scope="tier",
    doc=__doc__,
    advice="Give the callee more workers, or make each of its requests shorter.",
    saturates="a callee's own pool of workers",
    reads=("tiers.queue_p50_ms", "resources.pool_kind", "resources.pool_server", *CPU_LINES_READS),
    thresholds=("POOL_FULL",),
    needs_cpu=False,
    find=_find_full_callee,
    computes=True,
    predict=predict_pool,
    effect_of_one_at_a_time=True,
)
