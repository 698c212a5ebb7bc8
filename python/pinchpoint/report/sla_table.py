"""The SLA results as a table in the terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinchpoint.analyze.sla import SlaResult, broken, users_text, worst_step

if TYPE_CHECKING:
    from rich.console import Console


def render_sla(results: list[SlaResult], console: Console) -> None:
    """The results as a table: objective, value over the run, worst step, met or broken."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    if not results:
        return
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", title="SLA", title_style="bold")
    table.add_column("objective", no_wrap=True)
    table.add_column("whole run", justify="right", no_wrap=True)
    table.add_column("worst step", justify="right", no_wrap=True)
    table.add_column("", no_wrap=True)
    for r in results:
        worst = worst_step(r)
        table.add_row(
            r.objective,
            r.describe(r.value),
            f"{r.describe(worst.value)} at {users_text(worst.users)}" if worst else "–",
            Text("met", style="bold green") if r.passed else Text("BROKEN", style="bold red"),
        )
    console.print(table)
    for r in results:
        if not r.passed:
            console.print(Text(r.message(), style="red"), highlight=False)
    if broken(results):
        console.print(Text("SLA broken", style="bold red"), highlight=False)
    else:
        console.print(Text("SLA met", style="bold green"), highlight=False)
