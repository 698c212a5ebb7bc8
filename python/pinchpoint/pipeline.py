"""One path for every run: load + collect into the run folder, then analyze and report."""

from __future__ import annotations

import base64
import json
import os
import platform
import secrets
import signal
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pinchpoint.analyze import analyze
from pinchpoint.collect.formats import get_parser
from pinchpoint.collect.logs import Position, collect_component, collection_json, mark, write_tiers
from pinchpoint.collect.resources import ProcessSelector, ResourceSampler
from pinchpoint.load.engine import run_steps
from pinchpoint.plan import Plan
from pinchpoint.report.html import write_report

# Tiers write their log line when the response is done; give the last ones time to land.
LOG_SETTLE_S = 0.3


@dataclass
class RunOutcome:
    run_dir: Path
    verdict: dict
    interrupted: bool


def new_run_id(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops a run the way Ctrl-C does, so what was measured is kept."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _sampler(plan: Plan) -> ResourceSampler:
    targets = {
        c.name: ProcessSelector.from_dict(c.process.model_dump(exclude_defaults=True))
        for c in plan.component
        if c.process is not None
    }
    return ResourceSampler(targets, interval_s=plan.sampling.interval)


def _mark_logs(plan: Plan) -> dict[str, Position]:
    return {c.name: mark(Path(c.log.path)) for c in plan.component if c.log is not None}


def collect_logs(plan: Plan, run_id: str, run_dir: Path, marks: dict[str, Position]) -> dict:
    """Writes `tiers.parquet` and `collection.json` from each component's log."""
    rows, counts = [], []
    for c in plan.component:
        if c.log is None:
            continue
        parser = get_parser(c.log.format, c.log.log_format)
        got, n = collect_component(c.name, Path(c.log.path), parser, run_id, marks.get(c.name))
        rows.extend(got)
        counts.append(n)
    write_tiers(rows, run_dir / "tiers.parquet")
    collected = collection_json(run_id, counts)
    (run_dir / "collection.json").write_text(json.dumps(collected, indent=2))
    return collected


def _host_facts() -> dict:
    return {
        "hostname": socket.gethostname(),
        "cpu_count": os.cpu_count() or 1,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def execute(
    plan: Plan,
    plan_text: str,
    runs_dir: Path,
    on_tick: Callable[[dict], None] | None = None,
    run_id: str | None = None,
) -> RunOutcome:
    run_id = run_id or new_run_id()
    run_dir = runs_dir / run_id
    run_dir.mkdir(parents=True, exist_ok=False)
    (run_dir / "plan.toml").write_text(plan_text)
    marks = _mark_logs(plan)
    started = time.time()
    with sigterm_as_interrupt():
        sampler = _sampler(plan)
        sampler.start()
        try:
            result = run_steps(plan, run_id, run_dir, on_tick=on_tick)
        finally:
            sampler.stop(raise_errors=False)
            sampler.write(run_dir / "resources.parquet")
    time.sleep(LOG_SETTLE_S)
    collect_logs(plan, run_id, run_dir, marks)
    summary = result.summary
    steps = [
        {"step": i, "users": summary["steps"][i]["users"], "start": a / 1e6, "end": b / 1e6}
        for i, (a, b) in enumerate(summary["windows"])
    ]
    threads = plan.load.threads or (os.cpu_count() or 1)
    run = {
        "run_id": run_id,
        "started": started,
        "ended": time.time(),
        "interrupted": result.interrupted,
        "warmup_s": plan.load.warmup,
        "steps": steps,
        "records": result.rows,
        "records_error": summary.get("records_error"),
        "engine": {"threads": threads},
        "host": _host_facts(),
        "log_marks": {name: vars(pos) for name, pos in marks.items()},
        "load_steps": [{k: v for k, v in s.items() if k != "hdr_v2"} for s in summary["steps"]],
    }
    (run_dir / "run.json").write_text(json.dumps(run, indent=2))
    (run_dir / "histograms.json").write_text(
        json.dumps(
            {str(s["step"]): base64.b64encode(s["hdr_v2"]).decode() for s in summary["steps"]}
        )
    )
    verdict = analyze(run_dir)
    write_report(run_dir)
    return RunOutcome(run_dir=run_dir, verdict=verdict, interrupted=result.interrupted)
