"""A plan's load split between N generators: each one's engine configuration.

Closed loop: generator i of N sends `users // N + (1 if i < users % N)` of each step's
users (a ramp's start and end split alike); a generator with 0 users in a step still runs
it, idle, so every generator's steps keep the run's clock. Open loop: each phase's rate
(and ramp) divided by N, its arrival count split as users are, `max_in_flight` too.
Every generator tags and records the run's whole level (`tag_levels`), takes its request
ids from `i << 40` on (`req_id_base`), and starts its first step at `start_at_us`.
"""

from __future__ import annotations

from pinchpoint.load.engine_config import EngineConfig, EngineFeed, EngineFlow, EnginePhase
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import Plan

# Request ids of generator i start at i << ID_SHIFT: 2^40 ids each.
ID_SHIFT = 40


def check_ray_plan(plan: Plan) -> None:
    """Refuses what generators on Ray cannot run, before any load is sent."""
    if plan.load.find_knee:
        raise PlanError(
            "generators on Ray run a plan's steps, not a knee search: drop --find-knee or --ray"
        )
    if plan.load.locustfile is not None:
        raise PlanError("generators on Ray run the engine, not a locustfile: drop one of them")


def split(total: int, n: int, i: int) -> int:
    """Generator i's share of `total` among n: as even as can be, the first ones one more."""
    return total // n + (1 if i < total % n else 0)


def run_levels(plan: Plan) -> list[float]:
    """The run's level of each step or phase: its users (their mean over a ramp), or its
    target rate: what every generator tags its requests with."""
    return [lv.level for lv in plan.load.levels()]


def shares(base: EngineConfig, plan: Plan, n: int, start_at_us: int) -> list[EngineConfig]:
    """The configuration of each of the n generators, from the whole run's."""
    levels = run_levels(plan)
    return [_share(base, levels, n, i, start_at_us) for i in range(n)]


def _share(
    base: EngineConfig, levels: list[float], n: int, i: int, start_at_us: int
) -> EngineConfig:
    config = EngineConfig(**base)
    config["steps"] = [
        {
            "users": split(s["users"], n, i),
            "duration_s": s["duration_s"],
            "ramp_from": split(s["ramp_from"], n, i) if s["ramp_from"] is not None else None,
        }
        for s in base["steps"]
    ]
    opened = base["open"]
    if opened is not None:
        config["open"] = {
            "phases": [_phase(p, n, i) for p in opened["phases"]],
            "arrivals": opened["arrivals"],
            "max_in_flight": max(1, -(-opened["max_in_flight"] // n)),
        }
    config["flows"] = [_flow(f, n, i) for f in base["flows"]]
    config["seed"] = (base["seed"] + i) % 2**64
    config["req_id_base"] = i << ID_SHIFT
    config["start_at_us"] = start_at_us
    config["tag_levels"] = list(levels)
    config["hook"] = None  # each generator loads its own (actor.py)
    return config


def _phase(phase: EnginePhase, n: int, i: int) -> EnginePhase:
    ramp_to = phase["ramp_to"]
    return {
        "kind": phase["kind"],
        "duration_s": phase["duration_s"],
        "rate": phase["rate"] / n,
        "ramp_to": ramp_to / n if ramp_to is not None else None,
        "count": split(phase["count"], n, i),
    }


def _flow(flow: EngineFlow, n: int, i: int) -> EngineFlow:
    """A flow whose feed's rows are dealt out between the generators (row k to generator
    k mod n), so two generators' users do not take the same row; a feed of fewer rows
    than generators is left whole."""
    feed = flow["feed"]
    if feed is None or len(feed["rows"]) < n:
        return flow
    dealt: EngineFeed = {**feed, "rows": feed["rows"][i::n]}
    return {**flow, "feed": dealt}


def share_of(config: EngineConfig) -> dict[str, list[int] | list[float]]:
    """A generator's share for run.json: its users per step, or its rate per phase (a
    ramp's mean, a count's mean rate)."""
    opened = config["open"]
    if opened is None:
        return {"users": [s["users"] for s in config["steps"]]}
    return {"rate": [round(_rate(p), 6) for p in opened["phases"]]}


def _rate(phase: EnginePhase) -> float:
    if phase["kind"] == "count":
        return phase["count"] / phase["duration_s"]
    if phase["kind"] == "pause":
        return 0.0
    end = phase["ramp_to"]
    return (phase["rate"] + end) / 2 if end is not None else phase["rate"]
