"""The live terminal view of a run: one row per second of what the engine measured.

Each second the engine's snapshot gives its counters and the latencies since the
previous snapshot; the view turns them into throughput, errors and p50/p99 of that
second. On a terminal the last rows redraw in place (rich Live) and vanish when the run
ends; elsewhere (CI, pipes) or with `quiet` nothing is drawn.

    with LiveView(console, quiet) as tick:
        run_steps(plan, run_id, run_dir, on_tick=tick)

Given no console, the view takes stderr's at its first snapshot: rich is then imported a
second into the run, not before its first request.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING

from pinchpoint.lifecycle import Closing

if TYPE_CHECKING:
    from rich.console import Console, Group
    from rich.live import Live

ROWS = 10


class LiveView(Closing):
    """Call it with each snapshot; use it as a context manager to end the drawing."""

    def __init__(self, console: Console | None, quiet: bool = False, rows: int = ROWS) -> None:
        self.console = console
        self.quiet = quiet
        self.rows: deque[dict] = deque(maxlen=rows)
        self._last: dict | None = None
        self._started = time.monotonic()
        self._live: Live | None = None

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def __call__(self, snapshot: dict) -> None:
        self.rows.append(second(snapshot, self._last, time.monotonic() - self._started))
        self._last = snapshot
        if not self.enabled:
            return
        if self._live is None:
            from rich.live import Live

            self._live = Live(console=self._console(), transient=True, auto_refresh=False)
            self._live.start()
        self._live.update(self.render(), refresh=True)

    @property
    def enabled(self) -> bool:
        return not self.quiet and self._console().is_terminal

    def _console(self) -> Console:
        if self.console is None:
            from pinchpoint.terminal import err_console

            self.console = err_console()
        return self.console

    def render(self) -> Group:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        table = Table(box=None, pad_edge=False)
        for name in ("time", "step", "load", "req/s", "errors", "p50 ms", "p99 ms", "late"):
            table.add_column(name, justify="right")
        for row in self.rows:
            table.add_row(
                f"{row['elapsed_s']:.0f}s",
                str(row["step"]),
                row["load"],
                f"{row['requests']:,}",
                str(row["errors"]),
                _ms(row.get("p50_us")),
                _ms(row.get("p99_us")),
                "" if row.get("late") is None else str(row["late"]),
            )
        last = self.rows[-1] if self.rows else None
        head = Text(
            f"{last['total']:,} requests, {last['total_errors']:,} errors so far" if last else ""
        )
        return Group(table, head)


def second(snapshot: dict, previous: dict | None, elapsed_s: float) -> dict:
    """One row of the view: what changed between two snapshots, and the window's latencies."""
    before = previous or {"requests": 0, "errors": 0, "late": 0}
    rate = snapshot.get("kind") == "rate"
    row = {
        "elapsed_s": elapsed_s,
        "step": snapshot["step"],
        "load": f"{snapshot['level']:g}/s" if rate else f"{snapshot['users']} users",
        "requests": snapshot["requests"] - before["requests"],
        "errors": snapshot["errors"] - before["errors"],
        "total": snapshot["requests"],
        "total_errors": snapshot["errors"],
        "p50_us": snapshot.get("window_p50_us"),
        "p99_us": snapshot.get("window_p99_us"),
    }
    if rate:
        row["late"] = snapshot.get("late", 0) - before.get("late", 0)
    return row


def _ms(us: int | None) -> str:
    return "-" if us is None else f"{us / 1000:.2f}"
