"""The verdict in the terminal: the per-step table and the headline with its evidence."""

from __future__ import annotations

import io
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pinchpoint.report import summary
from pinchpoint.report.request_table import request_table
from pinchpoint.report.table import StepTable, step_table


def render_steps(verdict: dict[str, Any], console: Console) -> None:
    """Print the per-step table: users, req/s, errors, client and per-tier latencies.

    On a console too narrow for it, the columns are split over several tables, each
    starting with the users, rather than squeezed into ellipses."""
    data = step_table(verdict)
    if not data.rows:
        console.print("No steps in this run.", highlight=False)
        return
    for i, columns in enumerate(_column_groups(data, console)):
        title = "Steps (latencies in ms)" if i == 0 else None
        console.print(_table(data, columns, title))
    per_request = request_table(verdict)
    for i, columns in enumerate(_column_groups(per_request, console) if per_request.rows else []):
        title = "Per request (latencies in ms; tiers: p50 / self p50)" if i == 0 else None
        console.print(_table(per_request, columns, title))


def _table(data: StepTable, columns: list[int], title: str | None) -> Table:
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", title=title, title_style="bold")
    for c in columns:
        column = data.columns[c]
        header = f"{column.group}\n{column.label}" if column.group else f"\n{column.label}"
        table.add_column(header, justify="right", no_wrap=True)
    for i, row in enumerate(data.rows):
        table.add_row(*(row[c] for c in columns), style="yellow" if i == data.highlight else None)
    return table


def _column_groups(data: StepTable, console: Console) -> list[list[int]]:
    """Columns packed greedily into tables that fit the console; column 0 (users) in each."""
    unbounded = console.options.update_width(10_000)

    def fits(columns: list[int]) -> bool:
        width = console.measure(_table(data, columns, None), options=unbounded).maximum
        return width <= console.width

    groups: list[list[int]] = []
    current = [0]
    for c in range(1, len(data.columns)):
        if len(current) > 1 and not fits([*current, c]):
            groups.append(current)
            current = [0]
        current.append(c)
    groups.append(current)
    return groups


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
    if predicted := summary.prediction(verdict):
        console.print(Text(predicted, style="bold"), highlight=False)
    evidence = summary.evidence(verdict)
    if evidence:
        # A grid, so a long item wraps under its own text, not under the bullet.
        bullets = Table.grid(padding=(0, 1))
        bullets.add_column(justify="right", width=3, no_wrap=True)
        bullets.add_column()
        for item in evidence:
            bullets.add_row("•", Text(item))
        console.print(bullets)
    for line in summary.notes(verdict):
        console.print(Text(line), highlight=False)
    warning = summary.generator_warning(verdict)
    if warning:
        console.print(Text(warning, style="bold yellow"), highlight=False)
    short = summary.short_warning(verdict)
    if short:
        console.print(Text(short, style="bold yellow"), highlight=False)
    partial = summary.partial_warning(verdict)
    if partial:  # one line, whole in logs
        console.print(Text(partial, style="bold yellow"), highlight=False, soft_wrap=True)
    for line in summary.load_changes(verdict):
        console.print(Text(f"Load changed: {line}", style="bold"), highlight=False)
    if aborted := verdict.get("aborted"):
        line = f"Aborted: {aborted}; the verdict is on the steps that ran."
        console.print(Text(line, style="bold yellow"), highlight=False, soft_wrap=True)


def verdict_text(verdict: dict[str, Any]) -> str:
    """The table and the verdict as plain text, for logs."""
    buffer = io.StringIO()
    # Wide enough that nothing wraps; the padding some lines get is stripped below.
    console = Console(file=buffer, width=400, color_system=None, force_terminal=False)
    render_steps(verdict, console)
    render_verdict(verdict, console)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()) + "\n"
