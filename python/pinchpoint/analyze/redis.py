"""A Redis component from inside, in the verdict: what its samples (redis_info,
redis_commands, redis_slowlog.parquet) say from the step where a finding starts.

Redis runs every command on its main thread: one core is all it can use for them. A
step in which that thread used SATURATED cores or more (INFO's used_cpu_*_main_thread;
the process's used_cpu_* before Redis 6.2) is a Redis saturated at one core, however many
cores the host has left. Its busiest commands are those with the most time gained
(INFO commandstats' usec), its slow ones those SLOWLOG logged.

Entry points: `add_redis(verdict, view)` adds `redis` and evidence lines to each finding
on a sampled Redis component; `saturated_steps(view)` lists the steps in which a Redis
component's main thread was saturated, for a rule to name it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from pinchpoint.analyze.context import start_text
from pinchpoint.analyze.database.samples import in_windows, onset_windows
from pinchpoint.analyze.findings import pct
from pinchpoint.analyze.steps import InsideMarks
from pinchpoint.rundir import files
from pinchpoint.rundir.shapes import VerdictJson
from pinchpoint.rundir.steady import Window, steady_windows
from pinchpoint.rundir.view import RunView

SATURATED = 0.9
TOP = 5
# The commands said in the evidence (`redis` in verdict.json keeps TOP).
SAID = 3


@dataclass(frozen=True)
class RedisSamples:
    """A run's samples of its Redis components."""

    info: pl.DataFrame
    commands: pl.DataFrame
    slowlog: pl.DataFrame
    windows: list[Window]

    def components(self) -> set[str]:
        return set(self.info["component"].unique().to_list())


def read_redis(view: RunView) -> RedisSamples | None:
    """The run's Redis samples; None when it took none or they cannot be read."""
    if not view.has(files.REDIS_INFO):
        return None
    try:
        info = view.table(files.REDIS_INFO)
        commands = view.table(files.REDIS_COMMANDS)
        slowlog = view.table(files.REDIS_SLOWLOG)
        windows = steady_windows(view.run)
    except (OSError, ValueError, KeyError):
        return None
    return RedisSamples(info, commands, slowlog, windows)


def main_thread_cores(info: pl.DataFrame) -> float | None:
    """The cores Redis's main thread used from the first sample of `info` (one component's)
    to its last: its main thread's CPU seconds gained over the seconds between; the
    process's where the server does not report its main thread's. None: under two samples."""
    rows = info.sort("ts")
    if rows.height < 2:
        return None
    first, last = rows.row(0, named=True), rows.row(-1, named=True)
    seconds = last["ts"] - first["ts"]
    if seconds <= 0:
        return None
    before, after = _cpu(first), _cpu(last)
    if before is None or after is None:
        return None
    return max(0.0, float((after - before) / seconds))


def _cpu(row: dict[str, Any]) -> float | None:
    """The CPU seconds of the main thread, else of the process; None: not reported."""
    for sys_name, user_name in (
        ("used_cpu_sys_main_thread", "used_cpu_user_main_thread"),
        ("used_cpu_sys", "used_cpu_user"),
    ):
        sys_s, user_s = row.get(sys_name), row.get(user_name)
        if sys_s is not None and user_s is not None:
            return float(sys_s) + float(user_s)
    return None


def busiest_commands(commands: pl.DataFrame, top: int = TOP) -> list[dict[str, Any]]:
    """The commands by the time they gained from the first sample of `commands` (one
    component's) to its last, with their calls and share of that time."""
    if commands.is_empty():
        return []
    times = commands["ts"].unique().sort()
    first = commands.filter(pl.col("ts") == times[0]).select("command", "calls", "usec")
    gained = (
        commands.filter(pl.col("ts") == times[-1])
        .join(first, on="command", how="left", suffix="_first")
        .with_columns(
            (pl.col("usec") - pl.col("usec_first").fill_null(0)).alias("gained_usec"),
            (pl.col("calls") - pl.col("calls_first").fill_null(0)).alias("gained_calls"),
        )
        .filter(pl.col("gained_usec") > 0)
        .sort(["gained_usec", "command"], descending=[True, False])
    )
    total = float(gained["gained_usec"].sum())
    return [
        {
            "command": row["command"],
            "busy_s": row["gained_usec"] / 1e6,
            "share": row["gained_usec"] / total if total else 0.0,
            "calls": int(row["gained_calls"]),
        }
        for row in gained.head(top).iter_rows(named=True)
    ]


def slow_commands(
    slowlog: pl.DataFrame, start: float, end: float, top: int = TOP
) -> list[dict[str, Any]]:
    """The commands SLOWLOG logged as started between `start` and `end`, the most first."""
    logged = slowlog.filter(pl.col("started").is_between(start - 1, end))
    grouped = (
        logged.group_by("command")
        .agg(pl.len().alias("n"), pl.col("duration_us").max().alias("longest_us"))
        .sort(["n", "command"], descending=[True, False])
    )
    return [
        {"command": row["command"], "entries": row["n"], "longest_ms": row["longest_us"] / 1000}
        for row in grouped.head(top).iter_rows(named=True)
    ]


def redis_inside(samples: RedisSamples, component: str, windows: list[Window]) -> dict[str, Any]:
    """One component's Redis in `windows`: its main thread's cores per step and at most,
    whether that is saturated, its busiest and slow commands, its clients."""
    info = samples.info.filter(pl.col("component") == component)
    commands = samples.commands.filter(pl.col("component") == component)
    steps = []
    for w in windows:
        cores = main_thread_cores(in_windows(info, [w]))
        if cores is not None:
            steps.append({"step": w.step, "cores": cores})
    peak = max((s["cores"] for s in steps), default=None)
    seen = in_windows(info, windows)
    start, end = (windows[0].start, windows[-1].end) if windows else (0.0, 0.0)
    slowlog = samples.slowlog.filter(pl.col("component") == component)
    return {
        "from_step": windows[0].step if windows else None,
        "samples": seen.height,
        "main_thread_cores": steps,
        "peak_cores": peak,
        "saturated": peak is not None and peak >= SATURATED,
        "commands": busiest_commands(in_windows(commands, windows)),
        "slow": slow_commands(slowlog, start, end),
        "clients": _most(seen, "connected_clients"),
        "blocked_clients": _most(seen, "blocked_clients"),
    }


def _most(frame: pl.DataFrame, column: str) -> int | None:
    value = frame[column].max() if not frame.is_empty() else None
    return int(value) if isinstance(value, int | float) else None


def saturated_steps(view: RunView) -> list[dict[str, Any]]:
    """Each step in which a Redis component's main thread used SATURATED cores or more:
    its component, step and cores."""
    samples = read_redis(view)
    if samples is None:
        return []
    found = []
    for component in sorted(samples.components()):
        inside = redis_inside(samples, component, samples.windows)
        found += [
            {"component": component, **step}
            for step in inside["main_thread_cores"]
            if step["cores"] >= SATURATED
        ]
    return found


def main_thread_marks(view: RunView) -> InsideMarks:
    """Per step, each sampled Redis component's `main_thread_cores`: the cores its main
    thread used in the step, the one core all its commands run on."""
    samples = read_redis(view)
    marks: InsideMarks = {}
    if samples is None:
        return marks
    for component in sorted(samples.components()):
        inside = redis_inside(samples, component, samples.windows)
        for step in inside["main_thread_cores"]:
            row = marks.setdefault(step["step"], {}).setdefault(component, {})
            row["main_thread_cores"] = round(step["cores"], 3)
    return marks


def add_redis(verdict: VerdictJson, view: RunView) -> None:
    """Adds the Redis inside (`redis`) and its evidence to each finding on a sampled Redis
    component, from the finding's onset step on."""
    samples = read_redis(view)
    if samples is None:
        return
    sampled = samples.components()
    for finding in [verdict.get("bottleneck"), *(verdict.get("findings") or [])]:
        if not isinstance(finding, dict) or finding.get("component") not in sampled:
            continue
        windows = onset_windows(samples.windows, finding)
        finding["redis"] = redis_inside(samples, str(finding["component"]), windows)
        finding["evidence"] = [*finding.get("evidence", []), *evidence_lines(finding)]


def evidence_lines(finding: Mapping[str, Any]) -> list[str]:
    """The finding's `redis` in the evidence's words."""
    inside = finding["redis"]
    name = finding["component"]
    since = f"from {start_text(finding)}" if "starts_at_users" in finding else "in the run"
    lines = []
    if inside["peak_cores"] is not None:
        saturated = (
            " (saturated: Redis runs its commands on one core)" if inside["saturated"] else ""
        )
        lines.append(
            f"{name}'s main thread used {inside['peak_cores']:.2f} cores at most in a step "
            f"{since}{saturated} (INFO cpu)"
        )
    if inside["commands"]:
        said = "; ".join(
            f"{c['command']} {pct(c['share'])} ({c['busy_s']:.2f} s, {c['calls']} calls)"
            for c in inside["commands"][:SAID]
        )
        lines.append(f"{name}'s commands by time {since} (INFO commandstats): {said}")
    if inside["slow"]:
        said = "; ".join(
            f"{s['command']} ×{s['entries']} (up to {s['longest_ms']:.1f} ms)"
            for s in inside["slow"][:SAID]
        )
        lines.append(f"{name}'s SLOWLOG {since}: {said}")
    return lines
