"""The slowest requests at the knee, each as a waterfall: the client's time and, under it,
each tier's record of the same request (from its log or its span) where it ran."""

from __future__ import annotations

from typing import Any, cast

import polars as pl

from pinchpoint.report import table
from pinchpoint.report.chart_style import CLIENT, colors, layout
from pinchpoint.report.figure import Figure
from pinchpoint.rundir.scan import Frame, collect, columns, lazy, schema
from pinchpoint.rundir.steady import steady_requests

SLOWEST = 5


def knee_step(verdict: dict[str, Any]) -> dict[str, Any] | None:
    """The step nearest the knee's load, else the last step (the heaviest load)."""
    steps = table.steps(verdict)
    if not steps:
        return None
    knee = verdict.get("knee")
    load = knee.get("load") if isinstance(knee, dict) else None
    if not isinstance(load, int | float):
        return steps[-1]
    at = float(load)
    return min(steps, key=lambda s: abs(_level(s) - at))


def _level(step: dict[str, Any]) -> float:
    """A step's load: its level (users, or the open loop's rate), else its users."""
    for key in ("level", "users"):
        value = step.get(key)
        if isinstance(value, int | float):
            return float(value)
    return 0.0


def waterfall(
    requests: Frame | None,
    tiers: pl.DataFrame | None,
    verdict: dict[str, Any],
    run: dict[str, Any],
    count: int = SLOWEST,
) -> Figure | None:
    """None when the run has no request ids or no tier records to draw."""
    step = knee_step(verdict)
    need = {"req_id", "start_us", "latency_us"}
    if step is None or requests is None or tiers is None or not need <= set(columns(requests)):
        return None
    if tiers.height == 0 or "req_id" not in tiers.columns:
        return None
    ok = (
        (pl.col("error").is_null() & (pl.col("status") < 400))
        if "error" in columns(requests)
        else pl.lit(True)
    )
    # The slowest answered requests of the step that a tier recorded: a top-k of the scan.
    at_step = lazy(requests).filter(ok & (pl.col("step") == step["step"]))
    ids = tiers["req_id"].drop_nulls().unique().cast(schema(requests)["req_id"])
    # A filter, not a join: a scan keeps streaming and holds only the ids.
    traced = steady_requests(at_step, run).filter(pl.col("req_id").is_in(ids.implode()))
    slowest = collect(traced.top_k(count, by=["latency_us", "req_id"], reverse=[False, True])).sort(
        ["latency_us", "req_id"], descending=[True, False]
    )
    if slowest.height == 0:
        return None
    order = {name: i for i, name in enumerate(cast(list[str], verdict.get("tiers", [])))}
    calls = cast(dict[str, list[str]], verdict.get("calls") or {})
    palette = colors(verdict)
    fig = Figure()
    labels: list[str] = []
    shown: set[str] = set()
    for row in slowest.iter_rows(named=True):
        req_id, sent_us = int(row["req_id"]), int(row["start_us"])
        label = f"request {req_id}"
        bars = [(CLIENT, 0.0, row["latency_us"] / 1000)]
        mine = tiers.filter(pl.col("req_id") == req_id).sort(
            pl.col("component").replace_strict(order, default=len(order), return_dtype=pl.Int64)
        )
        placed: dict[str, float] = {}  # where each tier's record ends
        for record in mine.iter_rows(named=True):
            who, length_ms = record["component"], record["duration_s"] * 1000
            end_ms = _end_ms(record["ts"], sent_us)
            if end_ms is None:
                # A log that stamps whole seconds (gunicorn's %(t)s) cannot place the record:
                # it ends with its caller's, as a callee answers just before its caller does.
                caller = next((c for c in placed if who in calls.get(c, [])), None)
                end_ms = placed[caller] if caller is not None else row["latency_us"] / 1000
            placed[who] = end_ms
            bars.append((who, end_ms - length_ms, length_ms))
        for who, start_ms, length_ms in bars:
            labels.append(f"{label} · {who}")
            fig.add(
                {
                    "type": "bar",
                    "y": [labels[-1]],
                    "x": [length_ms],
                    "base": [start_ms],
                    "orientation": "h",
                    "name": who,
                    "legendgroup": who,
                    "showlegend": who not in shown,
                    "marker": {"color": palette.get(who, "#7f7f7f")},
                    "hovertemplate": f"{who}: %{{base:.2f}} ms + %{{x:.2f}} ms<extra>{label}</extra>",
                }
            )
            shown.add(who)
    level = _level(step)
    fig.axis("yaxis").update(
        {"categoryorder": "array", "categoryarray": labels[::-1], "automargin": True}
    )
    fig.axis("xaxis")["title"] = {"text": "ms from the request's send"}
    title = f"The {slowest.height} slowest requests at {level:g} {'users' if step.get('kind', 'users') == 'users' else 'req/s'}"
    layout(fig, title, height=max(300, 28 * len(labels) + 140))
    fig.layout["barmode"] = "overlay"
    return fig


def _end_ms(ts: float | None, sent_us: int) -> float | None:
    """When a record ended, in ms from the request's send; None when its time stamp has no
    fraction of a second to place it by."""
    if ts is None or ts == int(ts):
        return None
    return (ts * 1e6 - sent_us) / 1000
