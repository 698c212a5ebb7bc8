"""The report's figures against the load: one point per step, at its users (in open loop,
its target rate). Each returns None when its data is missing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from pinchpoint.report import fmt
from pinchpoint.report.chart_style import (
    BOTTLENECK_COLOR,
    CLIENT,
    CLIENT_COLOR,
    ERROR_COLOR,
    KNEE_COLOR,
    PERCENTILES,
    QUEUE_COLOR,
    SELF_COLOR,
    USL_COLOR,
    colors,
    layout,
    log_ticks,
)
from pinchpoint.report.figure import (
    Figure,
    Scalar,
    Trace,
    cell,
    horizontal,
    secondary_y,
    subplots,
    vertical,
)
from pinchpoint.report.table import bottleneck_users, steps, tier_stats, tiers
from pinchpoint.rundir.digest import OK, Digest
from pinchpoint.rundir.scan import Frame


def _log_users(users: Sequence[float]) -> bool:
    """A log users axis when the steps grow geometrically (largest ≥ 16× smallest)."""
    return len(users) > 2 and min(users) > 0 and max(users) / min(users) >= 16


def _users_axis(fig: Figure, users: Sequence[float], title: str = "users") -> None:
    """Users on x, on a log scale when the steps grow geometrically."""
    axis = fig.axis("xaxis")
    axis.update({"title": {"text": title}, "type": "log" if _log_users(users) else "linear"})
    if len(users) <= 12:
        axis["tickvals"] = list(users)


def _mark(fig: Figure, x: float, text: str, col: int | None = None) -> None:
    # A shape with its own label: plain annotations need log10 positions on log axes.
    fig.shape(
        {
            **vertical("line", x, x, col),
            "line": {"color": BOTTLENECK_COLOR, "dash": "dot", "width": 2},
            # Horizontal, inside the plot just right of the line's top: along the line it
            # would run up into the legend.
            "label": {
                "text": text,
                "textangle": 0,
                "textposition": "end",
                "xanchor": "left",
                "yanchor": "top",
                "font": {"color": BOTTLENECK_COLOR},
            },
        }
    )


def _knee(verdict: dict[str, Any]) -> dict[str, Any] | None:
    knee = verdict.get("knee")
    return knee if isinstance(knee, dict) and fmt.is_number(knee.get("load")) else None


def _mark_knee(fig: Figure, verdict: dict[str, Any]) -> None:
    """The knee as a dashed line, its confidence interval as a shaded band."""
    knee = _knee(verdict)
    if knee is None:
        return
    load = float(knee["load"])
    low, high = _num(knee.get("ci_low")), _num(knee.get("ci_high"))
    if low is not None and high is not None and high > low:
        fig.shape(
            {
                **vertical("rect", low, high),
                "fillcolor": KNEE_COLOR,
                "opacity": 0.15,
                "line": {"width": 0},
                "layer": "below",
            }
        )
    fig.shape(
        {
            **vertical("line", load, load),
            "line": {"color": KNEE_COLOR, "dash": "dash", "width": 2},
            # At the bottom, so it never meets the bottleneck's label at the top.
            "label": {
                "text": f"knee {load:.1f} users",
                "textangle": 0,
                "textposition": "start",
                "xanchor": "left",
                "yanchor": "bottom",
                "font": {"color": KNEE_COLOR},
            },
        }
    )


def _usl_curve(verdict: dict[str, Any], users: Sequence[float], log: bool) -> Trace | None:
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
    return {
        "type": "scatter",
        "x": n,
        "y": x,
        "name": f"USL fit{fit}",
        "mode": "lines",
        "line": {"color": USL_COLOR, "dash": "dot", "width": 2},
        "hovertemplate": "USL: %{y:.1f} req/s at %{x:.1f} users<extra></extra>",
    }


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


def latency_vs_users(verdict: dict[str, Any]) -> Figure | None:
    """p50 (solid) and p95 (dashed) of the client and of each tier against users."""
    step_list = steps(verdict)
    if not step_list:
        return None
    users = _users(verdict)
    palette = colors(verdict)
    fig = Figure()
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
            fig.add(
                {
                    "type": "scatter",
                    "x": users,
                    "y": values,
                    "name": f"{name} {label}",
                    "legendgroup": name,
                    "mode": "lines+markers",
                    "line": {"color": color, "dash": dash, "width": 3 if name == CLIENT else 2},
                    "hovertemplate": f"{name} {label}: %{{y:.3g}} ms at %{{x}} users<extra></extra>",
                }
            )
    _users_axis(fig, users, _load_title(verdict))
    fig.axis("yaxis").update({"title": {"text": "latency (ms)"}, "rangemode": "tozero"})
    _mark_knee(fig, verdict)
    start = bottleneck_users(verdict)
    if start is not None:
        _mark(fig, start, _bottleneck_text(verdict))
    return layout(fig, "Latency vs users: client and each tier (p50 solid, p95 dashed)", 480)


def self_queue_vs_users(verdict: dict[str, Any]) -> Figure | None:
    """Per tier, self time and queue time p50 stacked, one small chart per tier."""
    step_list = steps(verdict)
    tier_list = tiers(verdict)
    if not step_list or not tier_list:
        return None
    users = _users(verdict)
    index = list(range(len(step_list)))
    fig = subplots(len(tier_list), tier_list, spacing=0.04, shared_y=True)
    for col, tier in enumerate(tier_list, start=1):
        stats = [tier_stats(s, tier) for s in step_list]
        parts = [("self", "self_p50_ms", "self_p95_ms", SELF_COLOR)]
        if any(fmt.is_number(st.get("queue_p50_ms")) for st in stats):
            parts.append(("queue", "queue_p50_ms", "queue_p95_ms", QUEUE_COLOR))
        for part, p50_key, p95_key, color in parts:
            # Each step's users and p95, for the hover.
            hover: list[list[Scalar]] = [
                [u, fmt.ms(st.get(p95_key))] for u, st in zip(users, stats, strict=True)
            ]
            fig.add(
                {
                    "type": "bar",
                    "x": index,
                    "y": [_num(st.get(p50_key)) for st in stats],
                    "name": f"{part} time p50",
                    "legendgroup": part,
                    "marker": {"color": color},
                    "customdata": hover,
                    "hovertemplate": (
                        f"{tier} {part} time at %{{customdata[0]}} users:"
                        " p50 %{y:.3g} ms, p95 %{customdata[1]} ms<extra></extra>"
                    ),
                },
                cell(col),
            )
        fig.axis("xaxis", col).update(
            {
                "tickvals": index,
                "ticktext": [f"{u:g}" for u in users],
                "title": {"text": _load_title(verdict)},
            }
        )
    # One legend entry per part, however many tiers have a queue.
    seen: set[str] = set()
    for trace in fig.data:
        trace["showlegend"] = trace["legendgroup"] not in seen
        seen.add(trace["legendgroup"])
    fig.layout["barmode"] = "stack"
    fig.axis("yaxis")["title"] = {"text": "ms (p50)"}
    start = bottleneck_users(verdict)
    at = next((i for i, u in enumerate(users) if u >= start), None) if start else None
    if at is not None:
        component = (verdict.get("bottleneck") or {}).get("component")
        for col, tier in enumerate(tier_list, start=1):
            # Between the last step before the bottleneck and the first step in it.
            text = f"from {start} users" if tier == component else ""
            _mark(fig, at - 0.5, text, col)
    layout(fig, "Self time and queue time per tier vs users (p50, stacked)", 420)
    # Above the tier names, which sit where the legend would.
    fig.layout["legend"]["y"] = 1.14
    fig.layout["margin"]["t"] = 120
    return fig


def throughput_vs_users(verdict: dict[str, Any]) -> Figure | None:
    """Requests per second against users, error rate on a second axis."""
    step_list = steps(verdict)
    if not step_list:
        return None
    users = _users(verdict)
    fig = secondary_y()
    fig.add(
        {
            "type": "scatter",
            "x": users,
            "y": [_num(s.get("throughput_rps")) for s in step_list],
            "name": "throughput",
            "mode": "lines+markers",
            "line": {"color": CLIENT_COLOR, "width": 3},
            "hovertemplate": "%{y:.1f} req/s at %{x} users<extra></extra>",
        },
        ("x", "y"),
    )
    curve = _usl_curve(verdict, users, _log_users(users))
    if curve is not None:
        fig.add(curve, ("x", "y"))
    error_pct = [
        (float(s["error_rate"]) * 100 if fmt.is_number(s.get("error_rate")) else None)
        for s in step_list
    ]
    fig.add(
        {
            "type": "scatter",
            "x": users,
            "y": error_pct,
            "name": "error rate",
            "mode": "lines+markers",
            "line": {"color": ERROR_COLOR, "dash": "dot"},
            "hovertemplate": "%{y:.3g}% errors at %{x} users<extra></extra>",
        },
        ("x", "y2"),
    )
    _users_axis(fig, users, _load_title(verdict))
    fig.axis("yaxis").update({"title": {"text": "requests / s"}, "rangemode": "tozero"})
    errors = fig.axis("yaxis", 2)
    errors.update(
        {
            "title": {"text": "errors"},
            "ticksuffix": "%",
            "rangemode": "tozero",
            "tickmode": "auto",
            "showgrid": False,
        }
    )
    if not any(error_pct):
        errors["range"] = [0, 1]
    _mark_knee(fig, verdict)
    start = bottleneck_users(verdict)
    if start is not None:
        _mark(fig, start, _bottleneck_text(verdict))
    title = "Throughput vs users" + (" with the USL fit" if curve is not None else "")
    return layout(fig, title, 400)


def step_percentiles(requests: Frame | Digest | None) -> pl.DataFrame | None:
    """Per step: users, successful responses (`n`) and the latency percentiles in ms of
    `PERCENTILES`, linearly interpolated as the verdict's (from the requests' digest: exact
    up to its EXACT_ROWS requests, within 0.1% above). None without a response."""
    if requests is None:
        return None
    digest = requests if isinstance(requests, Digest) else Digest.of(requests, extent=True)
    rows = []
    for step, part in digest.where(OK).groups("step"):
        values = part.percentiles_us([q for _name, q, _color in PERCENTILES])
        rows.append(
            {
                "step": step,
                "users": part.first("users"),
                "n": part.count(),
                **{
                    name: value / 1000 if value is not None else None
                    for (name, _q, _color), value in zip(PERCENTILES, values, strict=True)
                },
            }
        )
    return pl.DataFrame(rows) if rows else None


def percentiles_vs_users(
    table: pl.DataFrame | None, thresholds: Sequence[tuple[str, float]] = ()
) -> Figure | None:
    """p50 … p99.99 of each step's successful responses against users, on a log axis;
    `thresholds` (label, ms), such as the plan's SLA, as horizontal lines."""
    if table is None or table.height == 0:
        return None
    users = [int(u) for u in table["users"].to_list()]
    counts = table["n"].to_numpy()
    fig = Figure()
    for name, _q, color in PERCENTILES:
        fig.add(
            {
                "type": "scatter",
                "x": users,
                "y": table[name].to_numpy(),
                "name": name,
                "mode": "lines+markers",
                "line": {"color": color, "width": 2},
                "customdata": counts,
                "hovertemplate": (
                    f"{name}: %{{y:.3g}} ms at %{{x}} users"
                    " (of %{customdata:,} responses)<extra></extra>"
                ),
            }
        )
    values = table.select(name for name, _q, _c in PERCENTILES).to_numpy().ravel()
    values = values[np.isfinite(values) & (values > 0)]
    low, high = float(values.min()), float(values.max())
    for label, ms in thresholds:
        low, high = min(low, ms), max(high, ms)
        fig.shape(
            {
                **horizontal(ms),
                "line": {"color": BOTTLENECK_COLOR, "dash": "dash", "width": 1},
                "label": {
                    "text": label,
                    # Under the line: above it, the top one would run into the legend.
                    "textposition": "start",
                    "yanchor": "top",
                    "font": {"color": BOTTLENECK_COLOR, "size": 11},
                },
            }
        )
    _users_axis(fig, users)
    fig.axis("yaxis").update(
        {"title": {"text": "latency (ms, log)"}, "type": "log", "tickvals": log_ticks(low, high)}
    )
    return layout(fig, "Latency percentiles per step (successful responses)", 460)
