"""The steady part of a step: the requests the verdict's table, the SLA and the report's
charts all count, defined once.

A step's steady part runs from its start plus run.json's `warmup_s` (never past its end)
to its end. A request belongs to it by the time it was meant to be sent (`intended_us`,
open loop: one sent late because the target stalled still counts in its phase, with its
latency from that time), or by the time it was sent (`start_us`) when nothing was meant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import polars as pl

# Columns of requests.parquet the steady part is cut by: the first present wins.
SENT_AT = ("intended_us", "start_us")


@dataclass
class Window:
    """One step's steady part, and its load level."""

    step: int
    users: int
    start: float
    end: float
    # The load level: "users" (closed loop) or "rate" (open loop, target requests/s).
    kind: str = "users"
    level: float | None = None
    # Open loop: requests that waited for a free connection, and those never sent.
    late: int | None = None
    unsent: int | None = None

    @property
    def seconds(self) -> float:
        return max(self.end - self.start, 1e-9)


def steady_windows(run: dict[str, Any]) -> list[Window]:
    """Each step's window of run.json with its warm-up cut off."""
    warmup = float(run.get("warmup_s", 0.0))
    return [
        Window(
            step=s["step"],
            users=s["users"],
            start=min(s["start"] + warmup, s["end"]),
            end=s["end"],
            kind=s.get("kind", "users"),
            level=s.get("level", s["users"]),
            late=s.get("late"),
            unsent=s.get("unsent"),
        )
        for s in run["steps"]
    ]


def sent_at(requests: pl.DataFrame) -> str:
    """The column a request belongs to its step's steady part by."""
    return next((c for c in SENT_AT if c in requests.columns), SENT_AT[-1])


def in_window(requests: pl.DataFrame, w: Window) -> pl.DataFrame:
    """The requests of one step's steady part."""
    lo, hi = int(w.start * 1e6), int(w.end * 1e6)
    at = pl.col(sent_at(requests))
    return requests.filter((pl.col("step") == w.step) & (at >= lo) & (at < hi))


def steady_requests(requests: pl.DataFrame, run: dict[str, Any]) -> pl.DataFrame:
    """The requests of every step's steady part. A run.json without usable step windows
    (an imported run, a damaged file) cuts nothing: every request."""
    try:
        windows = steady_windows(run) if run.get("steps") else []
    except (KeyError, TypeError, ValueError):
        return requests
    if not windows or not all(
        _finite(w.step) and _finite(w.start) and _finite(w.end) for w in windows
    ):
        return requests
    bounds = pl.DataFrame(
        {
            "step": [int(w.step) for w in windows],
            "_lo": [int(w.start * 1e6) for w in windows],
            "_hi": [int(w.end * 1e6) for w in windows],
        }
    ).with_columns(pl.col("step").cast(requests.schema["step"]))
    at = pl.col(sent_at(requests))
    return (
        requests.join(bounds, on="step", how="inner", maintain_order="left")
        .filter((at >= pl.col("_lo")) & (at < pl.col("_hi")))
        .drop("_lo", "_hi")
    )


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
