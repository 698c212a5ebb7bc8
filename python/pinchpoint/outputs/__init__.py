"""What a run sends out while it goes, from the engine's snapshot of each second: a
per-second JSON lines file (seconds.py) and live metrics for Prometheus (openmetrics.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from pinchpoint.outputs.openmetrics import MetricsServer
from pinchpoint.outputs.seconds import SecondsFile

Tick = Callable[[dict], None]


@contextmanager
def seconds_out(path: Path | None, run_id: str) -> Iterator[SecondsFile | None]:
    """The per-second file at `path` while the run goes (None: no file)."""
    if path is None:
        yield None
        return
    seconds = SecondsFile(path, run_id)
    try:
        yield seconds
    finally:
        seconds.close()


@contextmanager
def metrics_out(server: MetricsServer | None, linger_s: float) -> Iterator[MetricsServer | None]:
    """`server` while the run goes; once it has ended well, it keeps answering `linger_s`
    more so that a scraper reads the last values (Ctrl-C ends that wait), then closes (at
    once on an error)."""
    if server is None:
        yield None
        return
    try:
        yield server
        with suppress(KeyboardInterrupt):
            time.sleep(linger_s)
    finally:
        server.close()


def fan_out(*ticks: Tick | None) -> Tick:
    """One tick that calls each of `ticks` (None left out) with the same snapshot: the
    engine's window of latencies is taken once a second, for all of them."""
    wanted = [t for t in ticks if t is not None]

    def tick(snapshot: dict) -> None:
        for each in wanted:
            each(snapshot)

    return tick


__all__ = ["MetricsServer", "SecondsFile", "Tick", "fan_out", "metrics_out", "seconds_out"]
