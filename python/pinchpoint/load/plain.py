"""`pinchpoint load`: a load test with no diagnosis, from a URL or a plan, summarised.

From a URL it runs one step of closed-loop users (`connections`) or, with `rate`, an
open-loop schedule of that many requests per second; from a plan file it runs the plan's
load as written (steps, stages or phases) without collecting logs.

The summary comes from the engine's counts and histograms (load/step_totals.py), never
from the requests read back, and nothing heavier than the plan is imported before the
first request: numpy and polars come after the load.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pinchpoint.load import interrupts
from pinchpoint.load.engine import run_steps, step_windows
from pinchpoint.load.histograms import write_histograms
from pinchpoint.load.preflight import check_inputs
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import Plan, parse_plan, read_plan_text
from pinchpoint.plan.toml import validate_data
from pinchpoint.redact import plan_redactor, private_dir, private_files
from pinchpoint.rundir import files

# The generator is saturated when its CPU reaches this share of the threads it runs on.
GENERATOR_SATURATED = 0.9


@dataclass(frozen=True)
class UrlLoad:
    """What the command line says about a URL load."""

    url: str
    connections: int = 50
    seconds: float = 10.0
    rate: float | None = None
    arrivals: str = "uniform"
    max_in_flight: int = 1000
    threads: int = 0
    timeout: float = 10.0
    tag: bool = False
    http2: bool = False
    insecure: bool = False
    ca_file: str | None = None
    # Stop when a second's failed share goes past this (an [sla] error_rate with abort).
    abort_on_error_rate: float | None = None


def url_plan(spec: UrlLoad) -> Plan:
    """The plan of a URL load, built as the plan's tables (no TOML text in between) and
    checked as a plan file would be; errors name the command line's field."""
    parts = urlsplit(spec.url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    target: dict[str, object] = {"url": f"{parts.scheme}://{parts.netloc}", "tag": spec.tag}
    if spec.http2:
        target["http"] = "2"
    if spec.insecure:
        target["insecure"] = True
    if spec.ca_file is not None:
        target["ca_file"] = spec.ca_file
    load: dict[str, object] = {"warmup": 0, "timeout": spec.timeout, "threads": spec.threads}
    if spec.rate is None:
        load |= {"lower": spec.connections, "upper": spec.connections, "duration": spec.seconds}
    else:
        load |= {
            "arrivals": spec.arrivals,
            "max_in_flight": spec.max_in_flight,
            "phase": [{"duration": spec.seconds, "arrival_rate": spec.rate}],
        }
    data: dict[str, object] = {"target": target, "load": load, "request": [{"path": path}]}
    if spec.abort_on_error_rate is not None:
        data["sla"] = {"error_rate": spec.abort_on_error_rate, "abort": True}
    return validate_data(Plan, data, "command line")


@private_files()
def plain_load(
    source: UrlLoad | Path,
    out: Path | None = None,
    on_tick: Callable[[dict], None] | None = None,
) -> dict:
    """Runs the load and returns its summary; with `out`, keeps the run folder there
    (without, no record is written: the summary is the engine's counts and histograms,
    and the temporary folder it runs in is removed at the end). Stopped by a
    signal (see interrupts.py), the summary covers what ran and says `interrupted`.
    The folder is 0700 (made so if new or empty), the files written in it 0600."""
    plan = _plan_checked(source) if isinstance(source, Path) else url_plan(source)
    if plan.load.locustfile is not None:
        raise PlanError(
            f"{source}: load.locustfile: pinchpoint load sends the engine's requests; "
            "run a locustfile with pinchpoint run"
        )
    if out is not None:
        private_dir(out, exist_ok=True)
        return _load_into(plan, source, out, keep=True, on_tick=on_tick)
    tmp = Path(tempfile.mkdtemp(prefix="pinchpoint-load-"))
    try:
        return _load_into(plan, source, tmp, keep=False, on_tick=on_tick)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _plan_checked(path: Path) -> Plan:
    """The plan of a plan file, its hook and feeds checked as the run will use them."""
    text = read_plan_text(path)
    plan = parse_plan(text, str(path))
    check_inputs(plan, text, str(path))
    return plan


def _load_into(
    plan: Plan,
    source: UrlLoad | Path,
    run_dir: Path,
    keep: bool,
    on_tick: Callable[[dict], None] | None,
) -> dict:
    cpu_before, wall_before = _cpu_seconds(), time.monotonic()
    # Records nobody keeps are not written: the summary is the engine's counts.
    result = run_steps(plan, "load", run_dir, on_tick=on_tick, keep_records=keep)
    cpu_s, wall_s = _cpu_seconds() - cpu_before, time.monotonic() - wall_before
    summary = _summary(plan, result.summary)
    summary["target"] = plan.target.url
    summary["interrupted"] = result.interrupted
    if aborted := result.summary.get("aborted"):
        summary["aborted"] = aborted["reason"]
    if result.interrupted:
        caught = interrupts.active()
        summary["signal"] = caught.first_name() if caught and caught.signals else None
        summary["abandoned"] = int(result.summary.get("abandoned") or 0)
    summary["generator"] = _generator(plan, cpu_s, wall_s, result.summary["steps"])
    if isinstance(source, UrlLoad):
        summary["url"] = source.url
        summary["connections"] = source.connections if source.rate is None else None
    # A reason can quote a secret (a check's expected text), the URL a password.
    summary = plan_redactor(plan).mapping(summary)
    if keep:
        write_histograms(result.summary, run_dir)
        (run_dir / files.SUMMARY).write_text(json.dumps(summary, indent=2))
    return summary


def _cpu_seconds() -> float:
    """This process's CPU time, every thread's (the engine's too)."""
    times = os.times()
    return times.user + times.system


def _summary(plan: Plan, engine: dict) -> dict:
    """Counts over every request; latencies over the answered ones only (None if none)."""
    # numpy, with the histograms, only once the load has ended.
    from pinchpoint.load.step_totals import endpoint_totals, kind_totals, latency, totals

    windows = step_windows(plan, engine)
    elapsed = sum(max(w["end"] - w["start"], 0.0) for w in windows) or 1e-9
    steps = []
    for w, counts in zip(windows, engine["steps"], strict=True):
        span = max(w["end"] - w["start"], 1e-9)
        steps.append(
            {
                **{k: w[k] for k in ("step", "kind", "level") if k in w},
                **({"name": w["name"]} if "name" in w else {}),
                **{k: counts[k] for k in ("requests", "responses", "bytes", "errors")},
                **{k: w[k] for k in ("intended", "late", "unsent") if k in w},
                "duration_s": round(span, 3),
                "requests_per_s": counts["requests"] / span,
                "statuses": {str(k): v for k, v in counts["statuses"].items()},
                "latency_us": latency(counts),
                "kinds": {
                    kind: {"requests": k["requests"], "failed": k["failed"]}
                    for kind, k in counts.get("kinds", {}).items()
                },
            }
        )
    whole = totals(engine["steps"])
    return {
        "model": "open" if plan.load.open else "closed",
        "duration_s": round(elapsed, 3),
        "requests": whole["requests"],
        "responses": whole["responses"],
        "requests_per_s": whole["requests"] / elapsed,
        "bytes": whole["bytes"],
        "statuses": whole["statuses"],
        "errors": whole["errors"],
        # Per class of error, the first distinct reasons the engine saw (the OS's, TLS's).
        "error_reasons": dict(engine.get("error_reasons") or {}),
        "latency_us": whole["latency_us"],
        "steps": steps,
        "endpoints": endpoint_totals(engine["steps"], plan.endpoints()),
        # Requests, WebSocket sessions and messages, gRPC calls and streamed messages apart.
        "kinds": kind_totals(engine["steps"]),
    }


def _generator(plan: Plan, cpu_s: float, wall_s: float, steps: list[dict]) -> dict:
    """The generator's self-check: its CPU against the cores it may use and, in open loop,
    how late requests left against their schedule (the engine's `steps` keep it)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = min(plan.load.threads or (usable or 1), usable or 1)
    cores = cpu_s / max(wall_s, 1e-9)
    check: dict[str, Any] = {
        "cpu_cores": round(cores, 3),
        "threads": threads,
        "saturated": cores >= GENERATOR_SATURATED * threads,
    }
    if plan.load.open and any(s["requests"] for s in steps):
        from pinchpoint.load.send_lag import send_lag_us

        check["send_lag_us"] = send_lag_us(steps)
    return check
