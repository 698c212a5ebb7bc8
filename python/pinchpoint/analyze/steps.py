"""Per-step numbers: what the client saw, each tier's time, self time and queue time,
and the resources of each component, over the steady part of every step."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from pinchpoint.analyze.frames import RunData

# Below this share of a tier's records joined to its callee's by request id, self time
# is taken as a difference of medians instead of per request.
MIN_JOINED_SHARE = 0.5


@dataclass
class Window:
    step: int
    users: int
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return max(self.end - self.start, 1e-9)


def steady_windows(run: dict) -> list[Window]:
    """Each step's window with its warm-up cut off."""
    warmup = float(run.get("warmup_s", 0.0))
    out = []
    for s in run["steps"]:
        start = min(s["start"] + warmup, s["end"])
        out.append(Window(step=s["step"], users=s["users"], start=start, end=s["end"]))
    return out


def _pct(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if values.size else None


def _ms(values: np.ndarray) -> dict[str, float | None]:
    v = values * 1000.0
    return {"p50": _pct(v, 50), "p95": _pct(v, 95), "p99": _pct(v, 99)}


def client_step(requests: pl.DataFrame, w: Window) -> tuple[dict, pl.Series]:
    """The client's view of one step, and the request ids kept in its steady part."""
    lo, hi = int(w.start * 1e6), int(w.end * 1e6)
    part = requests.filter(
        (pl.col("step") == w.step) & (pl.col("start_us") >= lo) & (pl.col("start_us") < hi)
    )
    failed = pl.col("error").is_not_null() | (pl.col("status") >= 400)
    ok = part.filter(~failed)
    errors = part.filter(failed)
    latency = (ok if ok.height else part)["latency_us"].to_numpy() / 1e6
    by_class = {}
    for row in (
        errors.group_by(pl.coalesce(pl.col("error"), pl.col("status").cast(pl.String)))
        .len()
        .iter_rows()
    ):
        by_class[str(row[0])] = int(row[1])
    step = {
        "step": w.step,
        "users": w.users,
        "duration_s": round(w.seconds, 3),
        "requests": part.height,
        "errors": errors.height,
        "error_rate": errors.height / part.height if part.height else 0.0,
        "errors_by_class": by_class,
        "throughput_rps": ok.height / w.seconds,
        "latency_ms": _ms(latency),
        "latency_mean_ms": float(latency.mean() * 1000) if latency.size else None,
    }
    return step, part["req_id"]


def _wide(tiers: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """One row per request id, with each tier's duration and upstream time."""
    frames = None
    for name in names:
        t = (
            tiers.filter((pl.col("component") == name) & pl.col("req_id").is_not_null())
            .group_by("req_id")
            .agg(
                pl.col("duration_s").first().alias(f"d:{name}"),
                pl.col("upstream_s").first().alias(f"u:{name}"),
            )
        )
        frames = t if frames is None else frames.join(t, on="req_id", how="full", coalesce=True)
    return frames if frames is not None else pl.DataFrame()


def tier_step(
    tiers: pl.DataFrame,
    req_ids: pl.Series,
    users: int,
    order: list[str],
    calls: dict[str, list[str]],
    throughput: float,
) -> dict[str, dict]:
    """Each tier's time, self time and queue time in one step."""
    tagged = tiers.filter(pl.col("req_id").is_in(req_ids.implode()))
    untagged = tiers.filter(pl.col("req_id").is_null() & (pl.col("users") == users))
    part = pl.concat([tagged, untagged]) if untagged.height else tagged
    wide = _wide(tagged, order)
    out: dict[str, dict] = {}
    for name in order:
        own = part.filter(pl.col("component") == name)
        if own.height == 0:
            continue
        d = own["duration_s"].to_numpy()
        entry = {
            "count": own.height,
            "p50_ms": _pct(d * 1000, 50),
            "p95_ms": _pct(d * 1000, 95),
            "mean_ms": float(d.mean() * 1000),
            "concurrency": throughput * float(d.mean()),
        }
        entry.update(_self_time(own, wide, name, calls.get(name, []), part))
        out[name] = entry
    for caller in order:
        for callee in calls.get(caller, []):
            if callee in out and caller in out:
                out[callee].update(_queue_time(wide, caller, callee))
    return out


def _self_time(
    own: pl.DataFrame, wide: pl.DataFrame, name: str, callees: list[str], part: pl.DataFrame
) -> dict:
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
        "self_p50_ms": _pct(selfs * 1000, 50),
        "self_p95_ms": _pct(selfs * 1000, 95),
        "self_by": "request",
    }


def _queue_time(wide: pl.DataFrame, caller: str, callee: str) -> dict:
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


def resource_step(resources: pl.DataFrame, w: Window) -> dict[str, dict]:
    if resources.height == 0:
        return {}
    part = resources.filter((pl.col("ts") >= w.start) & (pl.col("ts") <= w.end))
    if part.height == 0:
        # A step shorter than the sampling interval: take the nearest samples after it.
        part = resources.filter(pl.col("ts") >= w.start).sort("ts").group_by("component").head(1)
    out = {}
    for name, frame in part.group_by("component"):
        out[str(name[0])] = {
            "cpu_cores": float(frame["cpu_cores"].mean()),
            "rss_bytes": int(frame["rss_bytes"].max()),
            "processes": int(frame["processes"].median()),
        }
    return out


def step_table(data: RunData) -> list[dict]:
    order = data.plan.tiers()
    calls = {c.name: list(c.calls) for c in data.plan.component}
    steps = []
    for w in steady_windows(data.run):
        if data.requests.height == 0:
            break
        step, req_ids = client_step(data.requests, w)
        if data.tiers.height:
            step["tiers"] = tier_step(
                data.tiers, req_ids, w.users, order, calls, step["throughput_rps"]
            )
        else:
            step["tiers"] = {}
        step["resources"] = resource_step(data.resources, w)
        steps.append(step)
    return steps
