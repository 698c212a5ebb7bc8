"""A callee known only from its log or spans that serves a few requests at once: its
callers queue for it while its own time stays flat."""

from __future__ import annotations

from pinchpoint.analyze.causes.cause import Ask, Cause, Finding
from pinchpoint.analyze.causes.cpu import host_saturated
from pinchpoint.analyze.causes.queues import queue_grows, queue_onset
from pinchpoint.analyze.ceilings import predict_pool
from pinchpoint.analyze.context import Context, busy_of, load_text, ms_text, rate_of
from pinchpoint.analyze.usage import host_use
from pinchpoint.rundir.shapes import StepJson


def remote_concurrency(tier: str, steps: list[StepJson], ctx: Context) -> Finding | None:
    """A tier whose processes are not sampled (a service known from its log or spans) and
    whose callers wait longer for it while its own time stays flat: it serves a limited
    number of requests at once. A CPU that slowed it would lengthen its own time; the CPU
    of the processes that call it says nothing of its own."""
    if not queue_grows(tier, steps):
        return None
    base, top = (s["tiers"].get(tier, {}) for s in (steps[0], steps[-1]))
    onset = queue_onset(tier, steps, "queue_p50_ms")
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
        tier, CALLEE, onset["users"], evidence,
        f"{tier} concurrency (about {slots} at once)", summary, rate_of(onset),
    )  # fmt: skip


def _find_callee(ask: Ask) -> Finding | None:
    return remote_concurrency(ask.tier, ask.steps, ask.ctx) if ask.group != ask.tier else None


CALLEE = Cause(
    name="callee",
    resource="worker_pool",
    scope="tier",
    doc=__doc__,
    advice="Give the callee more workers or connections.",
    saturates="a callee's workers or connections",
    reads=("tiers.queue_p50_ms", "tiers.p50_ms", "tiers.concurrency"),
    thresholds=("QUEUE_GROWTH_MS", "QUEUE_OVER_SERVICE", "CPU_SATURATED"),
    needs_cpu=False,
    find=_find_callee,
    computes=True,
    predict=predict_pool,
    effect_of_one_at_a_time=True,
)
