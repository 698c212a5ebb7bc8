"""A pool's size in its server's own settings: the advice says `--threads 8 → 12` for one
gunicorn gthread process of 8 threads, not `workers 8 → 12`, which gunicorn would read as
12 processes of 8 threads each.

The analysis counts a pool in slots (processes × threads); the server sets it as
processes (sync workers) or threads in each process, each under its own name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pinchpoint.rundir.shapes import StepJson

SYNC, THREADS = "sync", "threads"

# Each server's setting for its worker processes and for the threads in each.
_PROCESSES = {
    "gunicorn": "--workers",
    "uwsgi": "--processes",
    "php-fpm": "pm.max_children",
}
_THREADS = {
    "gunicorn": "--threads",
    "uwsgi": "--threads",
    "tomcat": "maxThreads",
}


@dataclass(frozen=True)
class PoolTerms:
    """What the steps say of a group's server: its name, its kind of workers (SYNC,
    THREADS; None when not read) and its serving processes."""

    server: str
    kind: str | None
    processes: int | None

    def knob(self, setting: str) -> str | None:
        """The server's name for `setting` ("workers": the slots, "processes"); None when
        not known for this server and kind."""
        if setting == "processes" or (setting == "workers" and self.kind == SYNC):
            return _PROCESSES.get(self.server)
        if setting == "workers" and self.kind == THREADS and self.processes:
            return _THREADS.get(self.server)
        return None

    def per_process(self, setting: str) -> int:
        """How many slots one step of the knob is: a process's threads count once for
        each process."""
        threads = setting == "workers" and self.kind == THREADS
        return (self.processes or 1) if threads and self.knob(setting) is not None else 1

    def slots(self, setting: str, slots: int) -> int:
        """`slots` rounded up to what the knob can set: a whole number of threads in each
        process."""
        step = self.per_process(setting)
        return step * math.ceil(slots / step)

    def change(self, component: str, setting: str, now: float, to: float) -> str:
        """The change in the server's words: "gunicorn --threads 8 → 12"; the analysis's
        (slots, processes) where the server's own knob is not known."""
        knob = self.knob(setting)
        if knob is None:
            return f"{component} {setting.replace('_', ' ')} {now:g} → {to:g}"
        who = component if component == self.server else f"{component} ({self.server})"
        step = self.per_process(setting)
        text = f"{who} {knob} {now / step:g} → {to / step:g}"
        if step > 1:
            text += f" in each of its {step} processes ({now:g} → {to:g} threads in all)"
        return text


def pool_terms(group: str, step: StepJson, processes: int | None) -> PoolTerms:
    """The group's server as the step's sampler read it; the group's own name when the
    sampler did not name one (runs recorded before it did)."""
    row = step.get("resources", {}).get(group, {})
    kind = row.get("pool_kind")
    return PoolTerms(str(row.get("pool_server") or group), str(kind) if kind else None, processes)
