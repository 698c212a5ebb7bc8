"""A locustfile's users under the plan's closed-loop steps (`[load] locustfile`, or
`pinchpoint run --locustfile`), with the run's tag on every request and the records in
requests.parquet as the engine writes them, so collection, the analysis and the report
read the run as any other.

Locust runs in a child process (load/locust_child.py): importing it patches the process
with gevent. This side starts it, relays its live counters, stops it on a first
SIGINT/SIGTERM (a second kills its users at once), kills it past its deadline (the steps'
time, the plan's timeout and a grace), converts the records it streamed, and works out
the summary the engine would return (load/records_summary.py).

Each step holds its users for its duration (a ramp moves them along it); the plan's
think_time and threads do not apply: the locustfile's `wait_time` paces its users.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pyarrow.parquet as pq

import pinchpoint.load.interrupts as interrupts
from pinchpoint import _engine
from pinchpoint.load.abort_rules import Watches
from pinchpoint.load.engine import ABANDON_GRACE_S, POLL_S, TICK_S, LoadResult
from pinchpoint.load.records_summary import step_summaries
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import Plan
from pinchpoint.plan.user_paths import NotUsable, read_input
from pinchpoint.rundir import files
from pinchpoint.rundir.schemas import REQUESTS_SCHEMA

CHILD = "pinchpoint.load.locust_child"
# What Locust said on its stderr (the locustfile's errors, its prints): kept with the run.
LOG = "locust.log"
_SUMMARY = "locust-summary.json"
# Time to import Locust and the locustfile before the first step.
START_TIMEOUT_S = 60.0
END_GRACE_S = 10.0
# A task that holds the process without yielding for the plan's timeout and this much
# more stops the run (the child's heartbeat is twice a second); the kill follows after
# STALL_GRACE_S when its records cannot be written.
STALL_AFTER_S = 2.0
STALL_GRACE_S = 3.0
# A locustfile larger than this is not Python a person wrote.
MAX_LOCUSTFILE_BYTES = 16 << 20


def locustfile_where(text: str, source: str, from_flag: bool) -> str:
    """Where an error about the locustfile points: the flag, or the plan's line."""
    if from_flag:
        return "--locustfile"
    from pinchpoint.plan.toml import field_line

    line = field_line(text, ("load", "locustfile"))
    return f"{source}:{line}: load.locustfile" if line else f"{source}: load.locustfile"


def _config(plan: Plan, run_id: str, run_dir: Path | None) -> dict:
    path = plan.load.locustfile
    if path is None:
        raise PlanError("the plan names no locustfile")
    levels = plan.load.levels()
    target = plan.target
    return {
        "locustfile": str(Path(path).resolve()),
        "target": target.url,
        "run_id": run_id,
        "tag": target.tag,
        "steps": [
            {
                "users": lv.users,
                "ramp_from": lv.ramp_from,
                "duration": lv.duration,
                "level": lv.level,
            }
            for lv in levels
        ],
        "timeout": plan.load.timeout,
        "verify": target.ca_file or not target.insecure,
        "stream": str(run_dir / files.REQUEST_STREAM) if run_dir else "",
        "summary": str(run_dir / _SUMMARY) if run_dir else "",
        "check_only": run_dir is None,
    }


def _check_installed(where: str) -> None:
    """Locust is there to import (found, not imported: that would patch this process)."""
    from importlib.util import find_spec

    if find_spec("locust") is None:
        raise PlanError(f"{where}: Locust is not installed: pip install 'pinchpoint[locust]'")


def _messages(out: str) -> list[dict]:
    found = []
    for line in out.splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            found.append(message)
    return found


def check_locustfile(plan: Plan, where: str) -> list[str]:
    """The names of the locustfile's User classes, loaded in a child as the run would;
    raises PlanError naming `where` and the file when it cannot run."""
    path = Path(plan.load.locustfile or "")
    if not path.exists():
        raise PlanError(f"{where}: {path}: no such file")
    try:
        read_input(path, MAX_LOCUSTFILE_BYTES, "locustfile")
    except NotUsable as e:
        raise PlanError(f"{where}: {e}") from None
    _check_installed(where)
    config = json.dumps(_config(plan, "check", None))
    try:
        done = subprocess.run(
            [sys.executable, "-m", CHILD],
            input=config,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise PlanError(f"{where}: {path}: not loaded within {START_TIMEOUT_S:g}s") from None
    for message in _messages(done.stdout):
        if "error" in message:
            raise PlanError(f"{where}: {path}: {message['error']}")
        if "ready" in message:
            return list(message["ready"])
    tail = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
    raise PlanError(f"{where}: {path}: Locust could not start: {tail[0]}")


class _Child:
    """The Locust process of a run: its messages, and the stop, abandon and kill."""

    def __init__(self, config: dict, log: IO[str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", CHILD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            # Not in the terminal's process group: a Ctrl-C reaches this side only.
            start_new_session=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(config))
        self.process.stdin.close()
        self.lines: queue.Queue[dict | None] = queue.Queue()
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()
        self.deadline = time.monotonic() + START_TIMEOUT_S
        self.killed = False
        # Once its users are loaded: when it was last heard, and whether it was found
        # held by a task that does not yield (and told to write its records and end).
        self.heard: float | None = None
        self.stalled = False

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            for message in _messages(line):
                self.lines.put(message)
        self.lines.put(None)

    def signal(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)

    def kill_if_late(self) -> None:
        if time.monotonic() > self.deadline and self.process.poll() is None:
            self.process.kill()
            self.killed = True

    def stop_if_stalled(self, budget_s: float) -> None:
        """Silent past `budget_s`: a task holds the process; SIGUSR1 makes it write its
        records and end, a kill follows STALL_GRACE_S later if it cannot."""
        now = time.monotonic()
        if self.heard is None or self.stalled or now - self.heard <= budget_s:
            return
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGUSR1)
            self.stalled = True
            self.deadline = min(self.deadline, now + STALL_GRACE_S)


def run_locust(
    plan: Plan,
    run_id: str,
    run_dir: Path,
    on_tick: Callable[[dict], None] | None = None,
) -> LoadResult:
    """Runs the plan's steps with the locustfile's users; writes `requests.parquet`."""
    levels = plan.load.levels()
    if plan.load.open or plan.load.find_knee:
        raise PlanError("a locustfile runs closed-loop steps: no open loop, no find_knee")
    _check_installed("load.locustfile")
    config = _config(plan, run_id, run_dir)
    steps_s = sum(lv.duration for lv in levels)
    windows: dict[int, tuple[int, int]] = {}
    started: dict[int, int] = {}
    error: str | None = None
    last_tick: dict | None = None
    next_tick = time.monotonic() + TICK_S
    level, uncaught = 0, 0
    watch: Watches | None = None
    with (run_dir / LOG).open("w") as log:
        child = _Child(config, log)
        done = False
        while not done:
            try:
                wanted = min(max(interrupts.count(), uncaught), 2)
                if wanted > level:
                    level = wanted
                    _tell_stop(level, plan.load.timeout)
                    child.signal()
                    grace = plan.load.timeout + END_GRACE_S if level == 1 else ABANDON_GRACE_S
                    child.deadline = min(child.deadline, time.monotonic() + grace)
                child.kill_if_late()
                child.stop_if_stalled(plan.load.timeout + STALL_AFTER_S)
                try:
                    message = child.lines.get(timeout=POLL_S)
                except queue.Empty:
                    message = {}
                if message and child.heard is not None:
                    child.heard = time.monotonic()
                if message is None:
                    done = True
                elif "ready" in message:
                    child.heard = time.monotonic()
                    # Watched from the first step on, after Locust's start-up.
                    watch = Watches.of(plan.sla, plan.abort)
                    child.deadline = time.monotonic() + steps_s + plan.load.timeout + END_GRACE_S
                elif "step" in message:
                    started[message["step"][0]] = message["step"][1]
                elif "window" in message:
                    index, a, b = message["window"]
                    windows[index] = (a, b)
                elif "tick" in message:
                    last_tick = _with_histogram(message["tick"])
                    if watch is not None and level == 0 and watch.judge(last_tick):
                        # Stopped as at a first Ctrl-C.
                        level = 1
                        child.signal()
                        grace = plan.load.timeout + END_GRACE_S
                        child.deadline = min(child.deadline, time.monotonic() + grace)
                elif "error" in message:
                    error = message["error"]
                if on_tick is not None and last_tick and time.monotonic() >= next_tick:
                    next_tick = time.monotonic() + TICK_S
                    on_tick(last_tick)
                    last_tick = None
            except KeyboardInterrupt:
                uncaught += 1
        child.process.wait()
    summary_path = run_dir / _SUMMARY
    stopped: str | None = None
    if error is not None:
        # It loaded for the check before the run, and not in the run (it changed since?).
        stopped = f"{config['locustfile']}: {error}; the run stopped there"
    if summary_path.exists():
        told = json.loads(summary_path.read_text())
        summary_path.unlink()
    else:
        told = _cut_short(started, windows)
        if level == 0 and stopped is None:
            stopped = _why_ended(child, plan.load.timeout + STALL_AFTER_S, run_dir / LOG)
    if told.get("off_target"):
        # Nothing was sent there (locust_target.py); what was sent to the target is kept.
        stopped = (
            f"{config['locustfile']}: {told['off_target']} {plan.target.url}: "
            "pinchpoint sends only to target.url, and the run stopped there"
        )
    rows, parquet, lost = _records(run_dir)
    if lost is not None:
        stopped = f"{stopped}; {lost}" if stopped else lost
    interrupted = bool(told["interrupted"]) or level > 0 or child.killed or stopped is not None
    aborted = watch.fired if watch is not None else None
    if aborted is not None:
        # The abort stopped the child as a signal would; it is an interruption only if a
        # signal came too.
        interrupted = interrupts.count() > 0 or child.killed or stopped is not None
    summary = {
        "steps": step_summaries(pq.read_table(parquet), levels),
        "windows": [tuple(w) for w in told["windows"]],
        "records": rows,
        "interrupted": interrupted,
        "started_us": told["started_us"],
        "ended_us": told["ended_us"],
        "records_error": None,
        "error_reasons": told.get("error_reasons", {}),
        "abandoned": 0,
        "endpoint_names": told.get("endpoint_names") or [],
    }
    if stopped is not None:
        summary["stopped"] = stopped
    if aborted is not None:
        summary["aborted"] = aborted.as_json()
    if (run_dir / LOG).stat().st_size == 0:
        (run_dir / LOG).unlink()
    return LoadResult(summary=summary, requests_path=parquet, rows=rows, interrupted=interrupted)


def _with_histogram(tick: dict) -> dict:
    """The child's tick with its second's latencies as the engine's histogram."""
    window = tick.pop("window_us", None)
    if window:
        from pinchpoint.load.hdr import Histogram

        tick["window_hdr_v2"] = Histogram.of(window).v2()
    return tick


def _tell_stop(level: int, timeout: float) -> None:
    caught = interrupts.active()
    if caught is None:
        return
    if level == 1:
        caught.tell(
            f"{caught.first_name()}: stopping; waiting up to {timeout:g} s for the "
            "Locust users' tasks in flight (Ctrl-C again to abandon them)"
        )
    else:
        caught.tell("Abandoning the Locust users' tasks in flight")


def _cut_short(started: dict[int, int], windows: dict[int, tuple[int, int]]) -> dict:
    """What a child killed before its summary had said: the windows it began."""
    now_us = time.time_ns() // 1000
    spans = [windows.get(i, (start, now_us)) for i, start in sorted(started.items())]
    first = spans[0][0] if spans else now_us
    return {"windows": spans, "interrupted": True, "started_us": first, "ended_us": now_us}


def _why_ended(child: _Child, budget_s: float, log: Path) -> str:
    """Why a Locust process ended without its summary, no signal asking it to."""
    if child.stalled:
        return (
            f"a Locust task held its process {budget_s:g} s without yielding (a loop "
            "that never waits?): the run stopped there with the records written"
        )
    tail = " / ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
    said = f" ({tail[-300:]})" if tail else ""
    if child.killed:
        return f"the Locust process did not end in time and was killed{said}"
    return f"the Locust process {_ended(child.process.returncode)} before the run's end{said}"


def _ended(status: int | None) -> str:
    if status is not None and status < 0:
        try:
            return f"was killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"was killed by signal {-status}"
    return f"exited with status {status}"


def _records(run_dir: Path) -> tuple[int, Path, str | None]:
    """The records streamed, in requests.parquet: their count, the file, and what was
    lost when the stream cannot be read (a process killed before writing its schema)."""
    stream = run_dir / files.REQUEST_STREAM
    parquet = run_dir / files.REQUESTS
    if not stream.exists():
        pq.write_table(REQUESTS_SCHEMA.empty_table(), parquet)
        return 0, parquet, None
    try:
        rows = _engine.records_to_parquet(str(stream), str(parquet))
    except RuntimeError as e:
        pq.write_table(REQUESTS_SCHEMA.empty_table(), parquet)
        return 0, parquet, f"its records could not be read ({e})"
    stream.unlink()
    return rows, parquet, None
