"""The steady part of a step: the requests the verdict's table, the SLA and the report's
charts all count, defined once.

A step's steady part runs from its start plus run.json's `warmup_s` (never past its end)
to its end. A request belongs to it by the time it was meant to be sent (`intended_us`,
open loop: one sent late because the target stalled still counts in its phase, with its
latency from that time), or by the time it was sent (`start_us`) when nothing was meant.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import polars as pl

from pinchpoint.rundir.scan import Frame, columns, schema

# A table of requests, read whole or a scan: what a function gets, it returns.
F = TypeVar("F", pl.DataFrame, pl.LazyFrame)

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


def sent_at(requests: Frame) -> str:
    """The column a request belongs to its step's steady part by."""
    names = columns(requests)
    return next((c for c in SENT_AT if c in names), SENT_AT[-1])


def bounds_us(w: Window) -> tuple[int, int]:
    """The window's send times in µs: from the first (included) to the last (excluded)."""
    return int(w.start * 1e6), int(w.end * 1e6)


def in_window(requests: F, w: Window) -> F:
    """The requests of one step's steady part."""
    lo, hi = bounds_us(w)
    at = pl.col(sent_at(requests))
    return requests.filter((pl.col("step") == w.step) & (at >= lo) & (at < hi))


def with_window(requests: pl.LazyFrame, windows: Sequence[Window]) -> pl.LazyFrame:
    """The requests with `window`: the position in `windows` of the steady part each
    belongs to, null for one in none (a warm-up, a step run.json does not name). The steps'
    bounds are joined, not looked up, so that a scan keeps streaming; a step with two
    windows (never written by a run) takes the first that holds the request."""
    if not windows:
        return requests.with_columns(pl.lit(None, pl.UInt32).alias("window"))
    sent, step = pl.col(sent_at(requests)), pl.col("step")
    steps = [w.step for w in windows]
    if len(set(steps)) < len(steps):
        index = pl.lit(None, pl.UInt32)
        for i, w in reversed(list(enumerate(windows))):
            first, last = bounds_us(w)
            inside = (step == w.step) & (sent >= first) & (sent < last)
            index = pl.when(inside).then(pl.lit(i, pl.UInt32)).otherwise(index)
        return requests.with_columns(index.alias("window"))
    bounds = pl.DataFrame(
        {
            "step": steps,
            "_window": list(range(len(windows))),
            "_lo": [bounds_us(w)[0] for w in windows],
            "_hi": [bounds_us(w)[1] for w in windows],
        },
        schema_overrides={"_window": pl.UInt32, "_lo": pl.Int64, "_hi": pl.Int64},
    ).with_columns(step.cast(schema(requests)["step"]))
    inside = (sent >= pl.col("_lo")) & (sent < pl.col("_hi"))
    return (
        requests.join(bounds.lazy(), on="step", how="left")
        .with_columns(pl.when(inside).then(pl.col("_window")).alias("window"))
        .drop("_window", "_lo", "_hi")
    )


def usable_windows(run: dict[str, Any]) -> list[Window]:
    """run.json's step windows, or none when it has no usable ones (an imported run, a
    damaged file)."""
    try:
        windows = steady_windows(run) if run.get("steps") else []
    except (KeyError, TypeError, ValueError):
        return []
    if not all(_finite(w.step) and _finite(w.start) and _finite(w.end) for w in windows):
        return []
    return windows


def steady_requests(requests: F, run: dict[str, Any]) -> F:
    """The requests of every step's steady part. A run.json without usable step windows
    (an imported run, a damaged file) cuts nothing: every request."""
    windows = usable_windows(run)
    if not windows:
        return requests
    bounds = pl.DataFrame(
        {
            "step": [int(w.step) for w in windows],
            "_lo": [bounds_us(w)[0] for w in windows],
            "_hi": [bounds_us(w)[1] for w in windows],
        }
    ).with_columns(pl.col("step").cast(schema(requests)["step"]))
    at = pl.col(sent_at(requests))
    if isinstance(requests, pl.LazyFrame):
        joined = requests.join(bounds.lazy(), on="step", how="inner")
    else:
        joined = requests.join(bounds, on="step", how="inner", maintain_order="left")
    return joined.filter((at >= pl.col("_lo")) & (at < pl.col("_hi"))).drop("_lo", "_hi")


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
