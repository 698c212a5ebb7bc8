"""The `[profile]` table of a plan: sample the hot functions of the stack's Python tiers
with py-spy during one step of the load (`pinchpoint run --profile` adds it).

```toml
[profile]
component = "app"   # the tier to sample; default every local component running Python
step = 3            # the step (0-based, as in run.json); default the heaviest one
duration = 10       # seconds of sampling at most
rate = 20           # samples per second and process
```

Off unless the table is there. The step defaults to the plan's heaviest (the most users
or the highest rate; the later one of equal steps): a tier that limits the stack by its
CPU uses most of it there, and the plan says which step that is before the load starts,
so sampling can start as that step does and stop before it ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import Field

from pinchpoint.plan.load_models import Level
from pinchpoint.plan.toml import Duration, FieldError, Strict

MAX_DURATION_S = 120.0
MAX_RATE_HZ = 200


class _Located(Protocol):
    """What the check reads of a component."""

    @property
    def name(self) -> str: ...
    @property
    def host(self) -> str | None: ...
    @property
    def process(self) -> object | None: ...


class Profile(Strict):
    component: str | None = None
    step: int | None = Field(default=None, ge=0)
    duration: Duration = Field(default=10.0, ge=1.0, le=MAX_DURATION_S)
    rate: int = Field(default=20, ge=1, le=MAX_RATE_HZ)

    def check(self, components: Sequence[_Located], levels: Sequence[Level]) -> None:
        """Raises FieldError when the component is not one this host can sample (listed,
        local, with a process selector) or the step is not one of the plan's."""
        if self.step is not None and self.step >= len(levels):
            raise FieldError(
                ("profile", "step"), f"the plan has {len(levels)} steps (0 to {len(levels) - 1})"
            )
        if self.component is None:
            return
        found = next((c for c in components if c.name == self.component), None)
        if found is None:
            raise FieldError(("profile", "component"), "no [[component]] has this name")
        if found.host is not None:
            raise FieldError(
                ("profile", "component"), "runs on an agent's host: only local tiers are sampled"
            )
        if found.process is None:
            raise FieldError(
                ("profile", "component"), "has no [component.process] to find its processes by"
            )


def profiled_step(profile: Profile, levels: Sequence[Level]) -> Level | None:
    """The step to sample: the profile's, or the heaviest (the later of equal ones)."""
    if not levels:
        return None
    if profile.step is not None:
        return levels[profile.step] if profile.step < len(levels) else None
    return max(reversed(levels), key=lambda level: level.level)
