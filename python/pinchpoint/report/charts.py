"""The report's plotly figures. Each returns None when its data is missing."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from pinchpoint.report import fmt
from pinchpoint.report.table import bottleneck_users, steps, tier_stats, tiers

MAX_POINTS = 20_000
CLIENT = "client"
CLIENT_COLOR = "#222222"
PALETTE = [
    "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
    "#8c564b", "#e377c2", "#bcbd22", "#7f7f7f", "#d62728",
]  # fmt: skip
OTHER_COLORS = {"host": "#7f7f7f", "generator": "#d62728"}
SELF_COLOR = "#1f77b4"
QUEUE_COLOR = "#ff7f0e"
ERROR_COLOR = "#d62728"
BOTTLENECK_COLOR = "#d62728"


@dataclass(frozen=True)
class Window:
    """A step's span on the time axis, in seconds from the run start."""

    users: int
    start: float
    end: float


def colors(verdict: dict[str, Any]) -> dict[str, str]:
    """One color per series, the same in every chart."""
    mapping = {CLIENT: CLIENT_COLOR, **OTHER_COLORS}
    for i, tier in enumerate(tiers(verdict)):
        mapping[tier] = PALETTE[i % len(PALETTE)]
    return mapping


def _layout(fig: go.Figure, title: str, height: int = 420) -> go.Figure:
    fig.update_layout(
        title={"text": title, "x": 0, "xanchor": "left"},
        template="plotly_white",
        height=height,
        # Legend under the title, not beside the plot: every time chart keeps the same
        # plot width, so their x axes line up.
        margin={"l": 70, "r": 30, "t": 100, "b": 50},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0, "xanchor": "left"},
        hovermode="closest",
    )
    return fig


def _users_axis(fig: go.Figure, users: Sequence[int]) -> None:
    """Users on x, on a log scale when the steps grow geometrically (largest ≥ 16× smallest)."""
    log = len(users) > 2 and min(users) > 0 and max(users) / min(users) >= 16
    ticks = list(users) if len(users) <= 12 else None
    fig.update_xaxes(title_text="users", type="log" if log else "linear", tickvals=ticks)


def _mark(fig: go.Figure, x: float, text: str, **where: Any) -> None:
    # A shape with its own label: plain annotations need log10 positions on log axes.
    fig.add_shape(
        type="line",
        x0=x,
        x1=x,
        y0=0,
        y1=1,
        yref="y domain",
        line={"color": BOTTLENECK_COLOR, "dash": "dot", "width": 2},
        # Horizontal, inside the plot just right of the line's top: along the line it
        # would run up into the legend.
        label={
            "text": text,
            "textangle": 0,
            "textposition": "end",
            "xanchor": "left",
            "yanchor": "top",
            "font": {"color": BOTTLENECK_COLOR},
        },
        **where,
    )


def _bottleneck_text(verdict: dict[str, Any]) -> str:
    found = verdict.get("bottleneck") or {}
    return f"{found.get('component', 'bottleneck')} from {bottleneck_users(verdict)} users"


def _num(value: Any) -> float | None:
    return float(value) if fmt.is_number(value) else None


def _users(verdict: dict[str, Any]) -> list[int]:
    return [int(s.get("users") or 0) for s in steps(verdict)]


def latency_vs_users(verdict: dict[str, Any]) -> go.Figure | None:
    """p50 (solid) and p95 (dashed) of the client and of each tier against users."""
    step_list = steps(verdict)
    if not step_list:
        return None
    users = _users(verdict)
    palette = colors(verdict)
    fig = go.Figure()
    series: list[tuple[str, list[float | None], list[float | None]]] = [
        (
            CLIENT,
            [_num((s.get("latency_ms") or {}).get("p50")) for s in step_list],
            [_num((s.get("latency_ms") or {}).get("p95")) for s in step_list],
        )
    ]
    for tier in tiers(verdict):
        series.append(
            (
                tier,
                [_num(tier_stats(s, tier).get("p50_ms")) for s in step_list],
                [_num(tier_stats(s, tier).get("p95_ms")) for s in step_list],
            )
        )
    for name, p50, p95 in series:
        color = palette.get(name, CLIENT_COLOR)
        for label, values, dash in (("p50", p50, "solid"), ("p95", p95, "dash")):
            fig.add_trace(
                go.Scatter(
                    x=users,
                    y=values,
                    name=f"{name} {label}",
                    legendgroup=name,
                    mode="lines+markers",
                    line={"color": color, "dash": dash, "width": 3 if name == CLIENT else 2},
                    hovertemplate=f"{name} {label}: %{{y:.3g}} ms at %{{x}} users<extra></extra>",
                )
            )
    _users_axis(fig, users)
    fig.update_yaxes(title_text="latency (ms)", rangemode="tozero")
    start = bottleneck_users(verdict)
    if start is not None:
        _mark(fig, start, _bottleneck_text(verdict))
    return _layout(fig, "Latency vs users: client and each tier (p50 solid, p95 dashed)", 480)


def self_queue_vs_users(verdict: dict[str, Any]) -> go.Figure | None:
    """Per tier, self time and queue time p50 stacked, one small chart per tier."""
    step_list = steps(verdict)
    tier_list = tiers(verdict)
    if not step_list or not tier_list:
        return None
    users = _users(verdict)
    index = list(range(len(step_list)))
    fig = make_subplots(
        rows=1,
        cols=len(tier_list),
        shared_yaxes=True,
        subplot_titles=tier_list,
        horizontal_spacing=0.04,
    )
    for col, tier in enumerate(tier_list, start=1):
        stats = [tier_stats(s, tier) for s in step_list]
        parts = [("self", "self_p50_ms", "self_p95_ms", SELF_COLOR)]
        if any(fmt.is_number(st.get("queue_p50_ms")) for st in stats):
            parts.append(("queue", "queue_p50_ms", "queue_p95_ms", QUEUE_COLOR))
        for part, p50_key, p95_key, color in parts:
            p95 = [fmt.ms(st.get(p95_key)) for st in stats]
            fig.add_trace(
                go.Bar(
                    x=index,
                    y=[_num(st.get(p50_key)) for st in stats],
                    name=f"{part} time p50",
                    legendgroup=part,
                    marker_color=color,
                    customdata=[[u, v] for u, v in zip(users, p95, strict=True)],
                    hovertemplate=(
                        f"{tier} {part} time at %{{customdata[0]}} users:"
                        " p50 %{y:.3g} ms, p95 %{customdata[1]} ms<extra></extra>"
                    ),
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(
            tickvals=index, ticktext=[str(u) for u in users], title_text="users", row=1, col=col
        )
    # One legend entry per part, however many tiers have a queue.
    seen: set[str] = set()
    for trace in fig.data:
        trace.showlegend = trace.legendgroup not in seen
        seen.add(trace.legendgroup)
    fig.update_layout(barmode="stack")
    fig.update_yaxes(title_text="ms (p50)", row=1, col=1)
    start = bottleneck_users(verdict)
    at = next((i for i, u in enumerate(users) if u >= start), None) if start else None
    if at is not None:
        component = (verdict.get("bottleneck") or {}).get("component")
        for col, tier in enumerate(tier_list, start=1):
            # Between the last step before the bottleneck and the first step in it.
            text = f"from {start} users" if tier == component else ""
            _mark(fig, at - 0.5, text, row=1, col=col)
    _layout(fig, "Self time and queue time per tier vs users (p50, stacked)", 420)
    # Above the tier names, which sit where the legend would.
    fig.update_layout(legend_y=1.14, margin_t=120)
    return fig


def throughput_vs_users(verdict: dict[str, Any]) -> go.Figure | None:
    """Requests per second against users, error rate on a second axis."""
    step_list = steps(verdict)
    if not step_list:
        return None
    users = _users(verdict)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(
        go.Scatter(
            x=users,
            y=[_num(s.get("throughput_rps")) for s in step_list],
            name="throughput",
            mode="lines+markers",
            line={"color": CLIENT_COLOR, "width": 3},
            hovertemplate="%{y:.1f} req/s at %{x} users<extra></extra>",
        ),
        secondary_y=False,
    )
    error_pct = [
        (float(s["error_rate"]) * 100 if fmt.is_number(s.get("error_rate")) else None)
        for s in step_list
    ]
    fig.add_trace(
        go.Scatter(
            x=users,
            y=error_pct,
            name="error rate",
            mode="lines+markers",
            line={"color": ERROR_COLOR, "dash": "dot"},
            hovertemplate="%{y:.3g}% errors at %{x} users<extra></extra>",
        ),
        secondary_y=True,
    )
    _users_axis(fig, users)
    fig.update_yaxes(title_text="requests / s", rangemode="tozero", secondary_y=False)
    fig.update_yaxes(
        title_text="errors",
        ticksuffix="%",
        rangemode="tozero",
        range=None if any(error_pct) else [0, 1],
        tickmode="auto",
        showgrid=False,
        secondary_y=True,
    )
    start = bottleneck_users(verdict)
    if start is not None:
        _mark(fig, start, _bottleneck_text(verdict))
    return _layout(fig, "Throughput vs users", 400)


def step_windows(run: dict[str, Any], requests: pl.DataFrame | None, t0: float) -> list[Window]:
    """The steps' spans: the engine's windows from run.json, else from the requests."""
    windows = []
    for step in run.get("steps") or []:
        if not isinstance(step, dict):
            return _request_windows(requests, t0)
        users, start, end = step.get("users"), step.get("start"), step.get("end")
        if not (fmt.is_number(users) and fmt.is_number(start) and fmt.is_number(end)):
            return _request_windows(requests, t0)
        windows.append(Window(int(users), float(start) - t0, float(end) - t0))
    return windows or _request_windows(requests, t0)


def _request_windows(requests: pl.DataFrame | None, t0: float) -> list[Window]:
    """Each step from its first request to the next step's first (the last: to its end)."""
    if requests is None or requests.height == 0:
        return []
    spans = (
        requests.group_by("step")
        .agg(
            pl.col("users").first(),
            pl.col("start_us").min().alias("first"),
            (pl.col("start_us") + pl.col("latency_us")).max().alias("last"),
        )
        .sort("first")
    )
    rows = spans.to_dicts()
    windows = []
    for i, row in enumerate(rows):
        end = rows[i + 1]["first"] if i + 1 < len(rows) else row["last"]
        windows.append(Window(int(row["users"]), row["first"] / 1e6 - t0, end / 1e6 - t0))
    return windows


def sample_requests(
    requests: pl.DataFrame, limit: int = MAX_POINTS, seed: int = 0
) -> tuple[pl.DataFrame, str]:
    """At most `limit` rows: errors and each step's slowest 1% first, then a uniform sample.

    Returns the rows and a note saying what was kept."""
    total = requests.height
    if total <= limit:
        return requests, f"all {total:,} requests"
    rng = np.random.default_rng(seed)
    threshold = pl.col("latency_us").quantile(0.99, interpolation="higher").over("step")
    rare = pl.col("error").is_not_null() | (pl.col("latency_us") >= threshold)
    flags = requests.select(rare.alias("rare"))["rare"].to_numpy()
    rare_idx = np.flatnonzero(flags)
    common_idx = np.flatnonzero(~flags)
    if len(rare_idx) > limit // 2:
        rare_idx = rng.choice(rare_idx, limit // 2, replace=False)
        kept = "sampled"
    else:
        kept = "every error and each step's slowest 1% kept, the rest sampled"
    room = min(limit - len(rare_idx), len(common_idx))
    common_idx = rng.choice(common_idx, room, replace=False)
    chosen = np.sort(np.concatenate([rare_idx, common_idx]))
    return requests[chosen], f"{len(chosen):,} of {total:,} requests ({kept})"


def _shade_steps(fig: go.Figure, windows: list[Window]) -> None:
    for i, window in enumerate(windows):
        fig.add_vrect(
            x0=window.start,
            x1=window.end,
            fillcolor="#4c78a8" if i % 2 == 0 else "#9ecae9",
            opacity=0.08,
            line_width=0,
            layer="below",
            label={
                "text": f"{window.users} users",
                "textposition": "top left",
                "font": {"size": 11, "color": "#555"},
            },
        )


def _headroom(fig: go.Figure, top: float) -> None:
    """Room above the data for the step labels; still autoranged when traces are toggled."""
    if top > 0:
        fig.update_yaxes(autorangeoptions={"include": [top]})


def _time_axis(fig: go.Figure, x_range: tuple[float, float] | None) -> None:
    fig.update_xaxes(title_text="seconds since the run started", range=x_range)


def latency_over_time(
    requests: pl.DataFrame | None,
    t0: float,
    windows: list[Window],
    x_range: tuple[float, float] | None,
) -> go.Figure | None:
    """Every request (sampled down to MAX_POINTS) as a point: latency against send time."""
    if requests is None or requests.height == 0:
        return None
    shown, note = sample_requests(requests)
    shown = shown.with_columns(
        (pl.col("start_us") / 1e6 - t0).alias("t"),
        # Log axis: a zero latency would vanish, so floor it at 1 µs.
        (pl.col("latency_us").clip(lower_bound=1) / 1000).alias("ms"),
        pl.when(pl.col("error").is_not_null())
        .then(pl.col("error"))
        .otherwise(pl.col("status").cast(pl.String))
        .alias("outcome"),
    )
    fig = go.Figure()
    failed = pl.col("error").is_not_null() | (pl.col("status") >= 500)
    for name, part, color, size in (
        ("responses", shown.filter(~failed), "#4c78a8", 3),
        ("errors and 5xx", shown.filter(failed), ERROR_COLOR, 5),
    ):
        if part.height == 0:
            continue
        fig.add_trace(
            go.Scatter(
                x=part["t"].to_numpy(),
                y=part["ms"].to_numpy(),
                name=name,
                mode="markers",
                marker={"color": color, "size": size, "opacity": 0.5},
                customdata=np.column_stack(
                    [part["users"].to_numpy(), part["outcome"].to_numpy().astype(object)]
                ),
                hovertemplate=(
                    "%{y:.3g} ms at %{x:.2f} s<br>%{customdata[0]} users,"
                    " %{customdata[1]}<extra></extra>"
                ),
            )
        )
    _shade_steps(fig, windows)
    _time_axis(fig, x_range)
    ticks = _log_ticks(float(shown["ms"].min()), float(shown["ms"].max()))
    fig.update_yaxes(title_text="latency (ms, log)", type="log", tickvals=ticks)
    _headroom(fig, float(shown["ms"].max()) * 2.5)
    return _layout(fig, f"Latency of each request over time: {note}", 460)


def _log_ticks(low: float, high: float) -> list[float]:
    """Ticks at 1, 2, 5 × 10^n spanning [low, high] (only 10^n over more than 3 decades):
    plotly's own crowd a log axis that spans little."""
    ticks: list[float] = []
    mantissas = (1, 2, 5) if high < low * 1000 else (1,)
    exponent = math.floor(math.log10(low))
    while True:
        for mantissa in mantissas:
            tick = mantissa * 10.0**exponent
            if tick > high * 2:
                return ticks
            if tick >= low / 2:
                ticks.append(round(tick, 6))
        exponent += 1


def _component_order(names: list[str], verdict: dict[str, Any]) -> list[str]:
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
) -> go.Figure | None:
    """One line per component (and host, generator) of `cpu_cores` or `rss_bytes`."""
    if resources is None or resources.height == 0:
        return None
    palette = colors(verdict)
    memory = metric == "rss_bytes"
    frame = resources.sort("ts")
    fig = go.Figure()
    names = [str(n) for n in frame["component"].unique().to_list() if n is not None]
    top = 0.0
    for i, name in enumerate(_component_order(names, verdict)):
        part = frame.filter(pl.col("component") == name)
        values = part[metric].cast(pl.Float64)
        if memory:
            values = values / 2**20
        hidden = memory and name == "host"
        if not hidden:
            top = max(top, values.fill_nan(None).max() or 0.0)
        fig.add_trace(
            go.Scatter(
                x=(part["ts"] - t0).to_numpy(),
                y=values.to_numpy(),
                name=name,
                mode="lines",
                line={"color": palette.get(name, PALETTE[(i + 3) % len(PALETTE)])},
                # The host's used memory dwarfs every process: shown on demand.
                visible="legendonly" if hidden else True,
                hovertemplate=(
                    f"{name}: %{{y:.1f}} {'MiB' if memory else 'cores'}"
                    " at %{x:.1f} s<extra></extra>"
                ),
            )
        )
    if not memory:
        host = frame.filter(pl.col("component") == "host")["processes"].drop_nulls()
        if host.len():
            cpus = int(host.max())
            top = max(top, cpus)
            fig.add_hline(
                y=cpus,
                line={"color": "#7f7f7f", "dash": "dash", "width": 1},
                label={"text": f"{cpus} host CPUs", "textposition": "end", "yanchor": "top"},
            )
    _shade_steps(fig, windows)
    _time_axis(fig, x_range)
    _headroom(fig, top * 1.15)
    if memory:
        fig.update_yaxes(title_text="resident memory (MiB)", rangemode="tozero")
        return _layout(fig, "Memory over time", 380)
    fig.update_yaxes(title_text="CPU (cores)", rangemode="tozero")
    return _layout(fig, "CPU over time (1.0 = one core busy)", 420)
