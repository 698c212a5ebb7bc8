"""Per-step numbers: what the client saw, each tier's time, self time and queue time,
and the resources of each component, over the steady part of every step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import polars as pl

from pinchpoint.analyze.client import (
    PERCENTILES,
    answered,
    client_numbers,
    client_step,
    min_latency_ms,
)
from pinchpoint.analyze.context import logged_callees
from pinchpoint.analyze.run_input import RunInput
from pinchpoint.rundir.shapes import StepJson
from pinchpoint.rundir.steady import Window, in_window, steady_windows

__all__ = [
    "Window",
    "answered",
    "client_step",
    "in_window",
    "min_latency_ms",
    "steady_windows",
]

# What a component's samples from inside add to its resources, per step number and
# component: a Redis's `main_thread_cores`, a database's `lock_waits_inside`.
InsideMarks = dict[int, dict[str, dict[str, float]]]

# Below this share of a tier's records joined to its callee's by request id, self time
# is taken as a difference of medians instead of per request.
MIN_JOINED_SHARE = 0.5


def _pct(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if values.size else None


def _wide(tiers: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """One row per request id, with each tier's duration and upstream time."""
    frames = None
    for name in names:
        t = tiers.filter((pl.col("component") == name) & pl.col("req_id").is_not_null()).select(
            "req_id",
            pl.col("duration_s").alias(f"d:{name}"),
            pl.col("upstream_s").alias(f"u:{name}"),
        )
        frames = t if frames is None else frames.join(t, on="req_id", how="full", coalesce=True)
    return frames if frames is not None else pl.DataFrame()


def tier_step(
    tiers: pl.DataFrame,
    req_ids: pl.Series,
    users: int | None,
    order: list[str],
    calls: dict[str, list[str]],
    throughput: float,
    share: float = 1.0,
) -> dict[str, dict[str, Any]]:
    """Each tier's time, self time and queue time in one step. Records without a request
    id join the step by its users; open-loop steps (users None) take none of them. `share`:
    of the requests the records are a sample of (their counts are scaled by it)."""
    tagged = per_request(tiers.filter(pl.col("req_id").is_in(req_ids.implode())))
    untagged = (
        tiers.clear()
        if users is None
        else tiers.filter(pl.col("req_id").is_null() & (pl.col("users") == users))
    )
    part = pl.concat([tagged, untagged]) if untagged.height else tagged
    wide = _wide(tagged, order)
    out: dict[str, dict[str, Any]] = {}
    for name in order:
        own = part.filter(pl.col("component") == name)
        if own.height == 0:
            continue
        d = own["duration_s"].to_numpy()
        entry = {
            "count": round(own.height / share),
            **{f"p{q:g}_ms": _pct(d * 1000, q) for q in PERCENTILES},
            "mean_ms": float(d.mean() * 1000),
            "concurrency": throughput * float(d.mean()),
            **_statuses(own, bool(calls.get(name)), share),
        }
        logged = set(part["component"].unique().to_list())
        entry.update(_self_time(own, wide, name, logged_callees(name, calls, logged), part))
        entry.update(_logged_queue(own))
        out[name] = entry
    for caller in order:
        callees = calls.get(caller, [])
        # The caller's wait is the callee's time and queue only when it calls one tier: a
        # fan-out's wait is the union of its calls, no one callee's.
        if len(callees) == 1 and callees[0] in out and caller in out:
            out[callees[0]].update(_queue_time(wide, caller, callees[0]))
    return out


def _logged_queue(own: pl.DataFrame) -> dict[str, Any]:
    """The queue time the tier logged itself (HAProxy Tw), where it logs one."""
    if "queue_s" not in own.columns:
        return {}
    q = own["queue_s"].drop_nulls().to_numpy() * 1000
    if q.size == 0:
        return {}
    return {"logged_queue_p50_ms": _pct(q, 50), "logged_queue_p95_ms": _pct(q, 95)}


def per_request(tagged: pl.DataFrame) -> pl.DataFrame:
    """One record per component and request: a tier that logs several lines for one request
    (a database, one per statement) counts the sum of their times."""
    if tagged.height == 0:
        return tagged
    upstream = pl.col("upstream_s")
    return (
        tagged.group_by("component", "req_id", maintain_order=True)
        .agg(
            pl.col("users").first(),
            pl.col("ts").max(),
            pl.col("duration_s").sum(),
            pl.when(upstream.is_null().all())
            .then(None)
            .otherwise(upstream.sum())
            .alias("upstream_s"),
            pl.col("status").max(),
            *([pl.col("queue_s").max()] if "queue_s" in tagged.columns else []),
            *(pl.col(c).first() for c in ("span_kind", "parent") if c in tagged.columns),
        )
        .select(tagged.columns)
        .cast(tagged.schema)
    )


def _statuses(own: pl.DataFrame, calls_others: bool, share: float = 1.0) -> dict[str, Any]:
    """Server errors the tier logged and, for a tier that calls others, how many of them it
    answered itself without waiting on what it calls (a proxy refusing: 503 of limit_conn)."""
    if "status" not in own.columns:
        return {}
    failed = own.filter((pl.col("status") >= 500) | (pl.col("status") == 429))
    out = {"errors": round(failed.height / share)}
    if calls_others:
        out["rejected"] = round(failed.filter(pl.col("upstream_s").is_null()).height / share)
    return out


def _self_time(
    own: pl.DataFrame, wide: pl.DataFrame, name: str, callees: list[str], part: pl.DataFrame
) -> dict[str, Any]:
    d = own["duration_s"].to_numpy()
    up = own["upstream_s"].to_numpy() if "upstream_s" in own.columns else np.array([])
    if not callees:
        selfs = d
    elif up.size and not np.isnan(up.astype(float)).all():
        # The tier logs how long it waited on what it calls (nginx's upstream time).
        up = up.astype(float)
        mask = ~np.isnan(up)
        selfs = d[mask] - up[mask]
    else:
        cols = [f"d:{c}" for c in callees if f"d:{c}" in wide.columns]
        joined = (
            wide.drop_nulls([f"d:{name}", *cols])
            if cols and f"d:{name}" in wide.columns
            else pl.DataFrame()
        )
        if joined.height >= MIN_JOINED_SHARE * own.height and joined.height:
            selfs = joined[f"d:{name}"].to_numpy() - sum(joined[c].to_numpy() for c in cols)
        else:
            callee_p50 = sum(
                _pct(part.filter(pl.col("component") == c)["duration_s"].to_numpy(), 50) or 0.0
                for c in callees
            )
            p50 = _pct(d, 50) or 0.0
            p95 = _pct(d, 95) or 0.0
            return {
                "self_p50_ms": (p50 - callee_p50) * 1000,
                "self_p95_ms": (p95 - callee_p50) * 1000,
                "self_by": "medians",
            }
    return {
        **{f"self_p{q:g}_ms": _pct(selfs * 1000, q) for q in PERCENTILES},
        "self_by": "request",
    }


def _queue_time(wide: pl.DataFrame, caller: str, callee: str) -> dict[str, Any]:
    """Time the caller waited on the callee beyond the callee's own time: the callee's
    accept queue, which the callee cannot see in its own log."""
    need = [f"u:{caller}", f"d:{callee}"]
    if not all(c in wide.columns for c in need):
        return {}
    joined = wide.drop_nulls(need)
    if joined.height == 0:
        return {}
    q = (joined[f"u:{caller}"].to_numpy() - joined[f"d:{callee}"].to_numpy()) * 1000
    return {
        "queue_p50_ms": _pct(q, 50),
        "queue_p95_ms": _pct(q, 95),
        "queue_mean_ms": float(q.mean()),
    }


def resource_step(resources: pl.DataFrame, w: Window) -> dict[str, dict[str, Any]]:
    if resources.height == 0:
        return {}
    part = resources.filter((pl.col("ts") >= w.start) & (pl.col("ts") <= w.end))
    if part.height == 0:
        # A step shorter than the sampling interval: take the nearest samples after it.
        part = resources.filter(pl.col("ts") >= w.start).sort("ts").group_by("component").head(1)
    out = {}
    # By name: a group_by's order changes from one run to the next.
    for name, frame in sorted(part.group_by("component"), key=lambda group: str(group[0][0])):
        out[str(name[0])] = {
            # Rows of a Prometheus series may lack these: null, or 0 for the counts.
            "cpu_cores": _or(frame["cpu_cores"].mean(), float, None),
            "rss_bytes": _or(frame["rss_bytes"].max(), int, 0),
            "processes": _or(frame["processes"].median(), int, 0),
            **_quota(frame),
            **_lock_waits(frame),
            **_pressure(frame),
            **_io_and_sockets(frame),
        }
    return out


def _or(value: Any, cast: Callable[[Any], Any], default: Any) -> Any:
    return cast(value) if value is not None else default


def _measured(frame: pl.DataFrame, column: str) -> pl.Series | None:
    if column not in frame.columns:
        return None
    values = frame[column].drop_nulls()
    return values if values.len() else None


def _quota(frame: pl.DataFrame) -> dict[str, Any]:
    """The cgroup CPU quota over the step and the share of its periods that were throttled."""
    quota = _measured(frame, "cpu_quota_cores")
    if quota is None:
        return {}
    periods = int(frame["cpu_periods"].sum())
    return {
        "cpu_quota_cores": float(cast(float, quota.max())),
        "cpu_throttled_share": int(frame["cpu_throttled"].sum()) / periods if periods else 0.0,
        "cpu_throttled_s": float(frame["cpu_throttled_s"].sum()),
    }


def _pressure(frame: pl.DataFrame) -> dict[str, Any]:
    """Mean pressure-stall shares and run queue over the step, where the host gave them."""
    out = {}
    for column in ("cpu_pressure", "memory_pressure", "io_pressure", "run_queue"):
        values = _measured(frame, column)
        if values is not None:
            out[column] = float(cast(float, values.mean()))
    return out


# Step means of these columns, where measured (host: disks and network; components: their
# processes' disk bytes and sockets).
_MEANS = (
    "cpu_wait_cores",
    "cpu_nice_cores",
    "disk_read_bytes_s",
    "disk_write_bytes_s",
    "disk_util",
    "net_rx_bytes_s",
    "net_tx_bytes_s",
    "net_loopback_bytes_s",
    "net_util",
    "net_link_bytes_s",
    "net_link_limit_bytes_s",
    "net_qdisc_backlog_bytes",
    "net_qdisc_drops_s",
    "net_qdisc_overlimits_s",
    "listen_backlog",
    "connections",
)


def _io_and_sockets(frame: pl.DataFrame) -> dict[str, Any]:
    """Disk, network and socket means over the step, the peak accept backlog and what it
    may hold, the memory limit and the threads (median, as processes)."""
    out: dict[str, float | str] = {}
    for column in _MEANS:
        values = _measured(frame, column)
        if values is not None:
            out[column] = float(cast(float, values.mean()))
    backlog = _measured(frame, "listen_backlog")
    if backlog is not None:
        out["listen_backlog_peak"] = int(cast(float, backlog.max()))
    for column in (
        "listen_backlog_limit",
        "memory_limit_bytes",
        "disk_read_limit_bytes_s",
        "disk_write_limit_bytes_s",
    ):
        values = _measured(frame, column)
        if values is not None:
            out[column] = int(cast(float, values.max()))
    link = _measured(frame, "net_link")
    if link is not None:
        out["net_link"] = str(link.mode().sort()[0])
    slots = _measured(frame, "pool_slots")
    if slots is not None:
        out["pool_slots"] = int(cast(float, slots.max()))
    for column in ("pool_kind", "pool_source", "pool_server"):
        values = _measured(frame, column)
        if values is not None:
            out[column] = str(values.mode().sort()[0])
    threads = _measured(frame, "threads")
    if threads is not None:
        out["threads"] = int(cast(float, threads.median()))
    return out


def _lock_waits(frame: pl.DataFrame) -> dict[str, Any]:
    waits = _measured(frame, "lock_waits")
    return {"lock_waits": float(cast(float, waits.mean()))} if waits is not None else {}


def step_table(data: RunInput, *inside: InsideMarks) -> list[StepJson]:
    """Each step's numbers, its resources joined by what `inside` marks of its step."""
    order, calls = data.tier_graph()
    digest = data.digest()
    steps: list[StepJson] = []
    if digest.count() == 0:
        return steps
    for i, w in enumerate(data.windows()):
        client = client_numbers(digest.where(pl.col("window") == i), w)
        tiers = (
            tier_step(
                data.tiers,
                data.traced_ids(i),
                w.users if w.kind == "users" else None,
                order,
                calls,
                client["throughput_rps"],
                data.tier_share,
            )
            if data.tiers.height
            else {}
        )
        resources = _joined(resource_step(data.resources, w), w.step, inside)
        # The frame's numbers, as verdict.json's step.
        steps.append(cast(StepJson, {**client, "tiers": tiers, "resources": resources}))
    return steps


def _joined(
    resources: dict[str, dict[str, Any]], step: int, inside: tuple[InsideMarks, ...]
) -> dict[str, dict[str, Any]]:
    """The step's resources with the marks of each component from inside after its own
    samples: a component sampled only from inside comes after the others."""
    out = dict(resources)
    for marks in inside:
        for component, row in marks.get(step, {}).items():
            out[component] = {**out.get(component, {}), **row}
    return out
