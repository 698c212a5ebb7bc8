"""The reports: the terminal table and verdict, and the self-contained `report.html`.

They read the run folder and the verdict only, never the engine or the analysis code.
The names below load on first use, so that a light module here (`fmt`, `load`) does not
pull in plotly."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pinchpoint.report.html import write_report
    from pinchpoint.report.terminal import render_steps, render_verdict, verdict_text

__all__ = ["render_steps", "render_verdict", "verdict_text", "write_report"]

_HOMES = {
    "write_report": "pinchpoint.report.html",
    "render_steps": "pinchpoint.report.terminal",
    "render_verdict": "pinchpoint.report.terminal",
    "verdict_text": "pinchpoint.report.terminal",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(home), name)
