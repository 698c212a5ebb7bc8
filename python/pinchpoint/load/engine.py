"""Runs a plan's load (closed-loop steps or open-loop phases) on the Rust engine, with
the GIL released while it waits.

Ctrl-C (or SIGTERM turned into KeyboardInterrupt by the caller) stops the run after
the requests in flight; what was measured is kept and converted to Parquet.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pinchpoint import _engine
from pinchpoint.plan import Level, Plan

TICK_S = 1.0


@dataclass
class LoadResult:
    summary: dict
    requests_path: Path
    rows: int
    interrupted: bool


def _engine_phase(level: Level) -> dict:
    phase = level.phase
    assert phase is not None
    shape = {"duration_s": level.duration, "rate": 0.0, "ramp_to": None, "count": 0}
    if phase.pause is not None:
        return {**shape, "kind": "pause"}
    if phase.arrival_count is not None:
        return {**shape, "kind": "count", "count": phase.arrival_count}
    return {
        **shape,
        "kind": "rate",
        "rate": phase.arrival_rate or 0.0,
        "ramp_to": phase.ramp_to,
    }


def engine_config(plan: Plan, run_id: str, records_path: Path) -> dict:
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
        "think": load.think_time.engine(),
        "open": {
            "phases": [_engine_phase(lv) for lv in levels],
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
        "protocol": plan.target.engine_protocol(),
    }


def step_windows(plan: Plan, summary: dict) -> list[dict]:
    """Each step or phase that ran, for run.json: its window (unix seconds), its load
    level (`kind` users or rate, `level` the users or the target requests per second,
    their mean over a ramp), its name if it has one, and for open loop the requests
    the schedule meant to send (`intended`), those that waited for a free connection
    (`late`) and those never sent (`unsent`)."""
    levels = plan.load.levels()
    out = []
    for i, (a, b) in enumerate(summary["windows"]):
        engine_step = summary["steps"][i]
        level = levels[i]
        entry = {
            "step": i,
            "users": engine_step["users"],
            "kind": level.kind,
            "level": level.level,
            "start": a / 1e6,
            "end": b / 1e6,
        }
        if level.name:
            entry["name"] = level.name
        if level.kind == "rate":
            entry.update({k: engine_step.get(k, 0) for k in ("intended", "late", "unsent")})
        out.append(entry)
    return out


def run_steps(
    plan: Plan,
    run_id: str,
    run_dir: Path,
    on_tick: Callable[[dict], None] | None = None,
) -> LoadResult:
    """Runs every step of the plan and writes `requests.parquet` into run_dir."""
    stream = run_dir / "requests.arrows"
    run = _engine.start(engine_config(plan, run_id, stream))
    interrupted = False
    # The end can take up to the request timeout after a stop; allow that and a margin.
    give_up_after = max([plan.load.timeout, *(r.timeout or 0.0 for r in plan.request)]) + 5.0
    stop_asked_at: float | None = None
    summary = None
    while summary is None:
        try:
            summary = run.wait(TICK_S)
            if summary is None and on_tick is not None:
                on_tick(run.snapshot())
        except KeyboardInterrupt:
            interrupted = True
            run.stop()
            stop_asked_at = stop_asked_at or time.monotonic()
        if summary is None and stop_asked_at and time.monotonic() - stop_asked_at > give_up_after:
            raise RuntimeError("the load engine did not stop in time")
    parquet = run_dir / "requests.parquet"
    rows = _engine.records_to_parquet(str(stream), str(parquet))
    stream.unlink()
    summary["interrupted"] = summary["interrupted"] or interrupted
    return LoadResult(
        summary=summary, requests_path=parquet, rows=rows, interrupted=summary["interrupted"]
    )


def recover_records(run_dir: Path) -> int | None:
    """Converts the records stream a killed run left behind; None if there is none."""
    stream = run_dir / "requests.arrows"
    if not stream.exists():
        return None
    rows = _engine.records_to_parquet(str(stream), str(run_dir / "requests.parquet"))
    stream.unlink()
    return rows
