"""Memory pressure: tasks stall on reclaim or swap while the tier's time grows."""

from __future__ import annotations

from pinchpoint.analyze.causes.cause import Ask, Cause, Finding
from pinchpoint.analyze.causes.gauges import HOST, pct, rise
from pinchpoint.analyze.context import Context, load_text, rate_of, resource_of
from pinchpoint.analyze.thresholds import MEMORY_PRESSURE, MEMORY_PRESSURE_RISE
from pinchpoint.analyze.usage import process_group as host_of
from pinchpoint.rundir.shapes import StepJson


def memory(tier: str, steps: list[StepJson], ctx: Context) -> Finding | None:
    """Tasks stall on memory (reclaim, swapping) as the tier's time grows."""
    stall = rise(steps, HOST, "memory_pressure", MEMORY_PRESSURE, MEMORY_PRESSURE_RISE)
    if stall is None:
        return None
    evidence = [
        f"some task stalled on memory {pct(stall.peak)} of the time at "
        f"{load_text(stall.peak_step)} ({pct(stall.base)} at {load_text(steps[0])})"
    ]
    who = host_of(tier, steps, ctx)
    if who is not None:
        rss = resource_of(stall.peak_step, who, "rss_bytes")
        limit = resource_of(stall.peak_step, who, "memory_limit_bytes")
        if rss is not None:
            of = f" of a {limit / 2**20:.0f} MiB cgroup limit" if limit else ""
            evidence.append(
                f"{who}'s processes held {rss / 2**20:.0f} MiB{of} at {load_text(stall.peak_step)}"
            )
    summary = (
        f"{tier}'s time grows while the host runs short of memory from {load_text(stall.onset)}: "
        f"the kernel reclaims or swaps while requests wait. {MEMORY.advice}"
    )
    return Finding(
        who or tier, MEMORY, stall.onset["users"], evidence, f"memory pressure, seen in {tier}'s time",
        summary, rate_of(stall.onset),
    )  # fmt: skip


def _find_memory(ask: Ask) -> Finding | None:
    return memory(ask.tier, ask.steps, ask.ctx)


MEMORY = Cause(
    name="memory",
    resource="memory",
    scope="tier",
    doc=__doc__,
    advice="Give it more memory (or a higher cgroup limit) or use less per request.",
    saturates="memory",
    reads=("host.memory_pressure", "resources.rss_bytes"),
    thresholds=("MEMORY_PRESSURE", "MEMORY_PRESSURE_RISE"),
    needs_cpu=False,
    find=_find_memory,
)
