"""The reports: the terminal table and verdict, and the self-contained `report.html`.

They read the run folder and the verdict only, never the engine or the analysis code."""

from pinchpoint.report.html import write_report
from pinchpoint.report.terminal import render_steps, render_verdict, verdict_text

__all__ = ["render_steps", "render_verdict", "verdict_text", "write_report"]
