"""The knee search's decisions: step the users up until the knee is bracketed, refine
it, and stop.

Instead of every step of `lower` → `upper`, the search runs `lower`, then doubles the
users (never past `upper`) until a level is **saturated**. A level is saturated when

- its p50 latency grew from the first level's by more than the verdict counts as growth
  (`analyze.verdict`: 25%, at least 1 ms), or its throughput per user fell below 1/1.25 of
  the first level's (what 25% more latency means in a closed loop), and
- from the level below it, throughput stopped scaling: it gained less per added user than
  half the throughput per user of that level, or latency grew by at least half as much
  as the users did. A level merely slowed down by something else on the machine still
  gains throughput, and is not taken for the knee.

One more doubling must be saturated too (a confirming level, well past the knee, as a
step plan's last steps are). Bisection between the heaviest level that was not saturated
and the lightest that was then narrows that step to one user, or to an eighth of its lower
end, and the search stops. The knee lies between the heaviest level at or below the
throughput knee (peak throughput over the first level's throughput per user: where the
line through the origin meets the plateau) and the first saturated level, from which a
full step plan's verdict sees latency grow. At most `MAX_LEVELS` levels run, each for the
plan's `duration`.

The decisions (`decide`) are pure: they read the client-side numbers of the levels that
ran, computed as the analysis computes a step's (`analyze.steps.client_step`);
`pipeline/knee_levels.py` runs the levels and merges them into one run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pinchpoint.analyze.context import users_text
from pinchpoint.analyze.knee import MAX_SLOPE_RATIO
from pinchpoint.analyze.thresholds import GROWTH_MIN_MS, GROWTH_SHARE, LEVEL_LATENCY_BEND


@dataclass(frozen=True)
class Point:
    """What the client measured at one level, over its steady part."""

    users: int
    throughput_rps: float
    latency_ms: float | None


# At most this many levels run, refinement included.
MAX_LEVELS = 12
# Saturated: throughput per user below this share of the first level's...
MIN_PER_USER = 1 / (1 + GROWTH_SHARE)
# ...and from the level below, throughput gained per added user below this share of that
# level's throughput per user (past the knee, as analyze.knee has it), or latency bent by
# LEVEL_LATENCY_BEND.
MIN_GAIN = MAX_SLOPE_RATIO
# The bracket's low end is the heaviest level at or below the throughput knee, give or
# take this share: what throughput varies by from one run of a level to the next.
KNEE_SLACK = 0.02
# Refinement stops when the step between the last unsaturated level and the first
# saturated one is at most this share of the former (or 1 user).
RESOLUTION = 0.125


@dataclass(frozen=True)
class Decision:
    """The next level to run (`next_users`), or None when the search is over and why
    (`reason`: bracketed, no_knee, max_levels, no_responses, interrupted or time)."""

    next_users: int | None
    phase: str  # what the next level is for: "climb", "confirm", "refine"; "done" when over
    bracket: tuple[int, int] | None = None
    reason: str | None = None
    message: str = ""


def grew(point: Point, base: Point) -> bool:
    """Whether latency grew from the first (lightest) level's as the verdict counts growth,
    or throughput per user fell as much."""
    if base.throughput_rps <= 0 or point.users <= base.users:
        return False
    per_user = base.throughput_rps / base.users
    if point.throughput_rps < MIN_PER_USER * per_user * point.users:
        return True
    if base.latency_ms is None or point.latency_ms is None:
        return False
    threshold = max(GROWTH_MIN_MS, GROWTH_SHARE * base.latency_ms)
    return point.latency_ms - base.latency_ms > threshold


def stopped_scaling(point: Point, below: Point) -> bool:
    """Whether going from the level `below` to `point` no longer scaled: throughput gained
    per added user less than MIN_GAIN of the throughput per user below, or latency bent."""
    if below.throughput_rps <= 0 or point.users <= below.users:
        return True
    gain = (point.throughput_rps - below.throughput_rps) / (point.users - below.users)
    if gain < MIN_GAIN * below.throughput_rps / below.users:
        return True
    if not below.latency_ms or point.latency_ms is None:
        return False
    bend = (point.latency_ms / below.latency_ms - 1) / (point.users / below.users - 1)
    return bend >= LEVEL_LATENCY_BEND


def saturated(point: Point, below: Point, base: Point) -> bool:
    """Whether a level is past the knee: latency grew from the first level's and, from
    the level below it, throughput stopped scaling."""
    return grew(point, base) and stopped_scaling(point, below)


def throughput_knee(points: Sequence[Point]) -> float | None:
    """Users at which the first level's throughput per user would reach the peak
    throughput measured: where a line through the origin meets the plateau."""
    base = min(points, key=lambda p: p.users)
    if base.throughput_rps <= 0:
        return None
    return max(p.throughput_rps for p in points) * base.users / base.throughput_rps


def _levels_text(points: Sequence[Point]) -> str:
    return ", ".join(str(p.users) for p in points)


def _done(reason: str, message: str, bracket: tuple[int, int] | None = None) -> Decision:
    return Decision(None, "done", bracket=bracket, reason=reason, message=message)


def decide(
    points: Sequence[Point],
    lower: int,
    upper: int,
    max_levels: int = MAX_LEVELS,
    resolution: float = RESOLUTION,
) -> Decision:
    """The next level of the search from the levels measured so far (in the order they
    ran), or the end of the search.

    The first saturated level counts once a heavier one confirms it (or it is `upper`):
    the search doubles once more past it, so a level saturated by a passing disturbance
    does not end the climb, and the analysis has a step well past the knee."""
    if not points:
        return Decision(lower, "climb")
    ran = f"{len(points)} levels: {_levels_text(points)} users"
    ordered = sorted(points, key=lambda p: p.users)
    base, top = ordered[0], ordered[-1]
    if base.throughput_rps <= 0:
        return _done("no_responses", f"No successful response at {users_text(base.users)}.")
    # The lightest level from which every heavier one is saturated too.
    first = None
    for i in range(len(ordered) - 1, 0, -1):
        if not saturated(ordered[i], ordered[i - 1], base):
            break
        first = ordered[i]
    full = len(points) >= max_levels
    if first is None:
        if top.users >= upper:
            return _done("no_knee", _no_knee(points, upper, ran))
        if full:
            return _done("max_levels", f"Stopped after {ran}; {top.users} were not saturated.")
        return Decision(min(2 * top.users, upper), "climb")
    if first is top and top.users < upper and not full:
        return Decision(min(2 * top.users, upper), "confirm")
    below = [p for p in ordered if p.users < first.users]
    last = below[-1]
    knee = throughput_knee(points) or float(last.users)
    low = max((p.users for p in below if p.users <= knee * (1 + KNEE_SLACK)), default=base.users)
    bracket = (low, first.users)
    narrow = first.users - last.users <= max(1.0, resolution * last.users)
    if not narrow and not full:
        return Decision((last.users + first.users) // 2, "refine", bracket=bracket)
    note = (
        f" The knee may be at or below {users_text(base.users)}: lower `lower` to see it."
        if low == base.users and base.users > 1
        else ""
    )
    peak = max(p.throughput_rps for p in points)
    message = (
        f"Knee between {bracket[0]} and {bracket[1]} users: throughput levels off at "
        f"{peak:.0f} req/s (≈{knee:.1f} users at the throughput per user of "
        f"{users_text(base.users)}); {first.users} users are saturated, {last.users} are not."
        f"{note} {'Found in' if narrow else 'Stopped after'} {ran}."
    )
    return _done("bracketed" if narrow else "max_levels", message, bracket)


def _no_knee(points: Sequence[Point], upper: int, ran: str) -> str:
    top = max(p.users for p in points)
    knee = throughput_knee(points) or top
    hint = (
        f" Throughput levels off near {knee:.0f} users, but latency had not grown "
        f"{GROWTH_SHARE:.0%} by {top}: raise `upper` to see the knee."
        if knee < 0.95 * top
        else ""
    )
    return f"No knee up to {upper} users: no level was saturated ({ran}).{hint}"


def stopped(decision: Decision, reason: str, message: str) -> Decision:
    """The search ended early (interrupted, out of time), with what it had bracketed."""
    return _done(reason, message, decision.bracket)
