"""The tier whose own time grows with no saturated resource found behind it."""

from __future__ import annotations

from pinchpoint.analyze.causes.cause import Cause
from pinchpoint.analyze.causes.cpu import cpu_lines
from pinchpoint.analyze.context import Context, load_text, rate_of
from pinchpoint.analyze.findings import Finding


def own_time(tier: str, group: str | None, steps: list[dict], onset: dict, ctx: Context) -> Finding:
    evidence = cpu_lines(tier, group, steps, onset, ctx) if group else []
    return Finding(
        tier, "time", onset["users"], evidence,
        f"{tier} (its own time grows; no saturated resource found)",
        f"{tier}'s own time grows with load from {load_text(onset)}.", rate_of(onset),
    )  # fmt: skip


# What is left when no cause fires: a neighbour's CPU may explain it when its workers need a
# core (verdict.py asks what they used and waited for).
OWN_TIME = Cause(
    resource="time",
    saturates=None,
    reads=("tiers.self_p50_ms", "tiers.queue_p50_ms"),
    needs_cpu=True,
    fills_above=False,
    find=None,
)
