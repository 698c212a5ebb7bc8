"""A finding of the verdict, and the worker count that Little's law gives from peak
throughput × minimal latency."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pinchpoint.analyze.context import ms_text
from pinchpoint.rundir.shapes import StepJson

if TYPE_CHECKING:
    from pinchpoint.analyze.causes.cause import Cause


@dataclass(frozen=True)
class Finding:
    """What limits a component. Built once: a stage that says more makes a new one
    (`dataclasses.replace`)."""

    component: str
    cause: Cause  # what it names; verdict.json shows its `resource`
    starts_at_users: int
    evidence: Sequence[str]
    name: str  # for the headline: "Bottleneck: <name> from <n> users"
    summary: str
    # Open loop: the target rate (requests/s) of the step where it starts.
    starts_at_rate: float | None = None

    @property
    def resource(self) -> str:
        """The resource as verdict.json names it."""
        return self.cause.resource


def pct(share: float) -> str:
    # Not "100%" for a share that is not all.
    return (
        f"{100 * share:.1f}%" if 0.995 <= share < 1 or 0 < share < 0.005 else f"{100 * share:.0f}%"
    )


def workers_estimate(
    steps: list[StepJson], min_latency_ms: float | None, endpoint: str
) -> dict[str, Any] | None:
    """Little's law as a worker count: peak throughput × minimal latency (the concurrency the
    server reaches when each request takes its shortest time)."""
    answered = [s for s in steps if s["throughput_rps"] > 0]
    if min_latency_ms is None or not answered:
        return None
    peak = max(answered, key=lambda s: s["throughput_rps"])
    return {
        "endpoint": endpoint,
        "peak_throughput_rps": peak["throughput_rps"],
        "at_users": peak["users"],
        "min_latency_ms": min_latency_ms,
        "workers": peak["throughput_rps"] * min_latency_ms / 1000,
    }


def estimate_line(estimate: dict[str, Any]) -> str:
    return (
        f"peak throughput × minimal latency ({estimate['peak_throughput_rps']:.0f} req/s × "
        f"{ms_text(estimate['min_latency_ms'])}) estimates {estimate['workers']:.1f} workers "
        f"serving {estimate['endpoint']}"
    )
