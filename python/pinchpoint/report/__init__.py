"""The self-contained `report.html`, and the tables and charts it shows (the terminal's
step table and verdict, made from the same tables, are in `pinchpoint.terminal.verdict`).

It reads the run folder and the verdict only, never the engine or the analysis code.
`write_report` loads on first use, so that a light module here (`fmt`, `load`) does not
pull in plotly."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pinchpoint.report.html import write_report

__all__ = ["write_report"]

_HOMES = {
    "write_report": "pinchpoint.report.html",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(home), name)
