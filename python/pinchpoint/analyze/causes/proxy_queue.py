"""A proxy that queues requests itself (HAProxy's maxconn) while the tier behind it has room."""

from __future__ import annotations

from pinchpoint.analyze.causes.cause import Ask, Cause, Finding
from pinchpoint.analyze.causes.queues import queue_onset
from pinchpoint.analyze.context import Context, load_text, ms_text, rate_of
from pinchpoint.analyze.thresholds import POOL_FULL
from pinchpoint.analyze.usage import group_use
from pinchpoint.rundir.shapes import StepJson


def proxy_queue(tier: str, steps: list[StepJson], ctx: Context) -> Finding | None:
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
    onset = queue_onset(tier, steps, "logged_queue_p50_ms")
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
        + PROXY_QUEUE.advice
    )
    return Finding(
        tier, PROXY_QUEUE, onset["users"], evidence, f"{tier} connection limit (queueing)",
        summary, rate_of(onset),
    )  # fmt: skip


def _find_proxy_queue(ask: Ask) -> Finding | None:
    return proxy_queue(ask.tier, ask.steps, ask.ctx)


PROXY_QUEUE = Cause(
    name="proxy_queue",
    resource="proxy_limit",
    scope="tier",
    doc=__doc__,
    advice="Raise it to what the server can take.",
    saturates="a proxy's connection limit, queueing",
    reads=("tiers.logged_queue_p50_ms", "tiers.self_p50_ms", "tiers.concurrency"),
    thresholds=("POOL_FULL",),
    needs_cpu=False,
    find=_find_proxy_queue,
)
