"""The page shell every pinchpoint page shares (a run's report, a comparison): one style,
plotly.js inlined once so the page works offline, charts embedded the same way, and the
file written whole or not at all."""

from __future__ import annotations

import json
import os
from functools import cache
from html import escape
from pathlib import Path
from uuid import uuid4

from pinchpoint.report.figure import Figure, dumps
from pinchpoint.report.plotly_files import plotly_js

PLOT_CONFIG = {"displaylogo": False, "responsive": True}
_CONFIG_JSON = json.dumps(PLOT_CONFIG)

# The look of every page; a page adds the rules of its own sections.
BASE_CSS = """
:root { --fg: #1d2330; --muted: #5b6475; --line: #dfe3ea; --bg: #f6f7f9;
        --bad: #b42318; --good: #157f3b; --warn: #9a6700; --same: #5b6475; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
       font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
main { max-width: 1280px; margin: 0 auto; padding: 24px; }
.brand { margin: 0; color: var(--muted); font-weight: 600; letter-spacing: .02em; }
section { background: #fff; border: 1px solid var(--line); border-radius: 8px;
          padding: 16px 20px; margin: 18px 0; }
h2 { font-size: 18px; margin: 0 0 10px; }
.headline { font-weight: 700; margin: 0 0 6px; }
.note { color: var(--muted); font-style: italic; margin: 8px 0; }
.chart { margin: 6px 0 14px; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; font-size: 14px; }
th, td { border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th { background: #f0f2f5; font-weight: 600; }
td.text, th.text { text-align: left; }
.scroll { overflow-x: auto; }
"""


def page(title: str, brand: str, sections: list[str], css: str = "", script: str = "") -> str:
    """A whole self-contained page: the shell around the page's sections."""
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(title)}</title>",
            f"<style>{BASE_CSS}{css}</style>",
            f'<script type="text/javascript">{_inline_plotly_js()}</script>',
            "</head>",
            "<body>",
            "<main>",
            f'<p class="brand">{escape(brand)}</p>',
            *sections,
            "</main>",
            *([f"<script>{script}</script>"] if script else []),
            "</body>",
            "</html>",
        ]
    )


@cache
def _inline_plotly_js() -> str:
    return plotly_js().replace("</script", "<\\/script")


def figure(fig: Figure, div_id: str | None = None) -> str:
    """A chart as a div of the page (plotly.js is the shell's, once): the div plotly's
    `to_html(full_html=False)` writes, drawn by `Plotly.newPlot` when the page loads."""
    plot = fig.to_json()
    height = fig.layout.get("height") or 450
    div_id = div_id or str(uuid4())
    return (
        f'<div class="chart"><div style="height:{height}px; width:100%;">'
        f'<div id="{div_id}" class="plotly-graph-div" style="height:100%; width:100%;"></div>'
        "<script>window.PLOTLYENV=window.PLOTLYENV || {};"
        f'if (document.getElementById("{div_id}")) {{'
        f'Plotly.newPlot("{div_id}", {dumps(plot["data"])}, {dumps(plot["layout"])}, '
        f"{_CONFIG_JSON})}};</script></div></div>"
    )


def write_page(out: Path, text: str) -> Path:
    """Write a page through a temporary file beside it, so a reader never sees half."""
    out = Path(out)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, out)
    return out
