"""The tier whose own time grows with no saturated resource found behind it."""

from __future__ import annotations

from pinchpoint.analyze.causes.cause import Ask, Cause, Finding
from pinchpoint.analyze.causes.cpu import CPU_LINES_READS, cpu_lines
from pinchpoint.analyze.context import Context, load_text, rate_of
from pinchpoint.rundir.shapes import StepJson


def own_time(
    tier: str, group: str | None, steps: list[StepJson], onset: StepJson, ctx: Context
) -> Finding:
    evidence = cpu_lines(tier, group, steps, onset, ctx) if group else []
    summary = f"{tier}'s own time grows with load from {load_text(onset)}."
    caller = ctx.timed_by.get(tier)
    if caller is not None and ctx.unnamed(tier):
        evidence.append(
            f"{tier} is what {caller} passes requests to, timed by {caller}'s upstream time: "
            "the plan names no component there"
        )
        summary += (
            f" It is the server {caller} passes requests to, which the plan does not name: "
            "add it as a component with its processes (`pinchpoint init` writes it) to see "
            "its CPU and workers."
        )
    elif caller is not None:
        evidence.append(f"{tier} logs nothing: its time is {caller}'s upstream time")
    return Finding(
        tier, OWN_TIME, onset["users"], evidence,
        f"{tier} (its own time grows; no saturated resource found)", summary, rate_of(onset),
    )  # fmt: skip


def _find_own_time(ask: Ask) -> Finding:
    return own_time(ask.tier, ask.group, ask.steps, ask.onset, ask.ctx)


# What is left when no cause fires: a neighbour's CPU may explain it when its workers need a
# core (verdict.py asks what they used and waited for).
OWN_TIME = Cause(
    name="time",
    resource="time",
    scope="tier",
    doc=__doc__,
    advice="Profile the tier: its own time grows with no saturated resource found.",
    saturates=None,
    reads=("tiers.self_p50_ms", "tiers.queue_p50_ms", *CPU_LINES_READS),
    thresholds=(),
    needs_cpu=True,
    find=_find_own_time,
    effect_of_one_at_a_time=True,
)
