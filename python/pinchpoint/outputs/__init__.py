"""What a run sends out while it goes, from the engine's snapshot of each second: a
per-second JSON lines file (seconds.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

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


def fan_out(*ticks: Tick | None) -> Tick:
    """One tick that calls each of `ticks` (None left out) with the same snapshot: the
    engine's window of latencies is taken once a second, for all of them."""
    wanted = [t for t in ticks if t is not None]

    def tick(snapshot: dict) -> None:
        for each in wanted:
            each(snapshot)

    return tick


__all__ = ["SecondsFile", "Tick", "fan_out", "seconds_out"]
