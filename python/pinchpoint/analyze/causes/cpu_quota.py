"""A cgroup CPU quota that throttles the tier, or one below it."""

from __future__ import annotations

from pinchpoint.analyze.causes.cause import Ask, Cause, Finding
from pinchpoint.analyze.ceilings import predict_quota
from pinchpoint.analyze.context import Context, below, cpu_of, load_text, rate_of, resource_of
from pinchpoint.analyze.findings import pct
from pinchpoint.analyze.thresholds import AT_QUOTA, HALF_USED, THROTTLED, THROTTLED_GROWTH
from pinchpoint.analyze.usage import process_group as host_of
from pinchpoint.rundir.shapes import StepJson


def cpu_quota(tier: str, steps: list[StepJson], ctx: Context) -> Finding | None:
    """The processes of the tier, or of one below it, are held back by their cgroup's CPU
    quota: a throttled tier below fills the pools of every tier above it."""
    groups = []
    for name in below(tier, ctx):
        group = host_of(name, steps, ctx)
        if group is not None and group not in groups:
            groups.append(group)
    for group in groups:
        found = _cpu_quota(tier, group, steps, ctx)
        if found is not None:
            return found
    return None


def _cpu_quota(tier: str, host: str, steps: list[StepJson], ctx: Context) -> Finding | None:
    shares = [resource_of(s, host, "cpu_throttled_share") or 0.0 for s in steps]
    top, base = steps[-1], steps[0]
    quota_top = resource_of(top, host, "cpu_quota_cores") or 0.0
    # Throttled more as the load grew, or throttled while using all of the quota: then
    # it limited from the lowest load on.
    at_quota = quota_top > 0 and (cpu_of(top, host) or 0.0) >= AT_QUOTA * quota_top
    # Throttled from the lightest step on, using a good part of its quota, binds from there
    # even when neighbours leave the cgroup too little of the host to use all of it (a
    # share of a quota used in bursts is no limit: periods count only when it ran).
    throughout = shares[0] >= THROTTLED and (cpu_of(top, host) or 0.0) >= HALF_USED * quota_top
    if shares[-1] < THROTTLED or (
        shares[-1] - shares[0] < THROTTLED_GROWTH and not at_quota and not throughout
    ):
        return None
    onset = next(s for s, share in zip(steps, shares, strict=True) if share >= THROTTLED)
    quota = resource_of(top, host, "cpu_quota_cores") or 0.0
    throttled = pct(shares[-1])
    evidence = [
        f"{host}'s cgroup has a CPU quota of {quota:.2f} cores: the kernel throttled it in "
        f"{throttled} of its periods at {load_text(top)}, "
        f"{pct(shares[0])} at {load_text(base)}",
        f"{host}'s processes used {cpu_of(top, host) or 0.0:.2f} cores at "
        f"{load_text(top)}; the host used {cpu_of(top, 'host') or 0.0:.2f} of "
        f"{ctx.cpu_count}",
        f"{host} waited {resource_of(top, host, 'cpu_throttled_s') or 0.0:.1f} s throttled "
        f"during the step at {load_text(top)}",
    ]
    if host != tier and host not in below(tier, ctx)[1:]:
        evidence.insert(0, f"{tier} runs in {host}'s processes")
    elif host != tier:
        evidence.insert(0, f"{tier} waits on {host}, below it")
    summary = (
        f"{host}'s CPU quota ({quota:.2f} cores) is used up from {load_text(onset)}: "
        f"the kernel throttled its cgroup in {throttled} of the periods at "
        f"{load_text(top)}, so requests wait for CPU time the quota does not give. "
        "Raise the quota (or use less CPU per request); more workers will not help."
    )
    name = f"{host} CPU quota ({quota:.2f} cores, throttled {throttled} of periods)"
    return Finding(host, CPU_QUOTA, onset["users"], evidence, name, summary, rate_of(onset))


def _find_cpu_quota(ask: Ask) -> Finding | None:
    return cpu_quota(ask.tier, ask.steps, ask.ctx)


CPU_QUOTA = Cause(
    name="cpu_quota",
    resource="cpu_quota",
    scope="tier",
    doc=__doc__,
    advice="Raise the cgroup's CPU quota, or use less CPU per request.",
    saturates="a cgroup's CPU quota",
    reads=("resources.cpu_throttled_share", "resources.cpu_quota_cores", "resources.cpu_cores"),
    thresholds=("AT_QUOTA", "HALF_USED", "THROTTLED", "THROTTLED_GROWTH"),
    needs_cpu=False,
    find=_find_cpu_quota,
    computes=True,
    database="statements",
    predict=predict_quota,
)
