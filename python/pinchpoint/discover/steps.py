"""The users `init`'s plan steps through: from 1 to about twice the requests the stack's
pools serve at once, in steps no wider than a third of its smallest pool or limit, so
that several steps fall below the load where that pool fills; and each step short enough
that the whole plan lasts under two minutes."""

from __future__ import annotations

from dataclasses import dataclass

from pinchpoint.discover.tier import Tier

# Users stepped to twice the stack's pools (enough to see them fill), and at least this many.
LEAST_UPPER = 8
MOST_UPPER = 256
# Steps when no pool is small beside the upper bound, and the most when one is.
STEPS = 6
MOST_STEPS = 12
# The plan's load lasts at most this long; each step at least the shorter of these.
BUDGET_S = 110
LONGEST_STEP_S = 10
SHORTEST_STEP_S = 5


@dataclass(frozen=True)
class Steps:
    """A step plan: users from `lower` to `upper` by `step`, each step `duration_s` long."""

    lower: int
    upper: int
    step: int
    duration_s: int
    # The smallest pool or limit the steps were made fine for; None when none is known.
    finest: int | None = None

    @property
    def count(self) -> int:
        return (self.upper - self.lower) // self.step + 1

    def users(self) -> list[int]:
        return list(range(self.lower, self.upper + 1, self.step))


def steps_for(tiers: list[Tier]) -> Steps:
    """The steps for a stack of these tiers."""
    slots = sum(t.slots or 0 for t in tiers)
    upper = min(MOST_UPPER, max(LEAST_UPPER, 2 * slots))
    step = max(1, -(-(upper - 1) // (STEPS - 1)))
    pools = [n for t in tiers for n in (t.slots, t.limit) if n]
    finest = min(pools, default=None)
    if finest is not None:
        step = min(step, max(1, finest // 3))
    count = min(MOST_STEPS, max(STEPS, -(-(upper - 1) // step) + 1))
    duration = max(SHORTEST_STEP_S, min(LONGEST_STEP_S, BUDGET_S // count))
    return Steps(1, 1 + step * (count - 1), step, duration, finest)
