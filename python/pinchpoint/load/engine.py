"""Runs a plan's load (closed-loop steps or open-loop phases) on the Rust engine, with
the GIL released while it waits.

A first SIGINT or SIGTERM (counted by `interrupts.catching()`, or a KeyboardInterrupt
without it) stops the run after the requests in flight; a second abandons those at once.
An `[sla]` objective that aborts stops it the same way when it breaks (load/abort.py).
Every request that ended is kept and converted to Parquet.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pinchpoint.load.interrupts as interrupts
from pinchpoint import _engine
from pinchpoint.load.abort_rules import Watches
from pinchpoint.load.control import LiveControl
from pinchpoint.load.engine_config import engine_config
from pinchpoint.load.hook_box import HookBox
from pinchpoint.load.step_parts import StepParts
from pinchpoint.plan.model import Plan
from pinchpoint.rundir import files

TICK_S = 1.0
# How often the wait looks at the signals caught: a second Ctrl-C acts within this.
POLL_S = 0.1
# After an abandon, how long the engine gets to drop its tasks and close the records.
ABANDON_GRACE_S = 5.0


@dataclass
class LoadResult:
    summary: dict
    # None when the records were not kept (`keep_records=False`).
    requests_path: Path | None
    rows: int
    interrupted: bool


def step_windows(plan: Plan, summary: dict) -> list[dict]:
    """Each step or phase that ran, for run.json: its window (unix seconds), its load
    level (`kind` users or rate, `level` the users or the target requests per second,
    their mean over a ramp), its name if it has one, and for open loop the requests
    the schedule meant to send (`intended`), those that waited for a free connection
    (`late`) and those never sent (`unsent`)."""
    levels = plan.load.levels()
    changes = {int(c["step"]): c for c in summary.get("changes") or []}
    out = []
    for i, (a, b) in enumerate(summary["windows"]):
        engine_step = summary["steps"][i]
        entry = {"step": i, "users": engine_step["users"], "start": a / 1e6, "end": b / 1e6}
        if (change := changes.get(i)) is not None:
            # A step begun by a change asked while the run went (load/control.py).
            if "rate" in change:
                entry |= {"kind": "rate", "level": float(change["rate"])}
                entry.update({k: engine_step.get(k, 0) for k in ("intended", "late", "unsent")})
            else:
                entry |= {"kind": "users", "level": float(change["users"])}
                entry["users"] = change["users"]
            entry["manual"] = {"by": change.get("by", "unknown"), "at": change.get("at", a / 1e6)}
            out.append(entry)
            continue
        level = levels[i]
        entry |= {"kind": level.kind, "level": level.level}
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
    control: LiveControl | None = None,
    keep_records: bool = True,
) -> LoadResult:
    """Runs every step of the plan and writes `requests.parquet` into run_dir; `control`
    takes the changes of users asked while it goes. Without `keep_records` no record is
    written (the summary's counts and histograms are the engine's all the same)."""
    stream = run_dir / files.REQUEST_STREAM
    config = engine_config(plan, run_id, stream if keep_records else None)
    box = config["hook"] if isinstance(config["hook"], HookBox) else None
    watch = Watches.of(plan.sla, plan.abort)
    try:
        run = _engine.start(config)
        if control is not None:
            control.attach(run)
        summary, halted = _wait(run, plan, box, watch, on_tick)
    finally:
        if control is not None:
            control.detach()
        if box is not None:
            box.close()
    if control is not None:
        summary["changes"] = control.applied(summary.get("changes") or [])
    parquet: Path | None = None
    rows = 0
    if keep_records:
        parquet = run_dir / files.REQUESTS
        rows = _engine.records_to_parquet(str(stream), str(parquet))
        stream.unlink()
    aborted = watch.fired if watch is not None else None
    summary["interrupted"] = summary["interrupted"] or halted
    if aborted is not None:
        # The engine counts its stop as an interruption; an abort is one only if a
        # signal came too.
        summary["interrupted"] = interrupts.count() > 0
        summary["aborted"] = aborted.as_json()
    if box is not None and box.broken is not None:
        summary["stopped"] = f"{box.broken}; the run stopped there"
    return LoadResult(
        summary=summary, requests_path=parquet, rows=rows, interrupted=summary["interrupted"]
    )


def _wait(
    run: _engine.LoadRun,
    plan: Plan,
    box: HookBox | None,
    watch: Watches | None,
    on_tick: Callable[[dict], None] | None,
) -> tuple[dict, bool]:
    """The engine's summary once it ends, and whether it was stopped before its end: by
    a signal, by a hook that broke or by an objective that aborts (the run stops as at
    a first Ctrl-C)."""
    timeouts = [r.timeout for r in plan.request] + [s.timeout for f in plan.flow for s in f.step]
    longest = max([plan.load.timeout, *(t or 0.0 for t in timeouts)])
    halt = _Halt(run, longest)
    next_tick = time.monotonic() + TICK_S
    parts = StepParts(plan.load.levels())
    summary = None
    while summary is None:
        try:
            if box is not None and box.broken is not None and halt.level == 0:
                halt.stop(None)
            halt.check()
            summary = run.wait(POLL_S)
            ticking = on_tick is not None or watch is not None
            if summary is None and ticking and time.monotonic() >= next_tick:
                next_tick = time.monotonic() + TICK_S
                for part in parts.split(run.snapshot()):
                    if watch is not None and watch.judge(part) and halt.level == 0:
                        halt.stop(None)
                    if on_tick is not None:
                        on_tick(part)
        except KeyboardInterrupt:
            halt.uncaught += 1
    if on_tick is not None:  # the last second, to the run's end
        for part in parts.split(run.snapshot()):
            on_tick(part)
    return summary, halt.level > 0


class _Halt:
    """Turns the signals caught into a stop (the first) and an abandon (the second)."""

    def __init__(self, run: _engine.LoadRun, longest_timeout_s: float) -> None:
        self.run = run
        self.longest = longest_timeout_s
        self.level = 0  # 1 stopped, 2 abandoned
        self.uncaught = 0  # KeyboardInterrupts with no catcher in force
        self.give_up_at: float | None = None

    def check(self) -> None:
        wanted = min(max(interrupts.count(), self.uncaught), 2)
        now = time.monotonic()
        if wanted > self.level:
            caught = interrupts.active()
            if wanted == 1:
                self.stop(caught)
            else:
                self.run.abandon()
                self.give_up_at = now + ABANDON_GRACE_S
                if caught is not None:
                    caught.tell("Abandoning the requests in flight")
            self.level = wanted
        if self.give_up_at is not None and now > self.give_up_at:
            raise RuntimeError("the load engine did not stop in time")

    def stop(self, caught: interrupts.Caught | None) -> None:
        """Stops the run after the requests in flight, as a first signal does."""
        self.run.stop()
        self.level = max(self.level, 1)
        self.give_up_at = time.monotonic() + self.longest + ABANDON_GRACE_S
        if caught is not None:
            caught.tell(
                f"{caught.first_name()}: stopping; waiting up to {self.longest:g} s "
                "for the requests in flight (Ctrl-C again to abandon them)"
            )


def recover_records(run_dir: Path) -> int | None:
    """Converts the records stream a killed run left behind; None if there is none."""
    stream = run_dir / files.REQUEST_STREAM
    if not stream.exists():
        return None
    rows = _engine.records_to_parquet(str(stream), str(run_dir / files.REQUESTS))
    stream.unlink()
    return rows
