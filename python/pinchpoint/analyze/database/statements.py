"""A database's statements by active time: from pg_stat_statements where it was read (the
execution time each statement gained over the steps), else from the samples (the
backends seen running each statement, times the time between samples)."""

from __future__ import annotations

from typing import Any

import polars as pl

from pinchpoint.analyze.database.samples import in_windows, sample_interval
from pinchpoint.rundir.steady import Window

TOP = 5


def by_stat_statements(
    statements: pl.DataFrame, windows: list[Window], top: int = TOP
) -> list[dict[str, Any]] | None:
    """The statements by the execution time they gained from the first window's start to
    the last one's end; None when fewer than two readings frame that time."""
    if not windows or statements.is_empty():
        return None
    times = statements["ts"].unique().sort().to_list()
    before = [t for t in times if t <= windows[0].start]
    after = [t for t in times if t >= windows[-1].end]
    first = before[-1] if before else times[0]
    last = after[0] if after else times[-1]
    if last <= first:
        return None
    start = statements.filter(pl.col("ts") == first).select("queryid", "exec_ms", "calls")
    end = statements.filter(pl.col("ts") == last)
    gained = (
        end.join(start, on="queryid", how="left", suffix="_start")
        .with_columns(
            (pl.col("exec_ms") - pl.col("exec_ms_start").fill_null(0.0)).alias("gained_ms"),
            (pl.col("calls") - pl.col("calls_start").fill_null(0)).alias("gained_calls"),
        )
        .filter(pl.col("gained_ms") > 0)
        .group_by("statement")
        .agg(pl.col("gained_ms").sum(), pl.col("gained_calls").sum())
        .sort(["gained_ms", "statement"], descending=[True, False])
    )
    total = float(gained["gained_ms"].sum())
    return [
        {
            "statement": row["statement"],
            "active_s": row["gained_ms"] / 1000,
            "share": row["gained_ms"] / total if total else 0.0,
            "calls": int(row["gained_calls"]),
        }
        for row in gained.head(top).iter_rows(named=True)
    ]


def by_samples(
    activity: pl.DataFrame, windows: list[Window], top: int = TOP
) -> list[dict[str, Any]]:
    """The statements by the backends sampled running them (state active)."""
    interval = sample_interval(activity) or 0.0
    active = in_windows(activity, windows).filter(
        (pl.col("state") == "active") & pl.col("statement").is_not_null()
    )
    counts = active.group_by("statement").len().sort(["len", "statement"], descending=[True, False])
    total = active.height
    return [
        {
            "statement": row["statement"],
            "active_s": row["len"] * interval,
            "share": row["len"] / total if total else 0.0,
        }
        for row in counts.head(top).iter_rows(named=True)
    ]
