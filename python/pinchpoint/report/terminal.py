"""The verdict in the terminal: the per-step table and the headline with its evidence."""

from __future__ import annotations

import io
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pinchpoint.report import summary
from pinchpoint.report.table import step_table


def render_steps(verdict: dict[str, Any], console: Console) -> None:
    """Print the per-step table: users, req/s, errors, client and per-tier latencies."""
    table_data = step_table(verdict)
    if not table_data.rows:
        console.print("No steps in this run.", highlight=False)
        return
    table = Table(
        box=box.SIMPLE_HEAD,
        header_style="bold",
        title="Steps (latencies in ms)",
        title_style="bold",
    )
    for column in table_data.columns:
        header = f"{column.group}\n{column.label}" if column.group else f"\n{column.label}"
        table.add_column(header, justify="right" if column.numeric else "left", no_wrap=True)
    for i, row in enumerate(table_data.rows):
        table.add_row(*row, style="yellow" if i == table_data.highlight else None)
    console.print(table)


def render_verdict(verdict: dict[str, Any], console: Console) -> None:
    """Print the headline (red with a bottleneck, green without), evidence and warnings."""
    found = summary.bottleneck(verdict) is not None
    console.print(
        Text(summary.headline(verdict), style="bold red" if found else "bold green"),
        highlight=False,
    )
    text = summary.summary(verdict)
    if text:
        console.print(Text(text), highlight=False)
    for item in summary.evidence(verdict):
        console.print(Text(f"  • {item}"), highlight=False)
    warning = summary.generator_warning(verdict)
    if warning:
        console.print(Text(warning, style="bold yellow"), highlight=False)


def verdict_text(verdict: dict[str, Any]) -> str:
    """The table and the verdict as plain text, for logs."""
    buffer = io.StringIO()
    # Wide enough that the table never wraps; plain lines are not padded to the width.
    console = Console(file=buffer, width=400, color_system=None, force_terminal=False)
    render_steps(verdict, console)
    render_verdict(verdict, console)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()) + "\n"
