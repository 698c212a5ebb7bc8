"""How findings say their numbers: a share as a percentage, and the worker count that
Little's law gives from peak throughput × minimal latency. A finding itself is
`causes/cause.py`'s, beside the cause it names."""

from __future__ import annotations

from typing import Any

from pinchpoint.analyze.context import ms_text
from pinchpoint.rundir.shapes import StepJson


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
