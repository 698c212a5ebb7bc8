"""Runs a step plan on the Rust engine, with the GIL released while it waits.

Ctrl-C (or SIGTERM turned into KeyboardInterrupt by the caller) stops the run after
the requests in flight; what was measured is kept and converted to Parquet.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pinchpoint import _engine
from pinchpoint.plan import Plan

TICK_S = 1.0


@dataclass
class LoadResult:
    summary: dict
    requests_path: Path
    rows: int
    interrupted: bool


def engine_config(plan: Plan, run_id: str, records_path: Path) -> dict:
    base = plan.target.base_path
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
            }
            for r in plan.request
        ],
        "steps": [(users, plan.load.duration) for users in plan.load.users()],
        "think_time_s": plan.load.think_time,
        "timeout_s": plan.load.timeout,
        "records_path": str(records_path),
        "threads": plan.load.threads,
        "tag": plan.target.tag,
    }


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
    give_up_after = plan.load.timeout + 5.0
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
