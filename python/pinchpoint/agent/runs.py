"""The runs an agent holds: one LocalCollector each, kept in memory, bounded in number."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from pinchpoint.collect.resources.sampler import MAX_INTERVAL_S, MIN_INTERVAL_S
from pinchpoint.collect.sources.local import LocalCollector
from pinchpoint.logformats.tag import RUN_ID
from pinchpoint.plan.model import Component

MAX_RUN_ID_CHARS = 128


class ApiError(Exception):
    """A request the agent refuses, with the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Run:
    run_id: str
    collector: LocalCollector
    started: float
    stopped: float | None = None
    _timer: threading.Timer | None = field(default=None, repr=False)
    _stopping: threading.Lock = field(default_factory=threading.Lock, repr=False)


def check_run_id(run_id: str) -> str:
    """The run id if it is a valid one (as in the tag, at most 128 characters); else 400."""
    if len(run_id) > MAX_RUN_ID_CHARS or not RUN_ID.fullmatch(run_id) or run_id in (".", ".."):
        raise ApiError(400, "invalid run id: use 1-128 letters, digits, '_', '.', '-'")
    return run_id


def check_interval(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ApiError(400, "interval_s must be a number of seconds")
    if not MIN_INTERVAL_S <= value <= MAX_INTERVAL_S:
        raise ApiError(400, f"interval_s must be between {MIN_INTERVAL_S} and {MAX_INTERVAL_S}")
    return float(value)


class Runs:
    """Starts, stops and finds runs. A run not stopped within `max_run_s` stops by itself;
    at most `max_runs` are kept, the oldest finished one dropped to make room."""

    def __init__(self, components: Sequence[Component], max_runs: int, max_run_s: float) -> None:
        self.components = {c.name: c for c in components}
        self.max_runs = max_runs
        self.max_run_s = max_run_s
        self._runs: dict[str, Run] = {}
        self._lock = threading.Lock()

    def start(self, run_id: str, interval_s: float, names: Sequence[str] | None) -> Run:
        check_run_id(run_id)
        chosen = list(self.components) if names is None else list(dict.fromkeys(names))
        unknown = [n for n in chosen if n not in self.components]
        if unknown:
            raise ApiError(404, f"unknown components: {', '.join(sorted(unknown))}")
        with self._lock:
            if run_id in self._runs:
                raise ApiError(409, f"run {run_id} is already started")
            self._make_room()
            collector = LocalCollector([self.components[n] for n in chosen], server_files=False)
            collector.start(run_id, interval_s)
            run = Run(run_id, collector, started=time.time())
            run._timer = threading.Timer(self.max_run_s, self._expire, args=(run,))
            run._timer.daemon = True
            run._timer.start()
            self._runs[run_id] = run
            return run

    def get(self, run_id: str) -> Run:
        check_run_id(run_id)
        with self._lock:
            run = self._runs.get(run_id)
        if run is None:
            raise ApiError(404, f"no run {run_id} on this agent")
        return run

    def stop(self, run_id: str) -> Run:
        run = self.get(run_id)
        self._stop(run)
        return run

    def close(self) -> None:
        """Stops every run (on shutdown)."""
        with self._lock:
            runs = list(self._runs.values())
        for run in runs:
            self._stop(run)

    def _stop(self, run: Run) -> None:
        if run._timer is not None:
            run._timer.cancel()
        with run._stopping:
            run.collector.stop()
            if run.stopped is None:
                run.stopped = time.time()

    def _expire(self, run: Run) -> None:
        run.collector.problems.append(f"stopped after max_run ({self.max_run_s:g} s)")
        self._stop(run)

    def _make_room(self) -> None:
        while len(self._runs) >= self.max_runs:
            finished = [r for r in self._runs.values() if r.stopped is not None]
            if not finished:
                raise ApiError(429, f"{len(self._runs)} runs are in progress; stop one first")
            oldest = min(finished, key=lambda r: r.stopped or 0.0)
            del self._runs[oldest.run_id]
