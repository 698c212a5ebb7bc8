"""Where a pool of waiting workers waits: time piles up in the pool, the work is done below.

A worker that waits holds its slot for as long as what it waits on takes. When that callee
computes on a host whose cores are full (a database scanning a table, a service hashing
passwords), the callee's work waits for a core, each worker holds its slot longer, and the
pool fills: more workers would only queue more work on the same cores. So a full pool of
workers that mostly wait is followed down the calls to the process group that used most of
the host's CPU; when that group is one the pool's tier calls (directly or through others),
used most of the stack's CPU and the host's cores are full, the CPU, in that group, is the
limit. A callee that runs every request on one thread (Redis's main thread) is saturated at
one core, whatever the host has left: a tier whose time grows while it waits on one is
limited by that core too.
"""

from __future__ import annotations

from dataclasses import replace

from pinchpoint.analyze.causes.cause import Ask, Cause, Finding
from pinchpoint.analyze.causes.cpu import consumer, cpu_finding, host_saturated, stack_fills_cpu
from pinchpoint.analyze.context import Context, below, load_text, rate_of, resource_of
from pinchpoint.analyze.thresholds import COMPUTES_MOST, ONE_CORE_SATURATED
from pinchpoint.analyze.usage import group_use, host_use, process_group
from pinchpoint.rundir.shapes import StepJson


def computing_callee(
    tier: str, group: str, steps: list[StepJson], onset: StepJson, ctx: Context
) -> str | None:
    """The process group below `tier` that the host's full CPU went to most (at least
    COMPUTES_MOST of the stack's): what the tier's waiting workers wait on. None otherwise."""
    top = steps[-1]
    found = consumer(top, ctx)
    if found is None or found[0] == group:
        return None
    callee = found[0]
    downstream = {process_group(t, steps, ctx) for t in below(tier, ctx)[1:]}
    if callee not in downstream:
        return None
    use, host = group_use(callee, top, ctx), host_use(top, ctx)
    if use.cpu is None or use.cpu < COMPUTES_MOST * host.stack:
        return None
    if not host_saturated(steps, onset, ctx) or not stack_fills_cpu(use, host, ctx):
        return None
    return callee


def one_core_callee(tier: str, steps: list[StepJson], ctx: Context) -> str | None:
    """The nearest group below `tier` whose one thread of work (`main_thread_cores`: Redis's
    main thread) used ONE_CORE_SATURATED of a core at the heaviest step; None otherwise."""
    top = steps[-1]
    for callee in below(tier, ctx)[1:]:
        wanted = _one_thread_wants(top, callee)
        if wanted is not None and wanted >= ONE_CORE_SATURATED:
            return callee
    return None


def _one_thread_wants(step: StepJson, callee: str) -> float | None:
    """The core a callee's one thread of work wanted in a step: what it used, and what its
    processes waited for a core (a neighbour's CPU slows the one thread as much)."""
    cores = resource_of(step, callee, "main_thread_cores")
    if cores is None:
        return None
    return cores + (resource_of(step, callee, "cpu_wait_cores") or 0.0)


def waits_on_one_core(
    tier: str,
    group: str | None,
    callee: str,
    steps: list[StepJson],
    evidence: list[str],
    ctx: Context,
) -> Finding:
    """The one core of a callee that runs its work on one thread, with the chain."""
    top = steps[-1]
    onset = next(
        (s for s in steps if (_one_thread_wants(s, callee) or 0.0) >= ONE_CORE_SATURATED),
        top,
    )
    cores = resource_of(top, callee, "main_thread_cores") or 0.0
    wait = resource_of(top, callee, "cpu_wait_cores") or 0.0
    who = f"{group}'s workers" if group else tier
    lines = [
        f"{who} wait on {callee}, whose main thread used {cores:.2f} of the one core it runs "
        f"every command on at {load_text(top)}"
        + (f", and its processes waited for {wait:.2f} more" if wait >= 0.05 else ""),
        *evidence,
    ]
    summary = (
        f"{callee} runs every command on one thread, and that thread is busy all the time from "
        f"{load_text(onset)}: its callers queue for it, whatever cores the host has left. "
        f"Make its commands cheaper (its busiest ones below), spread the keys over more "
        f"instances (a cluster), or keep the work off it; more {group or tier} workers would "
        "only queue more commands on it."
    )
    return Finding(
        callee, ONE_CORE, onset["users"], lines, f"{callee}'s one core (its main thread)", summary,
        rate_of(onset),
    )  # fmt: skip


def waits_on_cpu(
    tier: str,
    group: str,
    callee: str,
    steps: list[StepJson],
    onset: StepJson,
    evidence: list[str],
    ctx: Context,
) -> Finding:
    """The host's CPU, in the callee the pool's workers wait on, with the chain in the
    evidence and what more workers would do in the summary."""
    top = steps[-1]
    caller, use = group_use(group, top, ctx), group_use(callee, top, ctx)
    chain = (
        f"{group}'s workers wait on {callee}: {caller.demand_per_worker or 0.0:.2f} cores wanted "
        f"per busy worker, while {callee}'s processes used {use.cpu or 0.0:.2f} cores and waited "
        f"for {use.cpu_wait or 0.0:.2f} more at {load_text(top)}"
    )
    found = cpu_finding(tier, group, steps, onset, [chain, *evidence], ctx)
    why = (
        f" {group}'s pool is full because each worker waits on {callee}'s work, which waits "
        f"for a core: more {group} workers would queue more work on the same cores."
    )
    return replace(found, summary=found.summary + why)


def _find_one_core(ask: Ask) -> Finding | None:
    callee = one_core_callee(ask.tier, ask.steps, ask.ctx)
    if callee is None:
        return None
    return waits_on_one_core(ask.tier, ask.group, callee, ask.steps, [], ask.ctx)


# Asked after every other resource of a tier: a callee whose one thread is full, with no
# pool above it to fill (a pool that fills is the pool's cause to follow down).
ONE_CORE = Cause(
    name="one_core",
    resource="cpu",
    scope="tier",
    doc=__doc__,
    advice=(
        "Make its commands cheaper, spread the keys over more instances (a cluster), or "
        "keep the work off it."
    ),
    saturates="the one core a callee runs every command on",
    reads=("resources.main_thread_cores", "resources.cpu_wait_cores"),
    thresholds=("ONE_CORE_SATURATED",),
    needs_cpu=True,
    find=_find_one_core,
    computes=True,
    database="statements",
    effect_of_one_at_a_time=True,
)
