"""The queue before a tier: when it grows, and from which step."""

from __future__ import annotations

from typing import Literal

from pinchpoint.analyze.thresholds import QUEUE_GROWTH_MS, QUEUE_OVER_SERVICE
from pinchpoint.rundir.shapes import StepJson


def queue_onset(
    tier: str, steps: list[StepJson], key: Literal["queue_p50_ms", "logged_queue_p50_ms"]
) -> StepJson:
    """The first step whose queue time before the tier (`key`) grew by more than a quarter
    of its growth from the lightest step to the heaviest; the heaviest without one."""

    def queued(step: StepJson) -> float:
        return float(step["tiers"].get(tier, {}).get(key) or 0.0)

    grew = queued(steps[-1]) - queued(steps[0])
    return next((s for s in steps if queued(s) - queued(steps[0]) > 0.25 * grew), steps[-1])


def queue_grows(group: str, steps: list[StepJson]) -> bool:
    """Whether requests waited longer before the group at the heaviest step, by far more than
    its own time grew: they queued for a worker rather than took longer in one."""
    base, top = (s["tiers"].get(group, {}) for s in (steps[0], steps[-1]))
    queued = (top.get("queue_p50_ms") or 0.0) - (base.get("queue_p50_ms") or 0.0)
    served = (top.get("p50_ms") or 0.0) - (base.get("p50_ms") or 0.0)
    return queued >= QUEUE_GROWTH_MS and queued >= QUEUE_OVER_SERVICE * max(served, 0.0)
