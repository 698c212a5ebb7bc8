"""Resource charts beyond CPU and memory: the accept backlog of each component's listening
sockets, and the host's disk and network bytes, over time. Runs sampled before these
columns existed have no such charts."""

from __future__ import annotations

from typing import Any, cast

import polars as pl

from pinchpoint.report.chart_style import PALETTE, colors, layout
from pinchpoint.report.figure import Figure
from pinchpoint.report.time_charts import Window, component_order, headroom, shade_steps, time_axis

# Host columns drawn in MB/s, with their legend names.
HOST_IO = [
    ("disk_read_bytes_s", "disk read"),
    ("disk_write_bytes_s", "disk write"),
    ("net_rx_bytes_s", "network in"),
    ("net_tx_bytes_s", "network out"),
    ("net_loopback_bytes_s", "loopback"),
]


MORE_PLOTS = ["pp-backlog-time", "pp-io-time"]


def more_over_time(
    resources: pl.DataFrame | None,
    verdict: dict[str, Any],
    t0: float,
    windows: list[Window],
    x_range: tuple[float, float] | None,
) -> list[tuple[str, Figure]]:
    """The charts of this module that the samples have data for, with their div ids."""
    figures = (
        backlog_over_time(resources, verdict, t0, windows, x_range),
        host_io_over_time(resources, t0, windows, x_range),
    )
    return [
        (div_id, fig) for div_id, fig in zip(MORE_PLOTS, figures, strict=True) if fig is not None
    ]


def _is_host(name: str) -> bool:
    return name == "host" or name.startswith("host@")


def backlog_over_time(
    resources: pl.DataFrame | None,
    verdict: dict[str, Any],
    t0: float,
    windows: list[Window],
    x_range: tuple[float, float] | None,
) -> Figure | None:
    """One line per component: connections waiting in its listening sockets' accept
    queues, not yet taken by a worker. None when no component's backlog was sampled."""
    if resources is None or "listen_backlog" not in resources.columns:
        return None
    frame = resources.filter(pl.col("listen_backlog").is_not_null()).sort("ts")
    names = [
        str(n)
        for n in frame["component"].unique().to_list()
        if n is not None and not _is_host(str(n)) and not str(n).startswith(("generator", "agent"))
    ]
    if not names:
        return None
    palette = colors(verdict)
    fig = Figure()
    top = 0.0
    for i, name in enumerate(component_order(names, verdict)):
        part = frame.filter(pl.col("component") == name)
        top = max(top, float(cast(float, part["listen_backlog"].max()) or 0))
        fig.add(
            {
                "type": "scatter",
                "x": (part["ts"] - t0).to_numpy(),
                "y": part["listen_backlog"].to_numpy(),
                "name": name,
                "mode": "lines",
                "line": {"color": palette.get(name, PALETTE[(i + 3) % len(PALETTE)])},
                "hovertemplate": f"{name}: %{{y}} waiting at %{{x:.1f}} s<extra></extra>",
            }
        )
    shade_steps(fig, windows)
    time_axis(fig, x_range)
    headroom(fig, max(top, 1.0) * 1.15)
    fig.axis("yaxis").update({"title": {"text": "connections waiting"}, "rangemode": "tozero"})
    return layout(fig, "Accept backlog over time: connections waiting for a worker", 380)


def host_io_over_time(
    resources: pl.DataFrame | None,
    t0: float,
    windows: list[Window],
    x_range: tuple[float, float] | None,
) -> Figure | None:
    """The host's disk and network bytes per second. None when none was sampled."""
    if resources is None:
        return None
    present = [(c, label) for c, label in HOST_IO if c in resources.columns]
    hosts = sorted(
        {str(n) for n in resources["component"].unique().to_list() if n and _is_host(str(n))}
    )
    fig = Figure()
    top = 0.0
    for host in hosts:
        part = resources.filter(pl.col("component") == host).sort("ts")
        for i, (column, label) in enumerate(present):
            values = part[column].cast(pl.Float64) / 1e6
            if values.drop_nulls().len() == 0:
                continue
            top = max(top, cast(float, values.max()) or 0.0)
            name = label if host == "host" else f"{host} {label}"
            fig.add(
                {
                    "type": "scatter",
                    "x": (part["ts"] - t0).to_numpy(),
                    "y": values.to_numpy(),
                    "name": name,
                    "mode": "lines",
                    "line": {"color": PALETTE[i % len(PALETTE)]},
                    "hovertemplate": f"{name}: %{{y:.2f}} MB/s at %{{x:.1f}} s<extra></extra>",
                }
            )
    if not fig.data:
        return None
    shade_steps(fig, windows)
    time_axis(fig, x_range)
    headroom(fig, max(top, 0.01) * 1.15)
    fig.axis("yaxis").update({"title": {"text": "MB/s"}, "rangemode": "tozero"})
    return layout(fig, "Host disk and network over time", 380)
