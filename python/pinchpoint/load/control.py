"""Changes of a run's load while it goes, asked from its live page or with
`pinchpoint control URL --users N` (closed loop) or `--rate R` (open loop).

A change starts a new step at that many users, or a new phase at that constant arrival
rate (uniform or Poisson as planned), from the moment the engine takes it (within 20 ms):
the records after it carry the new step. It holds until the run's planned end or the
next change; the plan's later steps are not run, so the run still ends when planned. The
users stay within the plan's largest step (its declared maximum: `upper`, or the most
users of a stage), the rate above 0 and within the plan's largest phase rate (a ramp's
higher end). A knee search, a locustfile's users and generators on Ray are not changed
while they go.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from pinchpoint.plan.load_models import Phase
from pinchpoint.plan.model import Plan

# Who may ask for a change: the live page's control, or `pinchpoint control`.
SOURCES = ("page", "terminal")


class ControlError(ValueError):
    """A change refused: `status` is the HTTP status that says why."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Steerable(Protocol):
    def set_users(self, id: int, users: int) -> None: ...

    def set_rate(self, id: int, rate: float) -> None: ...


class LiveControl:
    """Takes the changes asked while the run goes and hands them to the engine's run
    (`attach`ed while the load goes); says who asked each and when."""

    def __init__(self, plan: Plan, say: Callable[[str], None] | None = None) -> None:
        self.fixed = _fixed(plan)
        levels = plan.load.levels()
        self.max_users = max((lv.users for lv in levels if lv.kind == "users"), default=0)
        self.kind = "rate" if plan.load.open else "users"
        self.max_rate = max((_peak_rate(lv.phase) for lv in levels if lv.phase), default=0.0)
        self.say = say
        self._lock = threading.Lock()
        self._run: Steerable | None = None
        self._state = "not started"
        self._asked: dict[int, tuple[str, float]] = {}

    def about(self) -> dict[str, Any]:
        """What the live page shows of its control."""
        return {
            "available": self.fixed is None,
            "why": self.fixed,
            "kind": self.kind,
            "max_users": self.max_users,
            "max_rate": self.max_rate,
        }

    def attach(self, run: Steerable) -> None:
        with self._lock:
            self._run = run
            self._state = "running"

    def detach(self) -> None:
        with self._lock:
            self._run = None
            self._state = "ended"

    def ask(self, users: int, by: str) -> dict[str, Any]:
        """Asks the engine for `users` users from now on; ControlError says why not."""
        self._check(by, "users")
        if not 1 <= users <= self.max_users:
            raise ControlError(
                f"users: {users}: from 1 to {self.max_users}, the plan's largest step"
            )
        change, asked_at = self._hand(by, lambda run, id: run.set_users(id, users))
        if self.say is not None:
            self.say(f"Users set to {users} from the {by}")
        return {"change": change, "users": users, "by": by, "asked_at": asked_at}

    def ask_rate(self, rate: float, by: str) -> dict[str, Any]:
        """Asks the engine for `rate` arrivals per second from now on; ControlError says
        why not."""
        self._check(by, "rate")
        if not (math.isfinite(rate) and 0 < rate <= self.max_rate):
            raise ControlError(
                f"rate: {rate:g}: above 0 and at most {self.max_rate:g}/s, "
                "the plan's largest phase rate"
            )
        change, asked_at = self._hand(by, lambda run, id: run.set_rate(id, rate))
        if self.say is not None:
            self.say(f"Rate set to {rate:g}/s from the {by}")
        return {"change": change, "rate": rate, "by": by, "asked_at": asked_at}

    def _check(self, by: str, kind: str) -> None:
        if by not in SOURCES:
            raise ControlError(f"by: {by!r}: one of {', '.join(SOURCES)}")
        if self.fixed is not None:
            raise ControlError(self.fixed, 409)
        if kind != self.kind:
            raise ControlError(f"{kind}: this run's load is changed by its {self.kind}", 409)

    def _hand(self, by: str, apply: Callable[[Steerable, int], None]) -> tuple[int, float]:
        """Hands a change to the engine's run: its number, and when it was asked."""
        with self._lock:
            if self._run is None:
                raise ControlError(f"the load has {self._state}: nothing to change", 409)
            change = len(self._asked) + 1
            try:
                apply(self._run, change)
            except ValueError as e:
                raise ControlError(str(e), 409) from None
            asked_at = time.time()
            self._asked[change] = (by, asked_at)
        return change, asked_at

    def applied(self, changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The engine's changes made (`step`, `users`, `rate`, `at_us`, `id`) with who
        asked each: `step`, `users` (closed loop) or `rate` (open loop), `by` and `at`
        (unix seconds, when its step began)."""
        with self._lock:
            asked = dict(self._asked)
        level = "rate" if self.kind == "rate" else "users"
        return [
            {
                "step": int(c["step"]),
                level: float(c["rate"]) if level == "rate" else int(c["users"]),
                "by": asked.get(int(c["id"]), ("unknown", 0.0))[0],
                "at": int(c["at_us"]) / 1e6,
            }
            for c in changes
        ]


def _fixed(plan: Plan) -> str | None:
    """Why this plan's load cannot be changed while it goes; None when it can."""
    if plan.load.find_knee:
        return "a knee search chooses its own levels: its users cannot be changed"
    if plan.load.locustfile is not None:
        return "a locustfile's users cannot be changed while the run goes"
    if plan.generators.ray is not None:
        return "generators on Ray cannot be changed while the run goes"
    return None


def _peak_rate(phase: Phase) -> float:
    """The highest arrival rate a phase asks for: a ramp's higher end."""
    return max(float(phase.arrival_rate or 0), float(phase.ramp_to or 0), phase.rate())
