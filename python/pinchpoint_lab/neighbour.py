"""Noisy neighbours: processes outside the stack that take CPU from it, or from the load
generator.

    with CpuHog(cores=1.5):          # 1.5 cores of busy loops beside the stack
        ...
    with starved_generator(core=0, hogs=2):  # this process and two hogs share core 0
        ...

Each hog is its own `python -c` process spinning in 10 ms periods: busy for `duty` of
each period, asleep the rest; at a positive `nice`, a background job that gives a core up
to any process at normal priority that wants it. It stops by itself after max_seconds whatever happens
(and when pinchpoint dies, by the parent-death signal); the context manager stops it
on exit.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pinchpoint.demo.procs import Child
from pinchpoint.lifecycle import Started

PERIOD_S = 0.01
_STOP_TIMEOUT_S = 5.0
_SPIN = """
import os, sys, time
duty, max_seconds, cpus = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
os.nice(int(sys.argv[4]))
if cpus:
    os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
period = 0.01
deadline = time.monotonic() + max_seconds
while (now := time.monotonic()) < deadline:
    busy_until = now + period * duty
    while time.monotonic() < busy_until:
        pass
    if duty < 1:
        time.sleep(max(0.0, busy_until + period * (1 - duty) - time.monotonic()))
"""


class CpuHog(Started):
    """`cores` worth of CPU burnt by separate processes: one spinning process a whole core
    and one duty-cycled for the fraction (1.5: one at 100 %, one at 50 %), each allowed only
    `cpus` when given, at the `nice` value given. Stops on exit, and by itself after
    max_seconds."""

    def __init__(
        self,
        cores: float = 1.0,
        max_seconds: float = 600,
        cpus: set[int] | None = None,
        nice: int = 0,
    ) -> None:
        if not 0 < cores <= 64:
            raise ValueError(f"cores must be more than 0 and at most 64, got {cores}")
        if max_seconds <= 0:
            raise ValueError(f"max_seconds must be positive, got {max_seconds}")
        self.cores = cores
        self.max_seconds = max_seconds
        self.cpus = cpus
        if not 0 <= nice <= 19:
            raise ValueError(f"nice must be from 0 to 19, got {nice}")
        self.nice = nice
        whole = math.floor(cores)
        self.duties = [1.0] * whole + ([cores - whole] if cores > whole else [])
        self._children: list[Child] = []

    @property
    def pids(self) -> list[int]:
        """The hogs' process ids (empty when stopped)."""
        return [child.pid for child in self._children]

    def start(self) -> None:
        if self._children:
            raise RuntimeError("the CPU hog is already started")
        cpus = ",".join(str(c) for c in sorted(self.cpus)) if self.cpus else ""
        try:
            for duty in self.duties:
                argv = [sys.executable, "-c", _SPIN, str(duty), str(self.max_seconds), cpus]
                argv.append(str(self.nice))
                self._children.append(Child("cpu-hog", argv, Path(os.devnull), dict(os.environ)))
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stops every hog (SIGTERM, SIGKILL after a few seconds); idempotent."""
        children, self._children = self._children, []
        _stop_all(children)


def _stop_all(children: list[Child]) -> None:
    if not children:
        return
    try:
        children[0].stop(_STOP_TIMEOUT_S)
    finally:
        _stop_all(children[1:])


@contextmanager
def starved_generator(
    core: int = 0, hogs: int = 2, max_seconds: float = 600
) -> Iterator[CpuHog | None]:
    """Pins this process (every thread of it, and so the load engine it starts) to one core,
    and starts `hogs` spinning processes pinned to the same core, so the generator gets
    about 1/(hogs+1) of it; yields the hogs (None for none). Restores each thread's affinity and stops the hogs on exit."""
    if core not in os.sched_getaffinity(0):
        raise ValueError(f"core {core} is not one this process may run on")
    if hogs < 0:
        raise ValueError(f"hogs must be at least 0, got {hogs}")
    before = {tid: os.sched_getaffinity(tid) for tid in _threads()}
    process_mask = os.sched_getaffinity(0)
    try:
        for tid in before:
            _set_affinity(tid, {core})
        hog = CpuHog(hogs, max_seconds, cpus={core}) if hogs else None
        with hog or contextlib.nullcontext():
            yield hog
    finally:
        for tid in _threads():
            _set_affinity(tid, before.get(tid, process_mask))


def _threads() -> list[int]:
    """The ids of this process's threads (sched_setaffinity sets one thread at a time)."""
    return [int(name) for name in os.listdir("/proc/self/task")]


def _set_affinity(tid: int, cpus: set[int]) -> None:
    # A thread may end between listing and setting.
    with contextlib.suppress(ProcessLookupError):
        os.sched_setaffinity(tid, cpus)
