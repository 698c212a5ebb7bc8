"""The comparison in the terminal."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pinchpoint.compare import fmt
from pinchpoint.compare.result import UNRESOLVED, ComparisonResult


def render_comparison(result: ComparisonResult, console: Console) -> None:
    """Print the percentile ladder, the confidence intervals, the SLA error rates, the
    Mann–Whitney test and the verdict line."""
    a, b = result.a, result.b
    console.print(
        f"A: {a.label} ({a.used:,} of {a.requests:,} requests compared)\n"
        f"B: {b.label} ({b.used:,} of {b.requests:,} requests compared)",
        highlight=False,
    )
    ladder = Table(box=box.SIMPLE_HEAD, title="Latency (ms)", title_style="bold")
    ladder.add_column("percentile", justify="left")
    ladder.add_column("A", justify="right")
    ladder.add_column("B", justify="right")
    ladder.add_column("B / A", justify="right")
    for row in result.ladder:
        style = _ratio_style(row.ratio)
        ladder.add_row(
            row.label + ("" if row.resolved else " *"),
            fmt.ms(row.a_ms),
            fmt.ms(row.b_ms),
            Text(fmt.ratio(row.ratio), style=style),
            style=None if row.resolved else "dim",
        )
    console.print(ladder)
    if not all(row.resolved for row in result.ladder):
        console.print(f"* {UNRESOLVED}", style="dim", highlight=False)

    pct = f"{result.confidence * 100:.0f}%"
    intervals = Table(
        box=box.SIMPLE_HEAD, title=f"{pct} bootstrap intervals (ms)", title_style="bold"
    )
    intervals.add_column("percentile", justify="left")
    intervals.add_column("A", justify="right")
    intervals.add_column("B", justify="right")
    intervals.add_column("overlap", justify="left")
    for i in result.intervals:
        intervals.add_row(
            i.label,
            f"{fmt.ms(i.a_ms)} ({fmt.interval(i.a_low_ms, i.a_high_ms)})",
            f"{fmt.ms(i.b_ms)} ({fmt.interval(i.b_low_ms, i.b_high_ms)})",
            "yes" if i.overlap else "no",
        )
    console.print(intervals)

    if result.sla_ms is not None:
        console.print(
            f"Slower than the SLA of {fmt.ms(result.sla_ms)} ms: "
            f"A {fmt.share(a.sla_error_rate)}, B {fmt.share(b.sla_error_rate)}",
            highlight=False,
        )
    difference = "the distributions differ" if result.distributions_differ else "no difference"
    console.print(
        f"Mann–Whitney U: p {_p(result.mann_whitney_p)} ({difference} at α = {result.alpha:g})",
        highlight=False,
    )
    console.print(Text(result.verdict, style=_verdict_style(result)))
    if result.html is not None:
        console.print(f"Page: {result.html}", highlight=False)


def _p(value: float) -> str:
    text = fmt.p_value(value)
    return text if text.startswith("<") else f"= {text}"


def _ratio_style(ratio: float | None) -> str:
    if ratio is None or ratio == 1:
        return ""
    return "red" if ratio > 1 else "green"


def _verdict_style(result: ComparisonResult) -> str:
    if not result.p99_significant or result.p99_change == 0:
        return "bold yellow"
    return "bold red" if result.p99_change > 0 else "bold green"
