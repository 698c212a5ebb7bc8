"""The comparison's plotly figures: percentile ladder, QQ plot, latency over time."""

from __future__ import annotations

import numpy as np

from pinchpoint.compare.result import US_PER_MS, ComparisonResult
from pinchpoint.compare.sides import Side
from pinchpoint.compare.stats import percentile
from pinchpoint.report.chart_style import SIDE_COLORS, layout
from pinchpoint.report.figure import Figure

A_COLOR, B_COLOR = SIDE_COLORS
MAX_POINTS = 5_000  # per side on the time chart
TIME_BINS = 60


def _layout(fig: Figure, height: int = 440) -> Figure:
    # No title: the page's section heading names the chart.
    return layout(fig, None, height)


def _names(result: ComparisonResult) -> tuple[str, str]:
    return f"A: {result.a.label}", f"B: {result.b.label}"


def ladder(result: ComparisonResult) -> Figure:
    name_a, name_b = _names(result)
    labels = [r.label for r in result.ladder]
    fig = Figure()
    for name, values, color in (
        (name_a, [r.a_ms for r in result.ladder], A_COLOR),
        (name_b, [r.b_ms for r in result.ladder], B_COLOR),
    ):
        fig.add(
            {
                "type": "scatter",
                "x": labels,
                "y": values,
                "name": name,
                "mode": "lines+markers",
                "line": {"color": color},
                "hovertemplate": "%{x}: %{y:.3f} ms<extra>" + name + "</extra>",
            }
        )
    fig.axis("xaxis").update({"title": {"text": "percentile"}, "type": "category"})
    fig.axis("yaxis").update({"title": {"text": "latency (ms, log)"}, "type": "log"})
    return _layout(fig)


def qq(result: ComparisonResult, a: Side, b: Side) -> Figure:
    sorted_a = np.sort(a.latency_us)
    sorted_b = np.sort(b.latency_us)
    probabilities = _probabilities(min(sorted_a.size, sorted_b.size))
    xs = [percentile(sorted_a, q) / US_PER_MS for q in probabilities]
    ys = [percentile(sorted_b, q) / US_PER_MS for q in probabilities]
    low = max(min(xs[0], ys[0]), 1e-3)
    high = max(xs[-1], ys[-1], low * 1.01)
    fig = Figure()
    fig.add(
        {
            "type": "scatter",
            "x": [low, high],
            "y": [low, high],
            "name": "y = x (no change)",
            "mode": "lines",
            "line": {"color": "#888888", "dash": "dash"},
            "hoverinfo": "skip",
        }
    )
    fig.add(
        {
            "type": "scatter",
            "x": xs,
            "y": ys,
            "name": "quantiles",
            "mode": "markers",
            "marker": {"color": B_COLOR, "size": 6},
            "text": [f"p{q:g}" for q in probabilities],
            "hovertemplate": "%{text}: A %{x:.3f} ms, B %{y:.3f} ms<extra></extra>",
        }
    )
    name_a, name_b = _names(result)
    fig.axis("xaxis").update({"title": {"text": f"{name_a} (ms, log)"}, "type": "log"})
    fig.axis("yaxis").update({"title": {"text": f"{name_b} (ms, log)"}, "type": "log"})
    return _layout(fig, height=520)


def _probabilities(n: int) -> list[float]:
    """1 … 99 and then tail percentiles, as far as the smaller side can resolve them."""
    qs = [float(q) for q in range(1, 100)]
    for step in (0.1, 0.01, 0.001):
        start = 100 - 10 * step
        qs += [round(start + i * step, 4) for i in range(1, 10)]
    return [q for q in qs if (1 - q / 100) * n >= 1 or q <= 99]


def over_time(result: ComparisonResult, a: Side, b: Side) -> Figure:
    """Each side against seconds from its own first request, so runs made at different
    times line up: a sample of the requests and each side's p99 per time bin."""
    name_a, name_b = _names(result)
    fig = Figure()
    spans = [_seconds(side).max(initial=0.0) for side in (a, b)]
    width = max(max(spans) / TIME_BINS, 1e-3)
    for side, name, color in ((a, name_a, A_COLOR), (b, name_b, B_COLOR)):
        seconds = _seconds(side)
        latency_ms = side.latency_us / US_PER_MS
        keep = _sample(seconds.size)
        fig.add(
            {
                "type": "scatter",
                "x": seconds[keep],
                "y": latency_ms[keep],
                "name": f"{name} requests",
                "mode": "markers",
                "marker": {"color": color, "size": 4, "opacity": 0.35},
                "hovertemplate": "%{x:.2f} s: %{y:.3f} ms<extra>" + name + "</extra>",
            }
        )
        centers, p99s = _binned_p99(seconds, side.latency_us, width)
        fig.add(
            {
                "type": "scatter",
                "x": centers,
                "y": p99s,
                "name": f"{name} p99 per {width:.3g} s",
                "mode": "lines",
                "line": {"color": color, "width": 2},
                "hovertemplate": "%{x:.2f} s: p99 %{y:.3f} ms<extra>" + name + "</extra>",
            }
        )
    fig.axis("xaxis")["title"] = {"text": "seconds from the side's first request"}
    fig.axis("yaxis").update({"title": {"text": "latency (ms, log)"}, "type": "log"})
    return _layout(fig, height=480)


def _seconds(side: Side) -> np.ndarray:
    if side.start_us.size == 0:
        return np.zeros(0)
    return (side.start_us - side.start_us.min()) / 1e6


def _sample(n: int) -> np.ndarray:
    if n <= MAX_POINTS:
        return np.arange(n)
    return np.linspace(0, n - 1, MAX_POINTS).round().astype(np.int64)


def _binned_p99(
    seconds: np.ndarray, latency_us: np.ndarray, width: float
) -> tuple[list[float], list[float]]:
    bins = np.floor(seconds / width).astype(np.int64)
    order = np.argsort(bins, kind="stable")
    bins, values = bins[order], latency_us[order]
    edges = np.flatnonzero(np.diff(bins)) + 1
    centers, p99s = [], []
    for chunk_bins, chunk in zip(np.split(bins, edges), np.split(values, edges), strict=True):
        if chunk.size == 0:
            continue
        centers.append((chunk_bins[0] + 0.5) * width)
        p99s.append(percentile(np.sort(chunk), 99) / US_PER_MS)
    return centers, p99s
