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
KNEE_COLOR = "#6a3d9a"
USL_COLOR = "#e377c2"
# p50 … p99.99 of each step, light to dark.
PERCENTILES = [
    ("p50", 50.0, "#9ecae1"),
    ("p90", 90.0, "#6baed6"),
    ("p95", 95.0, "#4292c6"),
    ("p99", 99.0, "#2171b5"),
    ("p99.9", 99.9, "#08519c"),
    ("p99.99", 99.99, "#08306b"),
]
# Errors by class: the engine's transport errors first, then HTTP statuses.
ERROR_CLASSES = [
    "timeout", "connect_timeout", "connect_refused", "connect_error", "tls", "reset", "closed",
    "io",
]  # fmt: skip
ERROR_PALETTE = [
    "#d62728", "#ff7f0e", "#8c564b", "#e377c2", "#9467bd", "#bcbd22", "#7f7f7f",
    "#17becf", "#1f77b4", "#2ca02c",
]  # fmt: skip


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


def _log_users(users: Sequence[int]) -> bool:
    """A log users axis when the steps grow geometrically (largest ≥ 16× smallest)."""
    return len(users) > 2 and min(users) > 0 and max(users) / min(users) >= 16


def _users_axis(fig: go.Figure, users: Sequence[float], title: str = "users") -> None:
    """Users on x, on a log scale when the steps grow geometrically."""
    log = _log_users(users)
    ticks = list(users) if len(users) <= 12 else None
    fig.update_xaxes(title_text=title, type="log" if log else "linear", tickvals=ticks)


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


def _knee(verdict: dict[str, Any]) -> dict[str, Any] | None:
    knee = verdict.get("knee")
    return knee if isinstance(knee, dict) and fmt.is_number(knee.get("load")) else None


def _mark_knee(fig: go.Figure, verdict: dict[str, Any]) -> None:
    """The knee as a dashed line, its confidence interval as a shaded band."""
    knee = _knee(verdict)
    if knee is None:
        return
    load = float(knee["load"])
    low, high = _num(knee.get("ci_low")), _num(knee.get("ci_high"))
    if low is not None and high is not None and high > low:
        fig.add_shape(
            type="rect",
            x0=low,
            x1=high,
            y0=0,
            y1=1,
            yref="y domain",
            fillcolor=KNEE_COLOR,
            opacity=0.15,
            line_width=0,
            layer="below",
        )
    fig.add_shape(
        type="line",
        x0=load,
        x1=load,
        y0=0,
        y1=1,
        yref="y domain",
        line={"color": KNEE_COLOR, "dash": "dash", "width": 2},
        # At the bottom, so it never meets the bottleneck's label at the top.
        label={
            "text": f"knee {load:.1f} users",
            "textangle": 0,
            "textposition": "start",
            "xanchor": "left",
            "yanchor": "bottom",
            "font": {"color": KNEE_COLOR},
        },
    )


def _usl_curve(verdict: dict[str, Any], users: Sequence[int], log: bool) -> go.Scatter | None:
    """X(N) = λN / (1 + σ(N − 1) + κN(N − 1)) over the tested users."""
    usl = verdict.get("scalability")
    if not isinstance(usl, dict):
        return None
    lam, sigma, kappa = (_num(usl.get(k)) for k in ("lambda", "sigma", "kappa"))
    tested = [u for u in users if u > 0]
    if lam is None or sigma is None or kappa is None or not tested:
        return None
    low, high = min(tested), max(tested)
    n = np.geomspace(low, high, 200) if log and high > low else np.linspace(low, high, 200)
    x = lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))
    r2 = _num(usl.get("r_squared"))
    fit = f" (R² {r2:.2f})" if r2 is not None else ""
    return go.Scatter(
        x=n,
        y=x,
        name=f"USL fit{fit}",
        mode="lines",
        line={"color": USL_COLOR, "dash": "dot", "width": 2},
        hovertemplate="USL: %{y:.1f} req/s at %{x:.1f} users<extra></extra>",
    )


def _bottleneck_text(verdict: dict[str, Any]) -> str:
    found = verdict.get("bottleneck") or {}
    return f"{found.get('component', 'bottleneck')} from {bottleneck_users(verdict)} users"


def _num(value: Any) -> float | None:
    return float(value) if fmt.is_number(value) else None


def _users(verdict: dict[str, Any]) -> list[float]:
    """Each step's load: its users, or in open loop its target rate."""
    return [
        float(s.get("level") or 0) if s.get("kind") == "rate" else int(s.get("users") or 0)
        for s in steps(verdict)
    ]


def _load_title(verdict: dict[str, Any]) -> str:
    return "target req/s" if any(s.get("kind") == "rate" for s in steps(verdict)) else "users"


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
    _users_axis(fig, users, _load_title(verdict))
    fig.update_yaxes(title_text="latency (ms)", rangemode="tozero")
    _mark_knee(fig, verdict)
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
            tickvals=index,
            ticktext=[f"{u:g}" for u in users],
            title_text=_load_title(verdict),
            row=1,
            col=col,
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
    curve = _usl_curve(verdict, users, _log_users(users))
    if curve is not None:
        fig.add_trace(curve, secondary_y=False)
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
    _users_axis(fig, users, _load_title(verdict))
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
    _mark_knee(fig, verdict)
    start = bottleneck_users(verdict)
    if start is not None:
        _mark(fig, start, _bottleneck_text(verdict))
    title = "Throughput vs users" + (" with the USL fit" if curve is not None else "")
    return _layout(fig, title, 400)


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


def step_percentiles(requests: pl.DataFrame | None) -> pl.DataFrame | None:
    """Per step: users, successful responses (`n`) and the latency percentiles in ms of
    `PERCENTILES`, linearly interpolated as the verdict's. None without a response."""
    if requests is None or requests.height == 0:
        return None
    ok = requests.filter(pl.col("error").is_null() & (pl.col("status") < 400))
    if ok.height == 0:
        return None
    return (
        ok.group_by("step")
        .agg(
            pl.col("users").first(),
            pl.len().alias("n"),
            *(
                (pl.col("latency_us").quantile(q / 100, interpolation="linear") / 1000).alias(name)
                for name, q, _color in PERCENTILES
            ),
        )
        .sort("step")
    )


def percentiles_vs_users(
    table: pl.DataFrame | None, thresholds: Sequence[tuple[str, float]] = ()
) -> go.Figure | None:
    """p50 … p99.99 of each step's successful responses against users, on a log axis;
    `thresholds` (label, ms), such as the plan's SLA, as horizontal lines."""
    if table is None or table.height == 0:
        return None
    users = [int(u) for u in table["users"].to_list()]
    counts = table["n"].to_numpy()
    fig = go.Figure()
    for name, _q, color in PERCENTILES:
        fig.add_trace(
            go.Scatter(
                x=users,
                y=table[name].to_numpy(),
                name=name,
                mode="lines+markers",
                line={"color": color, "width": 2},
                customdata=counts,
                hovertemplate=(
                    f"{name}: %{{y:.3g}} ms at %{{x}} users"
                    " (of %{customdata:,} responses)<extra></extra>"
                ),
            )
        )
    values = table.select(name for name, _q, _c in PERCENTILES).to_numpy().ravel()
    values = values[np.isfinite(values) & (values > 0)]
    low, high = float(values.min()), float(values.max())
    for label, ms in thresholds:
        low, high = min(low, ms), max(high, ms)
        fig.add_hline(
            y=ms,
            line={"color": BOTTLENECK_COLOR, "dash": "dash", "width": 1},
            label={
                "text": label,
                # Under the line: above it, the top one would run into the legend.
                "textposition": "start",
                "yanchor": "top",
                "font": {"color": BOTTLENECK_COLOR, "size": 11},
            },
        )
    _users_axis(fig, users)
    fig.update_yaxes(title_text="latency (ms, log)", type="log", tickvals=_log_ticks(low, high))
    return _layout(fig, "Latency percentiles per step (successful responses)", 460)


def _error_class(frame: pl.DataFrame) -> pl.DataFrame:
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
    requests: pl.DataFrame | None,
    t0: float,
    windows: list[Window],
    x_range: tuple[float, float] | None,
) -> go.Figure | None:
    """Failed requests per second by class (error or HTTP status), stacked, by send time.
    None when no request failed."""
    if requests is None or requests.height == 0:
        return None
    failed = _error_class(requests)
    if failed.height == 0:
        return None
    counts = (
        failed.with_columns(((pl.col("start_us") / 1e6 - t0).floor()).alias("second"))
        .group_by("second", "class")
        .agg(pl.len().alias("n"), pl.col("users").first())
        .sort("second")
    )
    classes = _class_order([str(c) for c in counts["class"].unique().to_list()])
    fig = go.Figure()
    for i, name in enumerate(classes):
        part = counts.filter(pl.col("class") == name)
        fig.add_trace(
            go.Bar(
                x=(part["second"] + 0.5).to_numpy(),
                y=part["n"].to_numpy(),
                width=1.0,
                name=name,
                marker={"color": ERROR_PALETTE[i % len(ERROR_PALETTE)], "line": {"width": 0}},
                customdata=np.column_stack([part["second"].to_numpy(), part["users"].to_numpy()]),
                hovertemplate=(
                    f"{name}: %{{y}} in second %{{customdata[0]:.0f}}"
                    " (%{customdata[1]} users)<extra></extra>"
                ),
            )
        )
    # A legend even for one class: it names the class.
    fig.update_layout(barmode="stack", bargap=0, showlegend=True)
    _shade_steps(fig, windows)
    _time_axis(fig, x_range)
    top = counts.group_by("second").agg(pl.col("n").sum())["n"].max()
    _headroom(fig, float(top or 0) * 1.25)
    fig.update_yaxes(title_text="failed requests / s", rangemode="tozero")
    total = failed.height
    return _layout(
        fig, f"Errors over time by class: {total:,} failed of {requests.height:,} requests", 380
    )
