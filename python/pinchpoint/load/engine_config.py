"""A plan as the Rust engine's run configuration: the one place that knows its shape.

The engine reads these keys into its own types (crates/pinchpoint-py: `PyConfig` and the
structs under it) and checks them again; a key missing or of the wrong type there is a
`TypeError` at `_engine.start`, so the shapes here are typed for mypy to catch it first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, TypedDict

from pinchpoint.plan.load_models import ThinkTime
from pinchpoint.plan.model import Level, Plan, Target


class EngineRequest(TypedDict):
    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes
    weight: int
    timeout_s: float | None


class EngineStep(TypedDict):
    users: int
    duration_s: float
    ramp_from: int | None


class EngineThink(TypedDict):
    kind: Literal["constant", "uniform", "exponential"]
    value_s: float
    min_s: float
    max_s: float


class EnginePhase(TypedDict):
    kind: Literal["rate", "pause", "count"]
    duration_s: float
    rate: float
    ramp_to: float | None
    count: int


class EngineOpen(TypedDict):
    phases: list[EnginePhase]
    arrivals: str
    max_in_flight: int


class EngineProtocol(TypedDict):
    http: str
    tls: bool
    ca_file: str | None
    insecure: bool
    streams_per_connection: int


class EngineConfig(TypedDict):
    run_id: str
    host: str
    port: int
    requests: list[EngineRequest]
    steps: list[EngineStep]
    think: EngineThink
    open: EngineOpen | None
    seed: int
    timeout_s: float
    records_path: str
    threads: int
    tag: bool
    protocol: EngineProtocol


def engine_config(plan: Plan, run_id: str, records_path: Path) -> EngineConfig:
    base = plan.target.base_path
    load = plan.load
    levels = load.levels()
    return {
        "run_id": run_id,
        "host": plan.target.host,
        "port": plan.target.port,
        "requests": [
            {
                "method": r.method,
                "path": base + r.path,
                "headers": list(r.headers.items()),
                "body": r.body.encode(),
                "weight": r.weight,
                "timeout_s": r.timeout,
            }
            for r in plan.request
        ],
        "steps": []
        if load.open
        else [
            {"users": lv.users, "duration_s": lv.duration, "ramp_from": lv.ramp_from}
            for lv in levels
        ],
        "think": _think(load.think_time),
        "open": {
            "phases": [_phase(lv) for lv in levels],
            "arrivals": load.arrivals,
            "max_in_flight": load.max_in_flight,
        }
        if load.open
        else None,
        "seed": load.seed,
        "timeout_s": load.timeout,
        "records_path": str(records_path),
        "threads": load.threads,
        "tag": plan.target.tag,
        "protocol": _protocol(plan.target),
    }


def _think(think: ThinkTime) -> EngineThink:
    if think.uniform is not None:
        low, high = think.uniform
        return {"kind": "uniform", "value_s": 0.0, "min_s": low, "max_s": high}
    if think.exponential is not None:
        return {"kind": "exponential", "value_s": think.exponential, "min_s": 0.0, "max_s": 0.0}
    return {"kind": "constant", "value_s": think.constant or 0.0, "min_s": 0.0, "max_s": 0.0}


def _phase(level: Level) -> EnginePhase:
    phase = level.phase
    assert phase is not None
    if phase.pause is not None:
        kind: Literal["rate", "pause", "count"] = "pause"
    elif phase.arrival_count is not None:
        kind = "count"
    else:
        kind = "rate"
    return {
        "kind": kind,
        "duration_s": level.duration,
        "rate": (phase.arrival_rate or 0.0) if kind == "rate" else 0.0,
        "ramp_to": phase.ramp_to if kind == "rate" else None,
        "count": (phase.arrival_count or 0) if kind == "count" else 0,
    }


def _protocol(target: Target) -> EngineProtocol:
    """How the engine reaches the target."""
    return {
        "http": target.http,
        "tls": target.tls,
        "ca_file": target.ca_file,
        "insecure": target.insecure,
        "streams_per_connection": target.streams_per_connection or 0,
    }
