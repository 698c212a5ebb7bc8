"""Database processes that wait for locks held by others (a hot row)."""

from __future__ import annotations

from pinchpoint.analyze.causes.cause import Ask, Cause, Finding
from pinchpoint.analyze.context import (
    Context,
    below,
    cpu_of,
    load_text,
    ms_text,
    rate_of,
    resource_of,
)
from pinchpoint.analyze.thresholds import LOCK_WAITS
from pinchpoint.rundir.shapes import StepJson


def db_lock(tier: str, steps: list[StepJson], ctx: Context, grows_from: int = 0) -> Finding | None:
    """The tier, or one below it, is a database whose processes wait for locks; it starts
    where they wait and the tier's time has grown (from `grows_from` users). A slow tier
    below fills the pools of every tier above it, so the whole chain below is asked."""
    for name in below(tier, ctx):
        for key, source in _SOURCES:
            waits = [resource_of(s, name, key) or 0.0 for s in steps]
            if waits[-1] >= LOCK_WAITS and waits[-1] - waits[0] >= LOCK_WAITS / 2:
                return _db_lock_finding(name, steps, waits, grows_from, source)
    return None


# Where a database's lock waits are read: its process titles (PostgreSQL's backends say
# "waiting"), or its own views, sampled from inside (any server with [component.database]).
_SOURCES = (
    ("lock_waits", "sampled from their process titles"),
    ("lock_waits_inside", "sampled from inside: its sessions waiting on a lock"),
)


def _db_lock_finding(
    name: str, steps: list[StepJson], waits: list[float], grows_from: int, source: str
) -> Finding:
    base, top = steps[0], steps[-1]
    onset = next(
        s
        for s, w in zip(steps, waits, strict=True)
        if (w >= LOCK_WAITS and s["users"] >= grows_from) or s is top
    )
    evidence = [
        f"{name}'s processes waiting for a lock: {waits[-1]:.1f} on average at "
        f"{load_text(top)}, {waits[0]:.1f} at {load_text(base)} ({source})",
    ]
    low, high = (s.get("tiers", {}).get(name, {}).get("p50_ms") for s in (base, top))
    if low is not None and high is not None:
        evidence.append(
            f"{name}'s time per request p50 {ms_text(low)} at {load_text(base)}, "
            f"{ms_text(high)} at {load_text(top)}"
        )
    cpu = cpu_of(top, name)
    if cpu is not None:
        evidence.append(
            f"{name}'s processes used {cpu:.2f} cores at {load_text(top)}: "
            "they wait rather than compute"
        )
    evidence.append(
        f"throughput {base['throughput_rps']:.0f} req/s at {load_text(base)}, "
        f"{top['throughput_rps']:.0f} at {load_text(top)}"
    )
    summary = (
        f"Requests wait for locks in {name} from {load_text(onset)}: transactions "
        "queue for rows that other transactions hold (a hot row), while the database "
        f"itself is mostly idle. {DB_LOCK.advice}"
    )
    return Finding(
        name, DB_LOCK, onset["users"], evidence, f"{name} lock waits", summary, rate_of(onset)
    )


def _find_db_lock(ask: Ask) -> Finding | None:
    return db_lock(ask.tier, ask.steps, ask.ctx, ask.onset["users"])


DB_LOCK = Cause(
    name="db_lock",
    resource="db_lock",
    scope="tier",
    doc=__doc__,
    advice=(
        "Hold locks shorter (less work inside the transaction), or spread the writes over "
        "more rows; more workers or CPU will not help."
    ),
    saturates="rows held by other transactions",
    reads=("resources.lock_waits", "resources.lock_waits_inside", "tiers.p50_ms"),
    thresholds=("LOCK_WAITS",),
    needs_cpu=False,
    find=_find_db_lock,
    database="locks",
)
