"""`find_knee`: step the users up until the knee is bracketed, refine it, and stop.

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
ran, computed as the analysis computes a step's (`analyze.steps.client_step`). The engine
runs once per level; each level is a tagged step of the same run, so collection and
analysis read the run folder as they read a step plan's. Steps are numbered by users in
run.json and `requests.parquet`, whatever order they ran in (`order` keeps that), and as
each engine run numbers its requests from 0, a level's request ids (in `requests.parquet`
and, matched by their users, in `tiers.parquet`) are shifted by the requests of the
levels before it (`req_id_offset`).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pinchpoint.analyze.context import users_text
from pinchpoint.analyze.knee import MAX_SLOPE_RATIO
from pinchpoint.analyze.steps import Window, client_step
from pinchpoint.analyze.thresholds import GROWTH_MIN_MS, GROWTH_SHARE, LEVEL_LATENCY_BEND
from pinchpoint.load.engine import LoadResult, run_steps
from pinchpoint.plan.model import Plan
from pinchpoint.rundir import files

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
# Beyond a level's duration and request timeout, what starting and stopping it may take.
LEVEL_MARGIN_S = 10.0
# Distinct reasons kept per class of error, as the engine keeps them per run.
REASONS_PER_CLASS = 3

Tick = Callable[[dict], None]


@dataclass(frozen=True)
class Point:
    """What the client measured at one level, over its steady part."""

    users: int
    throughput_rps: float
    latency_ms: float | None


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


@dataclass
class _Level:
    order: int
    users: int
    phase: str
    dir: Path
    result: LoadResult | None = None
    point: Point | None = None


@dataclass
class KneeRun:
    """A finished search: the engine's results merged as one run, what run.json records."""

    load: LoadResult
    # run.json `steps`, by users
    steps: list[dict]
    # run.json `find_knee`
    record: dict
    # the request id offset of each level, by its users
    offsets: dict[int, int] = field(default_factory=dict)

    @property
    def message(self) -> str:
        return str(self.record.get("summary", ""))


def _level_plan(plan: Plan, users: int) -> Plan:
    load = plan.load.model_copy(
        update={"lower": float(users), "upper": float(users), "step": 1.0, "find_knee": False}
    )
    return plan.model_copy(update={"load": load})


def _measure(level: _Level, warmup_s: float) -> Point:
    assert level.result is not None
    summary = level.result.summary
    if not summary.get("windows"):
        return Point(level.users, 0.0, None)
    start, end = (t / 1e6 for t in summary["windows"][0])
    window = Window(step=0, users=level.users, start=min(start + warmup_s, end), end=end)
    step, _ = client_step(pl.read_parquet(level.result.requests_path), window)
    return Point(level.users, step["throughput_rps"], step["latency_ms"]["p50"])


def _run_level(
    plan: Plan, run_id: str, level: _Level, on_tick: Tick | None
) -> tuple[LoadResult, Point]:
    def tick(snapshot: dict) -> None:
        if on_tick is not None:
            on_tick({**snapshot, "step": level.order})

    level.dir.mkdir(parents=True)
    level.result = run_steps(_level_plan(plan, level.users), run_id, level.dir, on_tick=tick)
    level.point = _measure(level, plan.load.warmup)
    return level.result, level.point


def search_knee(
    plan: Plan,
    run_id: str,
    run_dir: Path,
    on_tick: Tick | None = None,
    max_levels: int = MAX_LEVELS,
) -> KneeRun:
    """Runs the search on the plan's target and writes `requests.parquet` into run_dir."""
    load = plan.load
    assert load.find_knee and load.lower is not None and load.upper is not None
    assert load.duration is not None
    lower, upper = int(load.lower), int(load.upper)
    work = run_dir / files.LEVELS
    levels: list[_Level] = []
    budget = max_levels * (load.duration + load.timeout + LEVEL_MARGIN_S)
    deadline = time.monotonic() + budget
    decision = decide([], lower, upper, max_levels)
    try:
        while (users := decision.next_users) is not None:
            if time.monotonic() > deadline:
                decision = stopped(decision, "time", f"Stopped after {budget:.0f} s.")
                break
            level = _Level(len(levels), users, decision.phase, work / str(len(levels)))
            levels.append(level)
            result, _ = _run_level(plan, run_id, level, on_tick)
            if result.interrupted:
                decision = stopped(decision, "interrupted", "The search was interrupted.")
                break
            points = [lv.point for lv in levels if lv.point is not None]
            decision = decide(points, lower, upper, max_levels)
    except KeyboardInterrupt:
        decision = stopped(decision, "interrupted", "The search was interrupted.")
    # A level cut short before its engine summary came back has no window: left out.
    done = [lv for lv in levels if lv.result is not None and lv.result.summary.get("windows")]
    merged = _merge(done, run_dir, interrupted=decision.reason == "interrupted")
    shutil.rmtree(work, ignore_errors=True)
    record = {
        "lower": lower,
        "upper": upper,
        "max_levels": max_levels,
        "reason": decision.reason,
        "bracket": list(decision.bracket) if decision.bracket else None,
        "summary": decision.message,
        "load_s": round(sum(s["end"] - s["start"] for s in merged.steps), 3),
        "levels": [
            {
                "order": lv.order,
                "users": lv.users,
                "phase": lv.phase,
                "throughput_rps": lv.point.throughput_rps if lv.point else None,
                "latency_p50_ms": lv.point.latency_ms if lv.point else None,
                "req_id_offset": merged.offsets.get(lv.users),
            }
            for lv in levels
        ],
    }
    merged.record = record
    return merged


def _span(level: _Level, table: pa.Table) -> int:
    """Request ids the level used: its engine numbers them from 0."""
    assert level.result is not None
    top = pc.max(table["req_id"]).as_py() if table.num_rows else None
    sent = sum(s.get("requests", 0) for s in level.result.summary.get("steps", []))
    return max((top + 1) if top is not None else 0, sent, table.num_rows)


def _merge(levels: list[_Level], run_dir: Path, interrupted: bool) -> KneeRun:
    """One requests.parquet and one engine summary for the levels that ran, their steps
    numbered by users."""
    by_users = sorted(levels, key=lambda lv: lv.users)
    index = {lv.order: i for i, lv in enumerate(by_users)}
    path = run_dir / files.REQUESTS
    offsets: dict[int, int] = {}
    offset = rows = 0
    writer: pq.ParquetWriter | None = None
    try:
        for lv in levels:
            assert lv.result is not None
            table = pq.read_table(lv.result.requests_path)
            offsets[lv.users] = offset
            span = _span(lv, table)
            step = pa.array([index[lv.order]] * table.num_rows, type=pa.uint32())
            table = table.set_column(table.schema.get_field_index("step"), "step", step)
            ids = pc.add(table["req_id"], pa.scalar(offset, pa.uint64()))
            table = table.set_column(table.schema.get_field_index("req_id"), "req_id", ids)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table, row_group_size=files.REQUESTS_ROW_GROUP)
            offset += span
            rows += table.num_rows
    finally:
        if writer is not None:
            writer.close()
    summaries = [lv.result.summary for lv in by_users if lv.result is not None]
    engine_steps = [{**s["steps"][0], "step": i} for i, s in enumerate(summaries)]
    windows = [s["windows"][0] for s in summaries]
    summary = {
        "steps": engine_steps,
        "windows": windows,
        "records": rows,
        "interrupted": interrupted,
        "records_error": next((s["records_error"] for s in summaries if s["records_error"]), None),
        "error_reasons": _merged_reasons(summaries),
    }
    steps = [
        {
            "step": i,
            "users": lv.users,
            "kind": "users",
            "level": float(lv.users),
            "start": a / 1e6,
            "end": b / 1e6,
            "order": lv.order,
        }
        for i, (lv, (a, b)) in enumerate(zip(by_users, windows, strict=True))
    ]
    load = LoadResult(summary=summary, requests_path=path, rows=rows, interrupted=interrupted)
    return KneeRun(load=load, steps=steps, record={}, offsets=offsets)


def _merged_reasons(summaries: list[dict]) -> dict[str, list[str]]:
    """Each class of error's reasons over the levels: the first few distinct."""
    merged: dict[str, list[str]] = {}
    for summary in summaries:
        for name, reasons in (summary.get("error_reasons") or {}).items():
            kept = merged.setdefault(name, [])
            kept.extend(r for r in reasons if r not in kept)
    return {name: kept[:REASONS_PER_CLASS] for name, kept in merged.items()}
