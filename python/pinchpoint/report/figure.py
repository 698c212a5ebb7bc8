"""The charts as plain plotly JSON: a figure is its traces and its layout, handed to
plotly.js as they are. plotly's Python objects validate every property and copy the
template at each change, most of what writing a report cost; these typed dicts hold the
same JSON.

The helpers give what the charts took from plotly's figure: shapes spanning a plot's
height or width (`vertical`, `horizontal`), a row of plots side by side (`subplots`) and
a secondary y axis (`secondary_y`), laid out as plotly's `make_subplots` does."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

import numpy as np

Scalar = float | int | str | None
# A trace's values: a list, or a numpy array (written as a list).
Values = Sequence[Scalar] | Sequence[Sequence[Scalar]] | np.ndarray


class Font(TypedDict, total=False):
    size: int
    color: str


class Line(TypedDict, total=False):
    color: str
    width: float
    dash: str


class Marker(TypedDict, total=False):
    color: str
    size: float
    opacity: float
    line: Line


class Trace(TypedDict, total=False):
    type: Literal["scatter", "bar"]
    x: Values
    y: Values
    base: Values
    width: float
    orientation: Literal["h", "v"]
    name: str
    mode: str
    marker: Marker
    line: Line
    customdata: Values
    text: Sequence[str]
    hovertemplate: str
    hoverinfo: str
    legendgroup: str
    showlegend: bool
    visible: bool | Literal["legendonly"]
    # The subplot's axes ("x2", "y2"); plotly's first ("x", "y") when absent.
    xaxis: str
    yaxis: str


class Title(TypedDict, total=False):
    text: str
    x: float
    xanchor: str


class ShapeLabel(TypedDict, total=False):
    text: str
    textangle: float
    textposition: str
    xanchor: str
    yanchor: str
    font: Font


class Shape(TypedDict, total=False):
    type: Literal["line", "rect"]
    x0: float
    x1: float
    y0: float
    y1: float
    xref: str
    yref: str
    line: Line
    fillcolor: str
    opacity: float
    layer: Literal["below", "above"]
    label: ShapeLabel


class Annotation(TypedDict, total=False):
    text: str
    x: float
    y: float
    xref: str
    yref: str
    xanchor: str
    yanchor: str
    showarrow: bool
    font: Font


class AutorangeOptions(TypedDict, total=False):
    include: list[float]


class Axis(TypedDict, total=False):
    title: Title
    type: Literal["linear", "log", "category"]
    tickvals: Sequence[float]
    ticktext: Sequence[str]
    tickmode: str
    ticksuffix: str
    range: Sequence[float]
    rangemode: str
    autorangeoptions: AutorangeOptions
    categoryorder: str
    categoryarray: Sequence[str]
    automargin: bool
    showgrid: bool
    showticklabels: bool
    # Where a subplot's axis sits, and whom it follows.
    anchor: str
    domain: list[float]
    matches: str
    overlaying: str
    side: str


class Margin(TypedDict, total=False):
    l: int  # noqa: E741 (plotly's name)
    r: int
    t: int
    b: int


class Legend(TypedDict, total=False):
    orientation: str
    x: float
    y: float
    xanchor: str
    yanchor: str


class Layout(TypedDict, total=False):
    # plotly's own template, as its package data has it.
    template: dict[str, Any]
    title: Title
    height: int
    margin: Margin
    legend: Legend
    hovermode: str
    barmode: str
    bargap: float
    showlegend: bool
    shapes: list[Shape]
    annotations: list[Annotation]


class PlotlyJson(TypedDict):
    """What plotly.js draws: `Plotly.newPlot(div, data, layout)`."""

    data: list[Trace]
    layout: dict[str, object]


@dataclass
class Figure:
    """A chart: its traces, its layout, and its axes by layout key ("xaxis", "yaxis2"),
    kept apart from the layout as their number is the chart's (one per subplot)."""

    data: list[Trace] = field(default_factory=list)
    layout: Layout = field(default_factory=Layout)
    axes: dict[str, Axis] = field(default_factory=dict)

    def add(self, trace: Trace, cell: tuple[str, str] | None = None) -> None:
        """Add a trace; in a subplot figure, on the axes `cell` ("x2", "y2")."""
        if cell is not None:
            trace["xaxis"], trace["yaxis"] = cell
        self.data.append(trace)

    def axis(self, name: Literal["xaxis", "yaxis"], n: int = 1) -> Axis:
        """The x or y axis numbered `n` (a subplot's, a secondary y's), to update in place."""
        return self.axes.setdefault(name if n == 1 else f"{name}{n}", {})

    def shape(self, shape: Shape) -> None:
        self.layout.setdefault("shapes", []).append(shape)

    def to_json(self) -> PlotlyJson:
        layout: dict[str, object] = {**self.axes}
        layout.update(self.layout)
        return {"data": self.data, "layout": layout}


def cell(col: int) -> tuple[str, str]:
    """The x and y axes of a subplot grid's column `col` (from 1), as traces name them."""
    n = "" if col == 1 else str(col)
    return f"x{n}", f"y{n}"


def vertical(kind: Literal["line", "rect"], x0: float, x1: float, col: int | None = None) -> Shape:
    """A line or band across the plot's height, from x0 to x1 on the x axis; in a subplot
    grid, column `col`'s."""
    if col is None:
        return {"type": kind, "x0": x0, "x1": x1, "y0": 0, "y1": 1, "yref": "y domain"}
    x, y = cell(col)
    return {"type": kind, "x0": x0, "x1": x1, "xref": x, "y0": 0, "y1": 1, "yref": f"{y} domain"}


def horizontal(y: float) -> Shape:
    """A line across the plot's width at `y` on the y axis."""
    return {"type": "line", "x0": 0, "x1": 1, "xref": "x domain", "y0": y, "y1": y, "yref": "y"}


def subplots(
    cols: int, titles: Sequence[str] = (), spacing: float | None = None, shared_y: bool = False
) -> Figure:
    """One row of `cols` plots, `spacing` apart (plotly's default 0.2 / cols), each titled
    above; with `shared_y`, every plot's y axis follows the first's, which alone is labeled.
    The domains are make_subplots's, to the last digit."""
    spacing = 0.2 / cols if spacing is None else spacing
    widths = [(1.0 - spacing * (cols - 1)) / cols] * cols
    fig = Figure()
    annotations: list[Annotation] = []
    for c in range(cols):
        start = sum(widths[:c]) + c * spacing
        end = start + widths[c]
        domain = [max(0.0, start), min(1.0, end)]
        x, y = cell(c + 1)
        fig.axis("xaxis", c + 1).update({"anchor": y, "domain": domain})
        fig.axis("yaxis", c + 1).update({"anchor": x, "domain": [0.0, 1.0]})
        if shared_y and c > 0:
            fig.axis("yaxis", c + 1).update({"matches": "y", "showticklabels": False})
        if c < len(titles) and titles[c]:
            annotations.append(
                {
                    "font": {"size": 16},
                    "showarrow": False,
                    "text": titles[c],
                    "x": (start + end) / 2.0,
                    "xanchor": "center",
                    "xref": "paper",
                    "y": 1.0,
                    "yanchor": "bottom",
                    "yref": "paper",
                }
            )
    if annotations:
        fig.layout["annotations"] = annotations
    return fig


def secondary_y() -> Figure:
    """One plot with a second y axis on the right ("y2"), room left for its title."""
    fig = Figure()
    fig.axis("xaxis").update({"anchor": "y", "domain": [0.0, 0.94]})
    fig.axis("yaxis").update({"anchor": "x", "domain": [0.0, 1.0]})
    fig.axis("yaxis", 2).update({"anchor": "x", "overlaying": "y", "side": "right"})
    return fig


def _plain(value: object) -> object:
    """numpy's values as JSON's: arrays as lists, scalars as numbers."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _strict(_constant: str) -> None:
    return None


def dumps(value: object) -> str:
    """Compact JSON as plotly writes it for a page: NaN and infinities as null, and `<`,
    `>` and `/` escaped so that no `</script>` ends the script it sits in."""
    text = json.dumps(value, separators=(",", ":"), default=_plain)
    if "NaN" in text or "Infinity" in text:
        text = json.dumps(json.loads(text, parse_constant=_strict), separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("/", "\\u002f")
