"""Changes of a closed-loop run's users while it goes, asked from its live page or with
`pinchpoint control URL --users N`.

A change starts a new step at that many users from the moment the engine takes it
(within 20 ms): the records after it carry the new step and its users. It holds until the
run's planned end or the next change; the plan's later steps are not run, so the run
still ends when planned. The users stay within the plan's largest step (its declared
maximum: `upper`, or the most users of a stage). An open-loop run, a knee search, a
locustfile's users and generators on Ray are not changed while they go.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

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


class LiveControl:
    """Takes the changes asked while the run goes and hands them to the engine's run
    (`attach`ed while the load goes); says who asked each and when."""

    def __init__(self, plan: Plan, say: Callable[[str], None] | None = None) -> None:
        self.fixed = _fixed(plan)
        levels = plan.load.levels()
        self.max_users = max((lv.users for lv in levels if lv.kind == "users"), default=0)
        self.say = say
        self._lock = threading.Lock()
        self._run: Steerable | None = None
        self._state = "not started"
        self._asked: dict[int, tuple[str, float]] = {}

    def about(self) -> dict[str, Any]:
        """What the live page shows of its control."""
        return {"available": self.fixed is None, "why": self.fixed, "max_users": self.max_users}

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
        if by not in SOURCES:
            raise ControlError(f"by: {by!r}: one of {', '.join(SOURCES)}")
        if self.fixed is not None:
            raise ControlError(self.fixed, 409)
        if not 1 <= users <= self.max_users:
            raise ControlError(
                f"users: {users}: from 1 to {self.max_users}, the plan's largest step"
            )
        with self._lock:
            if self._run is None:
                raise ControlError(f"the load has {self._state}: nothing to change", 409)
            change = len(self._asked) + 1
            try:
                self._run.set_users(change, users)
            except ValueError as e:
                raise ControlError(str(e), 409) from None
            asked_at = time.time()
            self._asked[change] = (by, asked_at)
        if self.say is not None:
            self.say(f"Users set to {users} from the {by}")
        return {"change": change, "users": users, "by": by, "asked_at": asked_at}

    def applied(self, changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The engine's changes made (`step`, `users`, `at_us`, `id`) with who asked each:
        `step`, `users`, `by` and `at` (unix seconds, when its step began)."""
        with self._lock:
            asked = dict(self._asked)
        return [
            {
                "step": int(c["step"]),
                "users": int(c["users"]),
                "by": asked.get(int(c["id"]), ("unknown", 0.0))[0],
                "at": int(c["at_us"]) / 1e6,
            }
            for c in changes
        ]


def _fixed(plan: Plan) -> str | None:
    """Why this plan's load cannot be changed while it goes; None when it can."""
    if plan.load.open:
        return "an open-loop run's rate cannot be changed while it goes"
    if plan.load.find_knee:
        return "a knee search chooses its own levels: its users cannot be changed"
    if plan.load.locustfile is not None:
        return "a locustfile's users cannot be changed while the run goes"
    if plan.generators.ray is not None:
        return "generators on Ray cannot be changed while the run goes"
    return None
