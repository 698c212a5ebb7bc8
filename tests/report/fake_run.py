"""Builds a synthetic but realistic run folder: nginx → gunicorn (4 workers) → app, 5 steps.

gunicorn's pool fills at 8 users: its queue time grows while every tier's own time stays
flat, which is the shape the reports must show."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

RUN_ID = "20261122-101500-a1b2"
START_S = datetime(2026, 11, 22, 10, 15, 0, tzinfo=UTC).timestamp()
STEP_S = 2.0
TIERS = ["nginx", "gunicorn", "app"]
HEADLINE = "Bottleneck: gunicorn (worker_pool) from 8 users"
PLAN_TEXT = """\
# A plan with markup in it: <script>alert("plan")</script> & friends
[load]
url = "http://127.0.0.1:8080/sys_perf_check?ms=10"
users = { from = 2, to = 32, factor = 2 }
step_seconds = 2

[[component]]
name = "nginx"
log = "/var/log/nginx/access.log"
"""

# users, requests, errors, rps, client p50/p95/p99, gunicorn queue p50/p95 (ms)
STEPS = [
    (2, 381, 0, 190.5, 10.5, 11.9, 13.0, 0.04, 0.09),
    (4, 756, 0, 378.2, 10.6, 12.1, 13.4, 0.3, 1.2),
    (8, 762, 0, 381.0, 21.0, 24.3, 26.8, 10.5, 13.1),
    (16, 761, 0, 380.4, 42.1, 47.9, 52.2, 31.4, 36.0),
    (32, 754, 11, 376.9, 84.3, 95.6, 1002.4, 73.6, 84.2),
]
APP_P50, APP_P95 = 10.1, 11.4


def make_verdict() -> dict[str, Any]:
    steps = []
    for i, (users, n, errors, rps, p50, p95, p99, q50, q95) in enumerate(STEPS):
        gunicorn = (APP_P50 + 0.1, APP_P95 + 0.2)
        nginx = (round(gunicorn[0] + q50 + 0.1, 1), round(gunicorn[1] + q95 + 0.2, 1))
        steps.append(
            {
                "step": i,
                "users": users,
                "duration_s": STEP_S,
                "requests": n,
                "errors": errors,
                "error_rate": errors / n,
                "throughput_rps": rps,
                "latency_ms": {"p50": p50, "p95": p95, "p99": p99},
                "tiers": {
                    "nginx": {
                        "count": n - errors,
                        "p50_ms": nginx[0],
                        "p95_ms": nginx[1],
                        "self_p50_ms": 0.1,
                        "self_p95_ms": 0.2,
                    },
                    "gunicorn": {
                        "count": n - errors,
                        "p50_ms": round(gunicorn[0], 1),
                        "p95_ms": round(gunicorn[1], 1),
                        "self_p50_ms": 0.1,
                        "self_p95_ms": 0.2,
                        "queue_p50_ms": q50,
                        "queue_p95_ms": q95,
                        "concurrency": min(users, 4) - 0.01,
                    },
                    "app": {
                        "count": n - errors,
                        "p50_ms": APP_P50,
                        "p95_ms": APP_P95,
                        "self_p50_ms": APP_P50,
                        "self_p95_ms": APP_P95,
                    },
                },
                "resources": {
                    "host": {"cpu_cores": 0.9 + 0.2 * i},
                    "gunicorn": {"cpu_cores": 0.5 + 0.1 * i, "processes": 5},
                    "nginx": {"cpu_cores": 0.1, "processes": 2},
                    "generator": {"cpu_cores": 0.2},
                },
            }
        )
    return {
        "schema": "pinchpoint.verdict/1",
        "run_id": RUN_ID,
        "tiers": list(TIERS),
        "calls": {"nginx": ["gunicorn"], "gunicorn": ["app"]},
        "steps": steps,
        "bottleneck": {
            "component": "gunicorn",
            "resource": "worker_pool",
            "starts_at_users": 8,
            "summary": "gunicorn's worker pool is full: requests wait for a free worker.",
            "evidence": [
                "queue time p50 grows from 0.04 ms at 2 users to 73.6 ms at 32 users",
                "app time p50 stays at 10.1 ms from 2 to 32 users",
                "throughput stops growing at 381.0 req/s from 8 users",
            ],
        },
        "headline": HEADLINE,
        "generator": {"saturated": False, "cpu_cores_max": 0.31},
        # What pinchpoint.analyze fits to STEPS.
        "knee": {
            "load": 4.05,
            "ci_low": 3.96,
            "ci_high": 4.15,
            "confidence": 0.98,
            "throughput_at_knee": 383.0,
            "method": "two-segment fit of throughput through the origin",
        },
        "scalability": {
            "lambda": 145.46,
            "sigma": 0.2514,
            "kappa": 0.004049,
            "peak_throughput": 406.9,
            "peak_load": 13.6,
            "r_squared": 0.80,
            "rms_relative_error": 0.12,
        },
    }


def _requests_table(rng: np.random.Generator) -> pa.Table:
    cols: dict[str, list[Any]] = {k: [] for k in ("step", "users", "start", "lat", "err")}
    for i, (users, n, errors, _rps, p50, *_rest) in enumerate(STEPS):
        t0 = (START_S + i * STEP_S) * 1e6
        starts = np.sort(rng.uniform(t0, t0 + STEP_S * 1e6, n)).astype(np.int64)
        latency = (rng.lognormal(np.log(p50 * 1000), 0.08, n)).astype(np.int64)
        failed = rng.choice(n, errors, replace=False)
        latency[failed] = 1_000_000
        err: list[str | None] = [None] * n
        for j in failed:
            err[j] = "timeout"
        cols["step"] += [i] * n
        cols["users"] += [users] * n
        cols["start"] += starts.tolist()
        cols["lat"] += latency.tolist()
        cols["err"] += err
    n = len(cols["step"])
    return pa.table(
        {
            "req_id": pa.array(np.arange(1, n + 1), pa.uint64()),
            "step": pa.array(cols["step"], pa.uint32()),
            "users": pa.array(cols["users"], pa.uint32()),
            "start_us": pa.array(cols["start"], pa.int64()),
            "latency_us": pa.array(cols["lat"], pa.int64()),
            "status": pa.array([0 if e else 200 for e in cols["err"]], pa.uint16()),
            "error": pa.array(cols["err"], pa.string()),
            "bytes": pa.array([0 if e else 2 for e in cols["err"]], pa.uint64()),
        }
    )


def _tiers_table(requests: pa.Table) -> pa.Table:
    rows: dict[str, list[Any]] = {k: [] for k in ("c", "u", "r", "ts", "d", "up", "s")}
    for req in requests.filter(pc.is_null(requests["error"])).to_pylist():
        end = (req["start_us"] + req["latency_us"]) / 1e6
        total = req["latency_us"] / 1e6
        app = min(total, APP_P50 / 1000)
        for component, duration, upstream in (
            ("nginx", total - 0.0001, total - 0.0002),
            ("gunicorn", app + 0.0001, None),
            ("app", app, None),
        ):
            rows["c"].append(component)
            rows["u"].append(req["users"])
            rows["r"].append(req["req_id"])
            rows["ts"].append(end)
            rows["d"].append(duration)
            rows["up"].append(upstream)
            rows["s"].append(200)
    return pa.table(
        {
            "component": pa.array(rows["c"], pa.string()),
            "users": pa.array(rows["u"], pa.uint32()),
            "req_id": pa.array(rows["r"], pa.uint64()),
            "ts": pa.array(rows["ts"], pa.float64()),
            "duration_s": pa.array(rows["d"], pa.float64()),
            "upstream_s": pa.array(rows["up"], pa.float64()),
            "status": pa.array(rows["s"], pa.int32()),
        }
    )


def _resources_table(rng: np.random.Generator) -> pa.Table:
    rows: dict[str, list[Any]] = {k: [] for k in ("ts", "c", "cpu", "rss", "p")}
    total_s = len(STEPS) * STEP_S
    for ts in np.arange(START_S - 0.5, START_S + total_s + 0.5, 0.25):
        busy = min(1.0, max(0.0, (ts - START_S) / total_s))
        for component, cpu, rss, procs in (
            ("nginx", 0.05 + 0.1 * busy, 12 * 2**20, 2),
            ("gunicorn", 0.2 + 3.5 * busy, 180 * 2**20, 5),
            ("host", 0.5 + 4.5 * busy, 6 * 2**30, 8),
            ("generator", 0.1 + 0.2 * busy, 40 * 2**20, 1),
        ):
            rows["ts"].append(float(ts))
            rows["c"].append(component)
            rows["cpu"].append(cpu + rng.normal(0, 0.02))
            rows["rss"].append(int(rss * (1 + 0.1 * busy)))
            rows["p"].append(procs)
    return pa.table(
        {
            "ts": pa.array(rows["ts"], pa.float64()),
            "component": pa.array(rows["c"], pa.string()),
            "cpu_cores": pa.array(rows["cpu"], pa.float64()),
            "rss_bytes": pa.array(rows["rss"], pa.int64()),
            "processes": pa.array(rows["p"], pa.int32()),
        }
    )


def write_run(run_dir: Path, verdict: dict[str, Any] | None = None) -> Path:
    """Write a complete run folder into `run_dir`."""
    run_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    requests = _requests_table(rng)
    pq.write_table(requests, run_dir / "requests.parquet")
    pq.write_table(_tiers_table(requests), run_dir / "tiers.parquet")
    pq.write_table(_resources_table(rng), run_dir / "resources.parquet")
    (run_dir / "verdict.json").write_text(json.dumps(verdict or make_verdict(), indent=2))
    (run_dir / "plan.toml").write_text(PLAN_TEXT)
    # The shape pipeline.py writes.
    run = {
        "run_id": RUN_ID,
        "started": START_S,
        "ended": START_S + len(STEPS) * STEP_S + 0.4,
        "interrupted": False,
        "warmup_s": 0.0,
        "steps": [
            {
                "step": i,
                "users": users,
                "start": START_S + i * STEP_S,
                "end": START_S + (i + 1) * STEP_S,
            }
            for i, (users, *_rest) in enumerate(STEPS)
        ],
        "records": requests.num_rows,
        "records_error": None,
        "engine": {"threads": 4},
        "host": {
            "hostname": "bench-1",
            "cpu_count": 8,
            "platform": "Linux-6.1",
            "python": "3.11.9",
        },
        "log_marks": {"nginx": {"path": "/var/log/nginx/access.log", "offset": 4096}},
        "load_steps": [{"step": i, "users": users} for i, (users, *_rest) in enumerate(STEPS)],
    }
    (run_dir / "run.json").write_text(json.dumps(run, indent=2))
    return run_dir
