"""What every report chart shares: the colors of each series, the layout and log-axis ticks."""

from __future__ import annotations

import math
from typing import Any

from pinchpoint.report.figure import Figure
from pinchpoint.report.plotly_files import plotly_white
from pinchpoint.report.table import tiers

CLIENT = "client"
# The two sides of a comparison, A and B.
SIDE_COLORS = ("#1f77b4", "#ff7f0e")
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
# The error classes of the errors chart, in turn.
ERROR_PALETTE = [
    "#d62728", "#ff7f0e", "#8c564b", "#e377c2", "#9467bd", "#bcbd22", "#7f7f7f",
    "#17becf", "#1f77b4", "#2ca02c",
]  # fmt: skip


def colors(verdict: dict[str, Any]) -> dict[str, str]:
    """One color per series, the same in every chart."""
    mapping = {CLIENT: CLIENT_COLOR, **OTHER_COLORS}
    for i, tier in enumerate(tiers(verdict)):
        mapping[tier] = PALETTE[i % len(PALETTE)]
    return mapping


def layout(fig: Figure, title: str | None, height: int = 420) -> Figure:
    """The one look of every chart, run and compare pages alike; without a title (the
    page's section heading names the chart) the legend moves up."""
    if title is not None:
        fig.layout["title"] = {"text": title, "x": 0, "xanchor": "left"}
    fig.layout.update(
        {
            "template": plotly_white(),
            "height": height,
            # Legend under the title, not beside the plot: every time chart keeps the same
            # plot width, so their x axes line up.
            "margin": {"l": 70, "r": 30, "t": 100 if title is not None else 50, "b": 50},
            "legend": {
                "orientation": "h",
                "yanchor": "bottom",
                "y": 1.02,
                "x": 0,
                "xanchor": "left",
            },
            "hovermode": "closest",
        }
    )
    return fig


def log_ticks(low: float, high: float) -> list[float]:
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
