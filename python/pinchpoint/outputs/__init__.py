"""What a run sends out while it goes, from the engine's snapshot of each second: a
per-second JSON lines file (seconds.py), live metrics for Prometheus (openmetrics.py) and
a live page that becomes the report (live_page.py, imported from there when asked for:
its verdict so far brings the analysis's knee, which `run` imports only after the load
otherwise)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Protocol

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


class Server(Protocol):
    def close(self) -> None: ...


@contextmanager
def serving(
    *servers: tuple[Server | None, float], unless: Callable[[], bool] | None = None
) -> Iterator[None]:
    """Each (server, linger_s) while the run goes; once it has ended well, each keeps
    answering its `linger_s` more, side by side, so that a scraper reads the last values
    and a page its report (Ctrl-C ends the wait), then closes (at once on an error).
    No wait when `unless()` holds as it would begin: a Ctrl-C already caught while the
    run ended (counted then, not raised) asked to be done."""
    wanted = sorted(((s, linger) for s, linger in servers if s is not None), key=lambda p: p[1])
    try:
        yield
        if unless is not None and unless():
            return
        started = time.monotonic()
        with suppress(KeyboardInterrupt):
            while wanted:
                server, linger_s = wanted[0]
                time.sleep(max(0.0, started + linger_s - time.monotonic()))
                wanted.pop(0)
                server.close()
    finally:
        for server, _ in wanted:
            server.close()


def fan_out(*ticks: Tick | None) -> Tick:
    """One tick that calls each of `ticks` (None left out) with the same snapshot: the
    engine's window of latencies is taken once a second, for all of them."""
    wanted = [t for t in ticks if t is not None]

    def tick(snapshot: dict) -> None:
        for each in wanted:
            each(snapshot)

    return tick


__all__ = ["MetricsServer", "SecondsFile", "Tick", "fan_out", "seconds_out", "serving"]
