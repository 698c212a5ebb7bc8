"""Each second's snapshot split by the step its requests were sent in.

The engine's tick falls where it falls: a second that was 97% the old step and 3% the new
one used to count wholly for the step current at the tick. The engine counts each step
apart (its snapshot's `by_step`: every step with requests ended since the previous
snapshot, by the step each request was sent in, the step its record holds); this turns
one snapshot into one part per such step, in step order. A part has the snapshot's shape,
so every watcher of the ticks (the `--out` file, `--metrics`, the live page, an abort)
reads it as before: its counters run on so that part minus previous part is that step's
share of the second, its window is that step's latencies, its step, users and level are
that step's, `seconds` is the share of the second that step was running and `taken_at`
the unix time of the snapshot, the same for all its parts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pinchpoint.plan.load_models import Level

# What only the snapshot as a whole says; carried by its last part.
_WHOLE = ("endpoints", "in_flight", "send_lag_max_us")
_WINDOW = ("window_requests", "window_p50_us", "window_p99_us", "window_hdr_v2")


@dataclass
class StepParts:
    """Splits the snapshots of one run, in order; `levels` are the plan's steps."""

    levels: list[Level]
    # Each step's counts so far, as the engine last gave them.
    counted: dict[int, dict[str, Any]] = field(default_factory=dict)
    # When each step's first request left, unix seconds.
    began: dict[int, float] = field(default_factory=dict)
    # Users and level seen while each step was current.
    seen: dict[int, tuple[int, float]] = field(default_factory=dict)
    totals: dict[str, Any] = field(
        default_factory=lambda: {
            "requests": 0,
            "errors": 0,
            "errors_by_class": {},
            "by_kind": {},
            "late": 0,
        }
    )
    last_at: float | None = None

    def split(self, snapshot: dict[str, Any], now: float | None = None) -> list[dict[str, Any]]:
        """The parts of `snapshot`, taken at unix time `now`; the snapshot itself when
        the engine did not count its steps apart (a merged or a Locust snapshot)."""
        now = time.time() if now is None else now
        by_step = snapshot.get("by_step")
        if by_step is None:
            return [snapshot]
        current = int(snapshot.get("step", 0))
        self.seen[current] = (int(snapshot.get("users", 0)), float(snapshot.get("level", 0.0)))
        for one in by_step:
            step = int(one["step"])
            if one.get("first_start_us") is not None and step not in self.began:
                self.began[step] = int(one["first_start_us"]) / 1e6
        since = self.last_at if self.last_at is not None else min(self.began.values(), default=now)
        entries = list(by_step) or [{"step": current}]
        parts = [self._part(snapshot, one, since, now) for one in entries]
        for key in _WHOLE:
            if key in snapshot:
                parts[-1][key] = snapshot[key]
        parts[-1]["late"] = self.totals["late"] = int(snapshot.get("late", 0))
        self.last_at = now
        return parts

    def _part(
        self, snapshot: dict[str, Any], one: dict[str, Any], since: float, now: float
    ) -> dict[str, Any]:
        step = int(one["step"])
        before = self.counted.get(
            step, {"requests": 0, "errors": 0, "errors_by_class": {}, "by_kind": {}}
        )
        if "requests" in one:
            self.counted[step] = one
            totals = self.totals
            totals["requests"] += int(one["requests"]) - int(before["requests"])
            totals["errors"] += int(one["errors"]) - int(before["errors"])
            classes = dict(totals["errors_by_class"])
            for name, n in one.get("errors_by_class", {}).items():
                classes[name] = (
                    classes.get(name, 0) + int(n) - int(before["errors_by_class"].get(name, 0))
                )
            totals["errors_by_class"] = classes
            totals["by_kind"] = _kinds_added(
                totals["by_kind"], one.get("by_kind", {}), before.get("by_kind", {})
            )
        part = {k: v for k, v in snapshot.items() if k not in (*_WHOLE, *_WINDOW, "by_step")}
        part.update(
            requests=self.totals["requests"],
            errors=self.totals["errors"],
            errors_by_class=dict(self.totals["errors_by_class"]),
            by_kind=self.totals["by_kind"],
            late=self.totals["late"],
            step=step,
            seconds=self._seconds(step, since, now),
            taken_at=now,
        )
        part.update({k: one[k] for k in _WINDOW if k in one})
        part.setdefault("window_requests", 0)
        users, level = self._load(step, snapshot, one)
        part.update(users=users, level=level)
        if step < len(self.levels):
            part["kind"] = self.levels[step].kind
        return part

    def _load(self, step: int, snapshot: dict[str, Any], one: dict[str, Any]) -> tuple[int, float]:
        """The users and level of `step`: the snapshot's when it is current, else as
        they were seen while it was, else its requests' users and the plan's level."""
        if step == int(snapshot.get("step", 0)):
            return int(snapshot.get("users", 0)), float(snapshot.get("level", 0.0))
        if step in self.seen:
            return self.seen[step]
        planned = self.levels[step].level if step < len(self.levels) else 0.0
        return int(one.get("users", 0)), float(planned)

    def _seconds(self, step: int, since: float, now: float) -> float:
        """How long within (since, now] `step` ran: from its first request to the next
        step's first request, as far as they are known."""
        start = max(since, self.began.get(step, since))
        later = [t for s, t in self.began.items() if s > step]
        end = min([now, *later])
        return round(max(0.0, end - start), 6)


def _kinds_added(
    totals: dict[str, dict[str, int]], now: dict[str, Any], before: dict[str, Any]
) -> dict[str, dict[str, int]]:
    """`totals` (records and errors by kind) with a step's counts `now` less `before`."""
    out = {kind: dict(counts) for kind, counts in totals.items()}
    for kind, counts in now.items():
        was = before.get(kind, {})
        mine = out.setdefault(kind, {"requests": 0, "errors": 0})
        for key in ("requests", "errors"):
            mine[key] += int(counts[key]) - int(was.get(key, 0))
    return out
