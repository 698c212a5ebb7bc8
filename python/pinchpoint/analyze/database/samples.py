"""The database samples of a run, cut to the steps from the one where a limit starts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from pinchpoint.analyze.steps import InsideMarks
from pinchpoint.rundir import files
from pinchpoint.rundir.steady import Window, steady_windows
from pinchpoint.rundir.view import RunView


@dataclass(frozen=True)
class DatabaseSamples:
    """A run's samples of its database components' backends and statements."""

    activity: pl.DataFrame
    # pg_stat_statements as read during the run; None where it was not installed.
    statements: pl.DataFrame | None
    windows: list[Window]

    def components(self) -> set[str]:
        return set(self.activity["component"].unique().to_list())


def read_samples(view: RunView) -> DatabaseSamples | None:
    """The run's database samples; None when it took none or they cannot be read."""
    if not view.has(files.DB_ACTIVITY):
        return None
    try:
        activity = view.table(files.DB_ACTIVITY)
        statements = view.table(files.DB_STATEMENTS) if view.has(files.DB_STATEMENTS) else None
        windows = steady_windows(view.run)
    except (OSError, ValueError, KeyError):
        return None
    return DatabaseSamples(activity, statements, windows)


def onset_windows(windows: list[Window], finding: Mapping[str, Any]) -> list[Window]:
    """The windows from the step where the finding starts to the last; all of them when
    that step is not found."""
    rate = finding.get("starts_at_rate")
    for i, w in enumerate(windows):
        if rate is not None and w.kind == "rate" and w.level is not None and w.level >= rate:
            return windows[i:]
        if rate is None and w.kind == "users" and w.users >= finding.get("starts_at_users", 0):
            return windows[i:]
    return windows


def in_windows(frame: pl.DataFrame, windows: list[Window]) -> pl.DataFrame:
    """The rows sampled inside any of the windows."""
    if not windows:
        return frame.clear()
    inside = pl.lit(False)
    for w in windows:
        inside = inside | ((pl.col("ts") >= w.start) & (pl.col("ts") < w.end))
    return frame.filter(inside)


def sample_interval(activity: pl.DataFrame) -> float | None:
    """The time between two samples of a component (the median), in seconds."""
    times = activity["ts"].unique().sort()
    if len(times) < 2:
        return None
    value = times.diff().drop_nulls().median()
    return float(value) if isinstance(value, int | float) else None


def lock_wait_marks(view: RunView) -> InsideMarks:
    """Per step, each database sampled from inside's `lock_waits_inside`: its backends
    waiting for a lock (wait_event_type Lock) per sample, on average. A server that runs
    connections as threads (MySQL, MariaDB) shows its waits only from inside."""
    samples = read_samples(view)
    marks: InsideMarks = {}
    if samples is None:
        return marks
    for component in sorted(samples.components()):
        mine = samples.activity.filter(pl.col("component") == component)
        for window in samples.windows:
            seen = in_windows(mine, [window])
            taken = seen["ts"].n_unique()
            if taken == 0:
                continue
            waiting = seen.filter(pl.col("wait_event_type") == "Lock").height
            row = marks.setdefault(window.step, {}).setdefault(component, {})
            row["lock_waits_inside"] = round(waiting / taken, 3)
    return marks
