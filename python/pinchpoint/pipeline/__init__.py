"""One path for every run: load + collect into the run folder, then analyze and report.

The analysis and the report (polars, scipy, plotly) are imported once the load has
ended, as are the knee search and Locust's runner when a plan asks for them: nothing of
theirs delays the first request.
"""

from __future__ import annotations

import os
import platform
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, cast

from pinchpoint.collect.database.sampling import DatabaseSampling
from pinchpoint.collect.gather import Collector, write_logs, write_resources
from pinchpoint.collect.profiling.step import StepProfiler
from pinchpoint.collect.sources.local import LocalCollector
from pinchpoint.collect.sources.prometheus import PrometheusCollector
from pinchpoint.collect.sources.remote import RemoteCollector
from pinchpoint.load.engine import run_steps, step_windows
from pinchpoint.load.histograms import step_counts, write_histograms
from pinchpoint.load.interrupts import catching
from pinchpoint.plan.model import Plan
from pinchpoint.redact import (
    Redactor,
    plan_redactor,
    private_dir,
    private_files,
    redact_plan_text,
    secret_values,
)
from pinchpoint.rundir import files
from pinchpoint.rundir.shapes import RunJson

if TYPE_CHECKING:
    from pinchpoint.load.control import LiveControl
    from pinchpoint.pipeline.knee_levels import KneeRun

# Tiers write their log line when the response is done; give the last ones time to land.
LOG_SETTLE_S = 0.3


@dataclass
class RunOutcome:
    run_dir: Path
    verdict: dict
    interrupted: bool
    # What could not be collected (an agent unreachable or lost), for the terminal.
    warnings: list[str] = field(default_factory=list)
    # A find_knee run: how the search went (run.json `find_knee`).
    search: dict | None = None
    # Why the load stopped before its end on its own (a hook or Locust process that
    # broke), run.json `stopped`; the command exits 3.
    stopped: str | None = None
    # The [sla] objective that stopped the run when it broke (run.json `aborted`); the
    # command exits 4.
    aborted: str | None = None


def new_run_id(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def collectors(plan: Plan) -> list[Collector]:
    """One collector for the components on this host, one per agent of the plan, and one
    for the plan's Prometheus servers, if any."""
    local: Collector = LocalCollector([c for c in plan.component if c.host is None])
    remote: list[Collector] = [
        RemoteCollector(a, [c for c in plan.component if c.host == a.name]) for a in plan.agent
    ]
    if plan.prometheus:
        remote.append(PrometheusCollector(plan.prometheus))
    if plan.otlp:
        # Imported when asked for: protobuf's messages cost start-up time otherwise.
        from pinchpoint.collect.sources.otlp import OtlpCollector

        remote.append(OtlpCollector(plan.otlp))
    return [local, *remote]


def collect_logs(
    plan: Plan,
    run_id: str,
    run_dir: Path,
    using: list[Collector],
    req_id_offsets: dict[int, int] | None = None,
    redactor: Redactor | None = None,
) -> dict:
    """Writes `tiers.parquet` and `collection.json` from each component's log, request
    ids shifted as the knee search shifted the requests' (`req_id_offsets`), its texts
    without the plan's secrets (`redactor`, by default the plan's)."""
    names = [c.name for c in plan.component if c.log is not None or c.host is not None]
    redact = (redactor or plan_redactor(plan)).mapping
    return write_logs(using, run_id, run_dir, names, req_id_offsets, redact)


def _host_facts() -> dict:
    return {
        "hostname": socket.gethostname(),
        "cpu_count": os.cpu_count() or 1,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


@private_files()
def execute(
    plan: Plan,
    plan_text: str,
    runs_dir: Path,
    on_tick: Callable[[dict], None] | None = None,
    run_id: str | None = None,
    on_stage: Callable[[str], None] | None = None,
    control: LiveControl | None = None,
) -> RunOutcome:
    """Runs `plan` into a new folder of `runs_dir`: load and collection, then analysis and
    the report. `on_tick` gets the engine's snapshot each second, `on_stage` the name of
    each stage after the load as it begins ("collect", "analyze"); `control` takes the
    changes of users asked while the load goes."""
    run_id = run_id or new_run_id()
    stage = on_stage or (lambda _: None)
    using = collectors(plan)
    run_dir = private_dir(runs_dir / run_id)
    (run_dir / files.PLAN).write_text(redact_plan_text(plan_text, secret_values(plan)))
    started = time.time()
    knee: KneeRun | None = None
    # Samples the Python tiers' stacks during one step, when the plan asks (plan/profile.py).
    profiler = StepProfiler.for_plan(plan)
    if profiler is not None:
        on_tick = profiler.watch(on_tick)
    # Samples the database components from inside (plan/database.py).
    database = DatabaseSampling.for_plan(plan)
    # SIGINT and SIGTERM stop the load and the run goes on with what it measured, as does
    # an output that can no longer be written (interrupts.stop).
    with catching() as caught:
        for collector in using:
            collector.start(run_id, plan.sampling.interval)
        if database is not None:
            database.start()
        interrupted = True
        try:
            if plan.generators.ray is not None:
                from pinchpoint.load.distributed.runner import run_on_ray

                result = run_on_ray(plan, run_id, run_dir, on_tick=on_tick)
            elif plan.load.find_knee:
                from pinchpoint.pipeline.knee_levels import search_knee

                knee = search_knee(plan, run_id, run_dir, on_tick=on_tick)
                result = knee.load
            elif plan.load.locustfile is not None:
                from pinchpoint.load.locust_steps import run_locust

                result = run_locust(plan, run_id, run_dir, on_tick=on_tick)
            else:
                result = run_steps(plan, run_id, run_dir, on_tick=on_tick, control=control)
            interrupted = result.interrupted
        finally:
            if profiler is not None:
                profiler.finish(files.RunFolder(run_dir), interrupted)
            for collector in using:
                collector.stop()
            write_resources(using, run_dir / files.RESOURCES)
            if database is not None:
                database.stop()
                database.write(files.RunFolder(run_dir))
    stage("collect")
    time.sleep(LOG_SETTLE_S)
    # Reasons and warnings can quote a secret (a check's expected text, an agent's URL).
    redactor = plan_redactor(plan)
    offsets = knee.offsets if knee is not None else None
    collect_logs(plan, run_id, run_dir, using, offsets, redactor)
    for collector in using:
        collector.close()
    summary = result.summary
    steps = knee.steps if knee is not None else step_windows(plan, summary)
    threads = plan.load.threads or (os.cpu_count() or 1)
    run = {
        "run_id": run_id,
        "started": started,
        "ended": time.time(),
        "interrupted": result.interrupted,
        "abandoned": summary.get("abandoned", 0),
        "warmup_s": plan.load.warmup,
        "steps": steps,
        "records": result.rows,
        "records_error": summary.get("records_error"),
        # Per class of error, the first distinct reasons the engine saw (the OS's, TLS's).
        "error_reasons": dict(summary.get("error_reasons") or {}),
        "engine": {"threads": threads},
        "host": _host_facts(),
        "log_marks": {name: m for c in using for name, m in c.log_marks().items()},
        "load_steps": step_counts(summary),
        # The name of each `endpoint` index in requests.parquet.
        "endpoint_names": summary.get("endpoint_names") or plan.endpoints(),
        # The kind of each (plan/kinds.py): a request, a WebSocket session or message, ...
        "endpoint_kinds": summary.get("endpoint_kinds") or plan.endpoint_kinds(),
    }
    if "generators" in summary:  # generators on Ray: each one's node, share and self-check
        run["generators"] = summary["generators"]
    if knee is not None:
        run["find_knee"] = knee.record
    why_stopped = [summary["stopped"]] if summary.get("stopped") else []
    why_stopped += caught.reasons  # an output the run could no longer write
    if why_stopped:
        run["stopped"] = "; ".join(why_stopped)
    if aborted := summary.get("aborted"):
        run["aborted"] = aborted
        if aborted["step"] < len(steps):
            steps[aborted["step"]]["aborted"] = aborted["reason"]
    run = redactor.mapping(run)
    files.RunFolder(run_dir).write_run(cast(RunJson, run))
    write_histograms(summary, run_dir)
    stage("analyze")
    from pinchpoint.analyze import analyze
    from pinchpoint.report.html import write_report

    verdict = analyze(run_dir)
    write_report(run_dir)
    problems = [p for c in using for p in c.problems] + (profiler.problems if profiler else [])
    problems += database.problems if database is not None else []
    warnings = [redactor.text(problem) for problem in problems]
    search = knee.record if knee is not None else None
    stopped = run.get("stopped")  # redacted, as printed
    aborted = run["aborted"]["reason"] if "aborted" in run else None
    return RunOutcome(run_dir, verdict, result.interrupted, warnings, search, stopped, aborted)
