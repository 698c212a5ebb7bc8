"""The report's figures over the run's time, the steps shaded behind: latency (percentiles
per time bucket and a bounded sample of requests), CPU, memory and errors. Each returns
None when its data is missing; requests may be read whole or a scan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import polars as pl

from pinchpoint.report import fmt
from pinchpoint.report.chart_style import (
    ERROR_COLOR,
    ERROR_PALETTE,
    PALETTE,
    colors,
    layout,
    log_ticks,
)
from pinchpoint.report.figure import Figure, horizontal, vertical
from pinchpoint.report.over_time import (
    MAX_POINTS,
    Tails,
    Timeline,
    bucket_width,
    extent_s,
    sample_requests,
    time_bucket,
)
from pinchpoint.report.table import tiers
from pinchpoint.rundir.scan import Frame, collect, height, lazy

__all__ = ["MAX_POINTS", "sample_requests"]
# Errors by class: the engine's transport errors first, then HTTP statuses.
ERROR_CLASSES = [
    "timeout", "connect_timeout", "connect_refused", "connect_error", "tls", "reset", "closed",
    "io",
]  # fmt: skip


@dataclass(frozen=True)
class Window:
    """A step's span on the time axis, in seconds from the run start."""

    # The step's load as said: "12 users", or "200.0 req/s" in open loop.
    load: str
    start: float
    end: float
    # Who set the step's load while the run went (page, terminal); None: the plan.
    by: str | None = None


def step_windows(run: dict[str, Any], requests: Frame | None, t0: float) -> list[Window]:
    """The steps' spans: the engine's windows from run.json, else from the requests."""
    windows = []
    for step in run.get("steps") or []:
        if not isinstance(step, dict):
            return _request_windows(requests, t0)
        users, start, end = step.get("users"), step.get("start"), step.get("end")
        if not (fmt.is_number(users) and fmt.is_number(start) and fmt.is_number(end)):
            return _request_windows(requests, t0)
        manual = step.get("manual")
        by = str(manual.get("by")) if isinstance(manual, dict) else None
        load = (
            f"{fmt.rate(step.get('level'))} req/s"
            if step.get("kind") == "rate"
            else f"{int(users)} users"
        )
        windows.append(Window(load, float(start) - t0, float(end) - t0, by))
    return windows or _request_windows(requests, t0)


def _request_windows(requests: Frame | None, t0: float) -> list[Window]:
    """Each step from its first request to the next step's first (the last: to its end)."""
    if requests is None or height(requests) == 0:
        return []
    spans = collect(
        lazy(requests)
        .group_by("step")
        .agg(
            pl.col("users").min(),
            pl.col("start_us").min().alias("first"),
            (pl.col("start_us") + pl.col("latency_us")).max().alias("last"),
        )
    ).sort("first")
    rows = spans.to_dicts()
    windows = []
    for i, row in enumerate(rows):
        end = rows[i + 1]["first"] if i + 1 < len(rows) else row["last"]
        load = f"{int(row['users'])} users"
        windows.append(Window(load, row["first"] / 1e6 - t0, end / 1e6 - t0))
    return windows


def _width(requests: Frame, x_range: tuple[float, float] | None) -> float:
    """Seconds per time bucket of a chart over `x_range`, else over the requests' span."""
    if x_range is not None:
        return bucket_width(x_range[1] - x_range[0])
    extent = extent_s(requests)
    return bucket_width(extent[1] - extent[0] if extent else None)


def shade_steps(fig: Figure, windows: list[Window]) -> None:
    for i, window in enumerate(windows):
        fig.shape(
            {
                **vertical("rect", window.start, window.end, col=1),
                "fillcolor": "#4c78a8" if i % 2 == 0 else "#9ecae9",
                "opacity": 0.08,
                "line": {"width": 0},
                "layer": "below",
                "label": {
                    "text": window.load + (f", set from the {window.by}" if window.by else ""),
                    "textposition": "top left",
                    "font": {"size": 11, "color": "#555"},
                },
            }
        )


def headroom(fig: Figure, top: float) -> None:
    """Room above the data for the step labels; still autoranged when traces are toggled."""
    if top > 0:
        fig.axis("yaxis")["autorangeoptions"] = {"include": [top]}


def time_axis(fig: Figure, x_range: tuple[float, float] | None) -> None:
    axis = fig.axis("xaxis")
    axis["title"] = {"text": "seconds since the run started"}
    if x_range is not None:
        axis["range"] = list(x_range)


def latency_over_time(
    requests: Frame | None,
    t0: float,
    windows: list[Window],
    x_range: tuple[float, float] | None,
) -> Figure | None:
    """The successful responses' p50 and p99 per time bucket as lines, over a sample of the
    requests (at most MAX_POINTS, errors and the slowest first) as points: latency against
    send time."""
    if requests is None or height(requests) == 0:
        return None
    timeline = Timeline.of(requests, t0, _width(requests, x_range))
    shown, note = sample_requests(requests, tails=Tails.of(timeline.rows))
    shown = shown.with_columns(
        (pl.col("start_us") / 1e6 - t0).alias("t"),
        # Log axis: a zero latency would vanish, so floor it at 1 µs.
        (pl.col("latency_us").clip(lower_bound=1) / 1000).alias("ms"),
        pl.when(pl.col("error").is_not_null())
        .then(pl.col("error"))
        .otherwise(pl.col("status").cast(pl.String))
        .alias("outcome"),
    )
    fig = Figure()
    failed = pl.col("error").is_not_null() | (pl.col("status") >= 500)
    for name, part, color, size in (
        ("responses", shown.filter(~failed), "#4c78a8", 3),
        ("errors and 5xx", shown.filter(failed), ERROR_COLOR, 5),
    ):
        if part.height == 0:
            continue
        fig.add(
            {
                "type": "scatter",
                "x": part["t"].to_numpy(),
                "y": part["ms"].to_numpy(),
                "name": name,
                "mode": "markers",
                "marker": {"color": color, "size": size, "opacity": 0.5},
                "customdata": np.column_stack(
                    [part["users"].to_numpy(), part["outcome"].to_numpy().astype(object)]
                ),
                "hovertemplate": (
                    "%{y:.3g} ms at %{x:.2f} s<br>%{customdata[0]} users,"
                    " %{customdata[1]}<extra></extra>"
                ),
            }
        )
    lines = timeline.lines((50, 99))
    per = f"{timeline.width:g} s"
    for q, color in ((50, "#1b3a5c"), (99, "#e45756")):
        fig.add(
            {
                "type": "scatter",
                "x": lines["t"].to_numpy(),
                "y": lines[f"p{q}"].clip(lower_bound=0.001).to_numpy(),
                "name": f"p{q} per {per}",
                "mode": "lines",
                "line": {"color": color, "width": 2},
                "customdata": np.column_stack([lines["n"].to_numpy(), lines["users"].to_numpy()]),
                "hovertemplate": (
                    f"p{q} %{{y:.3g}} ms of %{{customdata[0]:,}} responses around %{{x:.0f}} s"
                    " (%{customdata[1]} users)<extra></extra>"
                ),
            }
        )
    shade_steps(fig, windows)
    time_axis(fig, x_range)
    values = pl.concat([shown["ms"].cast(pl.Float64), lines["p50"], lines["p99"]]).drop_nulls()
    low, high = float(cast(float, values.min())), float(cast(float, values.max()))
    fig.axis("yaxis").update(
        {"title": {"text": "latency (ms, log)"}, "type": "log", "tickvals": log_ticks(low, high)}
    )
    headroom(fig, high * 2.5)
    title = f"Latency over time: p50 and p99 of the responses per {per}, over {note}"
    return layout(fig, title, 460)


def component_order(names: list[str], verdict: dict[str, Any]) -> list[str]:
    """Tiers in the verdict's order, then other components, the host, the generator."""
    tier_list = tiers(verdict)
    rank = {name: i for i, name in enumerate(tier_list)}
    rank.update({"host": len(tier_list) + 1, "generator": len(tier_list) + 2})
    return sorted(names, key=lambda n: (rank.get(n, len(tier_list)), n))


def resource_over_time(
    resources: pl.DataFrame | None,
    verdict: dict[str, Any],
    metric: str,
    t0: float,
    windows: list[Window],
    x_range: tuple[float, float] | None,
) -> Figure | None:
    """One line per component (and host, generator) of `cpu_cores` or `rss_bytes`."""
    if resources is None or resources.height == 0:
        return None
    palette = colors(verdict)
    memory = metric == "rss_bytes"
    frame = resources.sort("ts")
    fig = Figure()
    names = [str(n) for n in frame["component"].unique().to_list() if n is not None]
    top = 0.0
    for i, name in enumerate(component_order(names, verdict)):
        part = frame.filter(pl.col("component") == name)
        values = part[metric].cast(pl.Float64)
        if memory:
            values = values / 2**20
        hidden = memory and name == "host"
        if not hidden:
            top = max(top, cast(float, values.fill_nan(None).max()) or 0.0)
        fig.add(
            {
                "type": "scatter",
                "x": (part["ts"] - t0).to_numpy(),
                "y": values.to_numpy(),
                "name": name,
                "mode": "lines",
                "line": {"color": palette.get(name, PALETTE[(i + 3) % len(PALETTE)])},
                # The host's used memory dwarfs every process: shown on demand.
                "visible": "legendonly" if hidden else True,
                "hovertemplate": (
                    f"{name}: %{{y:.1f}} {'MiB' if memory else 'cores'}"
                    " at %{x:.1f} s<extra></extra>"
                ),
            }
        )
    if not memory:
        host = frame.filter(pl.col("component") == "host")["processes"].drop_nulls()
        if host.len():
            cpus = int(cast(float, host.max()))
            top = max(top, cpus)
            fig.shape(
                {
                    **horizontal(cpus),
                    "line": {"color": "#7f7f7f", "dash": "dash", "width": 1},
                    "label": {
                        "text": f"{cpus} host CPUs",
                        "textposition": "end",
                        "yanchor": "top",
                    },
                }
            )
    shade_steps(fig, windows)
    time_axis(fig, x_range)
    headroom(fig, top * 1.15)
    if memory:
        fig.axis("yaxis").update(
            {"title": {"text": "resident memory (MiB)"}, "rangemode": "tozero"}
        )
        return layout(fig, "Memory over time", 380)
    fig.axis("yaxis").update({"title": {"text": "CPU (cores)"}, "rangemode": "tozero"})
    return layout(fig, "CPU over time (1.0 = one core busy)", 420)


def _error_class(frame: pl.LazyFrame) -> pl.LazyFrame:
    """The failed requests (an error, or HTTP ≥ 400) with their class: the engine's error,
    else "HTTP <status>"."""
    failed = pl.col("error").is_not_null() | (pl.col("status") >= 400)
    return frame.filter(failed).with_columns(
        pl.when(pl.col("error").is_not_null())
        .then(pl.col("error"))
        .otherwise(pl.lit("HTTP ") + pl.col("status").cast(pl.String))
        .alias("class")
    )


def _class_order(classes: list[str]) -> list[str]:
    rank = {name: i for i, name in enumerate(ERROR_CLASSES)}

    def key(name: str) -> tuple[int, int, str]:
        if name in rank:
            return (0, rank[name], name)
        if name.startswith("HTTP ") and name[5:].isdigit():
            return (1, int(name[5:]), name)
        return (2, 0, name)

    return sorted(classes, key=key)


def errors_over_time(
    requests: Frame | None,
    t0: float,
    windows: list[Window],
    x_range: tuple[float, float] | None,
) -> Figure | None:
    """Failed requests per second by class (error or HTTP status), stacked, by send time in
    buckets of a second (longer runs: of a round number of seconds). None when no request
    failed."""
    if requests is None:
        return None
    total = height(requests)
    if total == 0:
        return None
    width = _width(requests, x_range)
    failed = _error_class(lazy(requests))
    counts = collect(
        failed.group_by(time_bucket(t0, width).alias("bucket"), "class").agg(
            pl.len().alias("n"), pl.col("users").min()
        )
    ).sort("bucket", "class")
    if counts.height == 0:
        return None
    counts = counts.with_columns((pl.col("bucket") * width).alias("second"))
    classes = _class_order([str(c) for c in counts["class"].unique().to_list()])
    fig = Figure()
    for i, name in enumerate(classes):
        part = counts.filter(pl.col("class") == name)
        fig.add(
            {
                "type": "bar",
                "x": (part["second"] + width / 2).to_numpy(),
                "y": (part["n"] / width).to_numpy(),
                "width": width,
                "name": name,
                "marker": {"color": ERROR_PALETTE[i % len(ERROR_PALETTE)], "line": {"width": 0}},
                "customdata": np.column_stack(
                    [part["second"].to_numpy(), part["users"].to_numpy(), part["n"].to_numpy()]
                ),
                "hovertemplate": (
                    f"{name}: %{{customdata[2]}} from second %{{customdata[0]:.0f}}"
                    f" for {width:g} s (%{{customdata[1]}} users)<extra></extra>"
                ),
            }
        )
    # A legend even for one class: it names the class.
    fig.layout.update({"barmode": "stack", "bargap": 0, "showlegend": True})
    shade_steps(fig, windows)
    time_axis(fig, x_range)
    top = counts.group_by("second").agg(pl.col("n").sum())["n"].max()
    headroom(fig, float(cast(float, top) or 0) / width * 1.25)
    fig.axis("yaxis").update({"title": {"text": "failed requests / s"}, "rangemode": "tozero"})
    failures = int(counts["n"].sum())
    return layout(fig, f"Errors over time by class: {failures:,} failed of {total:,} requests", 380)
