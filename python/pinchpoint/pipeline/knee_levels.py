"""`find_knee`: the levels of the knee search run one after the other, each a tagged
step of the same run, until `analyze.knee_search.decide` says the knee is bracketed; then
merged into one run folder.

Steps are numbered by users in run.json and `requests.parquet`, whatever order they ran in
(`order` keeps that), and as each engine run numbers its requests from 0, a level's
request ids (in `requests.parquet` and, matched by their users, in `tiers.parquet`) are
shifted by the requests of the levels before it (`req_id_offset`).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pinchpoint.analyze.knee_search import MAX_LEVELS, Point, decide, stopped
from pinchpoint.analyze.steps import Window, client_step
from pinchpoint.load.engine import LoadResult, run_steps
from pinchpoint.plan.model import Plan
from pinchpoint.rundir import files

# Beyond a level's duration and request timeout, what starting and stopping it may take.
LEVEL_MARGIN_S = 10.0
# Distinct reasons kept per class of error, as the engine keeps them per run.
REASONS_PER_CLASS = 3

Tick = Callable[[dict], None]


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
    assert level.result is not None and level.result.requests_path is not None
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
