"""The host's CPU as a tier's limit: when it is full, who fills it, and from which step.

A full CPU makes every tier's work wait for a core, so the time grows in every tier that
runs on the host, and the tier whose time grew most is not always the one that spends the
CPU: an app that waits on a database that computes shows the database's CPU in its own
time as run-queue waits of its own. The CPU's finding therefore names the stack's process
group that used most of it (the consumer: the component whose CPU per request to lower),
and starts where the stack first filled the cores, which may come before the tier's own
time rose past its threshold.
"""

from __future__ import annotations

from pinchpoint.analyze.causes.cause import Cause, Finding
from pinchpoint.analyze.context import (
    Context,
    from_onset,
    load_text,
    position,
    rate_of,
    resource_of,
    tier_cost,
)
from pinchpoint.analyze.thresholds import (
    CPU_PRESSURE_RISE,
    CPU_PRESSURE_SATURATED,
    CPU_SATURATED,
    NEIGHBOUR_SHARE,
)
from pinchpoint.analyze.usage import GroupUse, HostUse, group_use, host_use, sampled
from pinchpoint.rundir.shapes import StepJson

# What the CPU's lines of a tier (cpu_lines) read, through its group's and the host's use.
CPU_LINES_READS = (
    "tiers.concurrency",
    "resources.cpu_cores",
    "resources.cpu_wait_cores",
    "resources.cpu_quota_cores",
    "resources.cpu_throttled_share",
    "resources.lock_waits",
    "resources.processes",
    "host.cpu_cores",
    "host.cpu_nice_cores",
    "host.cpu_pressure",
    "generator.cpu_cores",
    "generator.cpu_wait_cores",
    "pools",
)


def host_saturated(steps: list[StepJson], onset: StepJson, ctx: Context) -> bool:
    """The host's CPU is full at the onset or a heavier step: its cores busy, or its tasks
    queued for a core more than they did at the lightest step."""
    after = from_onset(steps, onset)
    busy = max((host_use(s, ctx).busy or 0.0 for s in after), default=0.0)
    return busy >= CPU_SATURATED * ctx.cpu_count or _pressed(steps[0], after, ctx)


def cpu_contended(steps: list[StepJson], onset: StepJson, ctx: Context) -> bool:
    """The host's CPU is full from the onset, or its tasks waited for a core
    CPU_PRESSURE_RISE more of the time than at the lightest step, however little."""
    pressure = _pressure(steps[0], from_onset(steps, onset), ctx)
    return host_saturated(steps, onset, ctx) or (
        pressure is not None and pressure[1] - pressure[0] >= CPU_PRESSURE_RISE
    )


def stack_fills_cpu(use: GroupUse, host: HostUse, ctx: Context) -> bool:
    """Whether the stack's own CPU (and its wait for a core) fills what neighbours left of
    the host. A neighbour's CPU makes the stack's tasks wait for a core, but a stack that
    wants less than the rest is not limited by the CPU: its growth is the neighbour's."""
    if host.neighbours <= NEIGHBOUR_SHARE * ctx.cpu_count:
        return True
    wanted = host.stack + host.generator + (use.cpu_wait or 0.0)
    return wanted >= CPU_SATURATED * (ctx.cpu_count - host.neighbours)


def neighbour_made_wait(host: HostUse, ctx: Context) -> bool:
    """Whether processes outside the stack took a good share of the cores while the stack
    used less than they left: the stack's threads then waited for a core the neighbour
    held, and that wait says nothing of how much CPU the stack's own work wants."""
    if host.neighbours <= NEIGHBOUR_SHARE * ctx.cpu_count:
        return False
    return host.stack + host.generator < CPU_SATURATED * (ctx.cpu_count - host.neighbours)


def neighbour_wait_line(host: HostUse, ctx: Context) -> str:
    left = ctx.cpu_count - host.neighbours
    return (
        f"other processes took {host.neighbours:.2f} cores and the stack used "
        f"{host.stack + host.generator:.2f} of the {left:.2f} they left: its threads' wait "
        "for a core was the neighbour's doing, not its own work's"
    )


def filled_by_stack(step: StepJson, ctx: Context) -> bool:
    """Whether the stack (and the generator it drives) kept the host's cores busy at a step:
    the host at CPU_SATURATED of its cores, and the stack's share of what neighbours left
    at that share too."""
    host = host_use(step, ctx)
    if host.busy is None or host.busy < CPU_SATURATED * ctx.cpu_count:
        return False
    return host.stack + host.generator >= CPU_SATURATED * (ctx.cpu_count - host.neighbours)


def first_filled(steps: list[StepJson], ctx: Context) -> StepJson | None:
    """The lightest step from which the stack keeps the host's cores busy at every heavier
    step; None when it never does by the heaviest."""
    first = None
    for step in steps:
        first = (first or step) if filled_by_stack(step, ctx) else None
    return first


def consumer(step: StepJson, ctx: Context) -> tuple[str, dict[str, float]] | None:
    """The stack's process group that used the most CPU at a step, and every group's cores."""
    used = {
        name: cores
        for name in sampled(step)
        if (cores := resource_of(step, name, "cpu_cores")) is not None
    }
    if not used:
        return None
    return max(used, key=lambda name: used[name]), used


def cpu_finding(
    tier: str, group: str, steps: list[StepJson], onset: StepJson, evidence: list[str], ctx: Context
) -> Finding:
    """The host's CPU behind `tier`'s growth: named for the group that used most of it, from
    the step the stack filled the cores (or the tier's onset, if that came first)."""
    top = steps[-1]
    host = host_use(top, ctx)
    found = consumer(top, ctx)
    owner, used = found if found is not None else (group, {})
    filled = first_filled(steps, ctx)
    if filled is not None and position(steps, filled) < position(steps, onset):
        onset = filled
    if len(used) > 1:
        split = ", ".join(f"{name} {cores:.2f}" for name, cores in _by_use(used))
        evidence = [*evidence, f"the stack's processes used {split} cores at {load_text(top)}"]
    if owner == group and not _grew(tier, steps):
        name = f"host CPU ({ctx.cpu_count} cores), used most by {owner}"
        waits = "the requests' time grows as their work waits for a core"
        lower = f"less CPU per request in {owner}"
    elif owner == group:
        name = f"host CPU ({ctx.cpu_count} cores), seen first in {tier}'s time"
        waits = f"{tier}'s time grows as its work waits for a core"
        lower = "less CPU per request"
    else:
        name = f"host CPU ({ctx.cpu_count} cores), used most by {owner}"
        waits = f"{tier}'s time grows as its work, and {owner}'s, waits for a core"
        lower = f"less CPU per request in {owner}"
    if host.neighbours >= 0.5 * max(host.stack, 1e-9):
        cause = (
            f"other processes on the host took {host.neighbours:.2f} of its cores, the stack "
            f"{host.stack:.2f}"
        )
        advice = "Move the other processes off this host, or give it more cores."
    else:
        cause = f"the stack used {host.stack:.2f} of them"
        if owner != group:
            cause += f", {owner} {used[owner]:.2f}"
        advice = f"More workers will not help; {lower} or more cores will."
    summary = f"The host's CPU is saturated from {load_text(onset)} ({cause}); {waits}. {advice}"
    return Finding(owner, HOST_CPU, onset["users"], evidence, name, summary, rate_of(onset))


def _grew(tier: str, steps: list[StepJson]) -> bool:
    """Whether the tier's own time (self + queue, medians) grew from the lightest step."""
    return (tier_cost(steps[-1], tier) or 0.0) > (tier_cost(steps[0], tier) or 0.0)


def cpu_lines(
    tier: str, group: str | None, steps: list[StepJson], onset: StepJson, ctx: Context
) -> list[str]:
    top = steps[-1]
    host: HostUse = host_use(top, ctx)
    if host.busy is None:
        return []
    at_onset = host_use(onset, ctx).busy or 0.0
    heavier = "" if onset is top else f", {host.busy:.2f} at {load_text(top)}"
    lines = [
        f"host CPU {at_onset:.2f} of {ctx.cpu_count} cores at {load_text(onset)}{heavier}: the "
        f"stack {host.stack:.2f}, the generator {host.generator:.2f}, other processes "
        f"{host.neighbours:.2f}"
    ]
    if host.yielding >= 0.05:
        lines.append(
            f"processes at low priority (nice) used {host.yielding:.2f} more cores at "
            f"{load_text(top)}, counted as idle: they hand a core over to the stack at once"
        )
    at_base = host_use(steps[0], ctx).cpu_pressure
    pressure = host.cpu_pressure
    if at_base is not None and pressure is not None:
        lines.append(
            f"some task waited for a CPU {100 * pressure:.0f}% of the time at {load_text(top)} "
            f"({100 * at_base:.0f}% at {load_text(steps[0])})"
        )
    if group is not None:
        use = group_use(group, top, ctx)
        if use.cpu is not None:
            lines.append(f"{group} processes used {use.cpu:.2f} cores at {load_text(top)}")
    return lines


def _by_use(used: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(used.items(), key=lambda kv: kv[1], reverse=True)


def _pressure(base: StepJson, after: list[StepJson], ctx: Context) -> tuple[float, float] | None:
    """The share of the time tasks waited for a core (PSI "some") at the base step, and its
    peak over `after`; None where it was not measured (or low-priority tasks' waits fill it)."""
    at_base = host_use(base, ctx).cpu_pressure
    measured = [p for s in after if (p := host_use(s, ctx).cpu_pressure) is not None]
    return None if at_base is None or not measured else (at_base, max(measured))


def _pressed(base: StepJson, after: list[StepJson], ctx: Context) -> bool:
    pressure = _pressure(base, after, ctx)
    if pressure is None:
        return False
    at_base, peak = pressure
    return peak >= CPU_PRESSURE_SATURATED and peak - at_base >= CPU_PRESSURE_RISE


# Found with the pool (causes/pool.py), by what its busy workers want.
HOST_CPU = Cause(
    name="cpu",
    resource="cpu",
    scope="within",
    doc=__doc__,
    advice="Less CPU per request, or more cores; more workers will not help.",
    saturates="the host's cores",
    reads=(
        "host.cpu_cores",
        "host.cpu_pressure",
        "host.cpu_nice_cores",
        "resources.cpu_cores",
        "resources.cpu_wait_cores",
    ),
    thresholds=("CPU_SATURATED", "CPU_PRESSURE_SATURATED", "CPU_PRESSURE_RISE", "NEIGHBOUR_SHARE"),
    needs_cpu=True,
    computes=True,
    database="statements",
    effect_of_one_at_a_time=True,
)
