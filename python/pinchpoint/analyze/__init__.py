"""Turns a run folder into a verdict: per-step tables and the bottleneck."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any, TypedDict, cast

from pinchpoint.analyze import sla as slas
from pinchpoint.analyze.causes.generator import load_short
from pinchpoint.analyze.client import min_latency
from pinchpoint.analyze.context import level_of
from pinchpoint.analyze.database.evidence import add_database
from pinchpoint.analyze.database.samples import lock_wait_marks
from pinchpoint.analyze.endpoints import endpoint_table, workers_estimates
from pinchpoint.analyze.hot_code import add_hot_code, read_profile
from pinchpoint.analyze.knee import find_knee
from pinchpoint.analyze.pools import pool_sizes
from pinchpoint.analyze.prediction import predict
from pinchpoint.analyze.redis import add_redis, main_thread_marks
from pinchpoint.analyze.run_input import RunInput, read_input
from pinchpoint.analyze.sla_record import SlaOutcome
from pinchpoint.analyze.steps import step_table
from pinchpoint.analyze.usage import usage_table
from pinchpoint.analyze.usl import fit_usl
from pinchpoint.analyze.verdict import Context, decide
from pinchpoint.redact import private_files
from pinchpoint.rundir import files
from pinchpoint.rundir.shapes import StepJson, VerdictJson
from pinchpoint.rundir.steady import usable_windows
from pinchpoint.rundir.view import RunView, as_view

SCHEMA = "pinchpoint.verdict/1"


def _clean(value: object) -> object:
    """JSON has no NaN: missing numbers become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


class _Curve(TypedDict):
    knee: dict[str, Any] | None
    scalability: dict[str, Any] | None


def _curve(steps: list[StepJson]) -> _Curve:
    """The knee and the scalability law fitted to throughput and p50 latency by users."""
    p50s = {i: p50 for i, s in enumerate(steps) if (p50 := s["latency_ms"]["p50"]) is not None}
    measured = [steps[i] for i in p50s]
    # The load of each step: its users, or its target rate (open loop); the scalability
    # law models concurrency, so it is fitted to closed-loop steps only.
    users = [level_of(s) for s in measured]
    throughput = [s["throughput_rps"] for s in measured]
    knee = find_knee(users, throughput, list(p50s.values()))
    closed = all(s.get("kind", "users") == "users" for s in measured)
    scalability = fit_usl(users, throughput) if closed else None
    knee_dict = knee.as_dict() if knee else None
    if knee is not None and knee_dict is not None and knee.ci_low <= min(users):
        # Past the knee already at the lightest step (its interval reaches that step): it
        # lies at or below it.
        knee_dict["at_lowest_load"] = True
    return {"knee": knee_dict, "scalability": scalability.as_dict() if scalability else None}


def load_changes(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The steps begun by a change of load asked while the run went (run.json's
    `manual`): `step`, `users` (or `rate`, open loop), `by` and `at`."""
    return [
        {
            "step": s["step"],
            **({"rate": s["level"]} if s.get("kind") == "rate" else {"users": s["users"]}),
            **s["manual"],
        }
        for s in run.get("steps") or []
        if isinstance(s, dict) and isinstance(s.get("manual"), dict)
    ]


def _sla(data: RunInput) -> dict[str, Any] | None:
    """The plan's [sla] checked on the steady parts of the run, once, for verdict.json
    (`analyze/sla_record.py`); None when the plan has none."""
    objectives = data.plan.sla
    if objectives is None or objectives.is_empty():
        return None
    if not data.view.has(files.REQUESTS):
        return SlaOutcome(problem=f"{files.REQUESTS} not found").to_json()
    windows = usable_windows(data.run)
    digest = data.view.digest(data.requests, windows, slas.over_ms(objectives), extent=True)
    return SlaOutcome(slas.evaluate(objectives, digest, data.run)).to_json()


def _endpoint(data: RunInput) -> str:
    # Requests of several kinds are not told apart in requests.parquet: one estimate for all.
    names = set(data.endpoint_names())
    return names.pop() if len(names) == 1 else "all requests"


def stack_context(data: RunInput, steps: list[StepJson]) -> Context:
    """What the verdict's rules know of the run's stack: its tiers and calls, its plan, its
    host, and what the steps show of its pools and named requests."""
    order, calls = data.tier_graph()
    stack = Context(
        order=order,
        calls=calls,
        workers={c.name: c.workers for c in data.plan.component if c.workers},
        cpu_count=int(data.run.get("host", {}).get("cpu_count") or 1),
        generator_threads=int(data.run.get("engine", {}).get("threads") or 1),
        min_latency_ms=min_latency(data.digest()),
        endpoint=_endpoint(data),
        roles={c.name: c.role for c in data.plan.component},
        generators=list(data.run.get("generators") or []),
        timed_by=data.timed_by,
    )
    return replace(stack, pools=pool_sizes(steps, stack), endpoints=endpoint_table(data))


@private_files()
def analyze(run_dir: RunView | files.RunFolder | Path) -> dict[str, Any]:
    """Computes the verdict of a run folder and writes `verdict.json` into it."""
    view = as_view(run_dir)
    data = read_input(view)
    steps = step_table(data, main_thread_marks(view), lock_wait_marks(view))
    ctx = stack_context(data, steps)
    endpoints = ctx.endpoints
    decision = decide(steps, ctx)
    curve = _curve(steps)
    verdict: VerdictJson = {
        "schema": SCHEMA,
        "run_id": data.run["run_id"],
        "interrupted": bool(data.run.get("interrupted")),
        "tiers": ctx.order,
        "pools": {name: p.as_json() for name, p in ctx.pools.items()},
        "calls": ctx.calls,
        # Each component's utilisation, beside the numbers it is read from.
        "steps": [{**step, "usage": usage_table(step, ctx)} for step in steps],
        "bottleneck": decision["bottleneck"],
        "headline": decision["headline"],
        "generator": decision["generator"],
        "findings": decision["findings"],
        "workers_estimate": decision.get("workers_estimate", []),
        "knee": curve["knee"],
        "scalability": curve["scalability"],
        "sla": _sla(data),
    }
    if "unattributed" in decision:
        verdict["unattributed"] = decision["unattributed"]
    if data.run.get("partial"):
        # Rebuilt after the run was killed (recover.py): what the folder lacked.
        verdict["partial"] = True
        verdict["missing"] = data.run["recovered"]["missing"]
    bottleneck = verdict["bottleneck"]
    if bottleneck and (found := predict(bottleneck, steps, ctx)):
        bottleneck["prediction"] = found.as_json()
    if aborted := data.run.get("aborted"):
        verdict["aborted"] = aborted["reason"]
    if changes := load_changes(data.run):
        verdict["load_changes"] = changes
    if short := load_short(ctx.generators):
        verdict["load_short"] = short
    if reasons := data.run.get("error_reasons"):
        verdict["error_reasons"] = reasons
    if endpoints:
        verdict["endpoints"] = endpoints
        verdict["workers_estimate"] = workers_estimates(endpoints)
    if (profile := read_profile(view)) is not None:
        add_hot_code(verdict, profile, ctx.cpu_count)
    # The database's locks or statements, sampled from inside (collect/database/).
    add_database(verdict, view)
    add_redis(verdict, view)
    clean = cast(dict[str, Any], _clean(verdict))
    view.folder.write_verdict(cast(VerdictJson, clean))
    return clean
