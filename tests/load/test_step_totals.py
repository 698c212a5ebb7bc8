"""`pinchpoint load`'s summary is summed from the engine's per-step histograms and counts
(load/step_totals.py), not from the requests read back: it equals the summary worked out
from every record, counts exactly and latencies within the histogram's precision.

A percentile of the histogram is the highest value of the bucket holding the record at
its rank (ceil(q·n), as HdrHistogram counts), the min the lowest of the min's bucket,
the max the highest of the max's; buckets are 1 µs wide up to 2,048 µs and within 0.1%
of the value above."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import numpy as np
import pytest
from load_helpers import http_server

from pinchpoint.load.hdr import PERCENTILES, highest_equivalent
from pinchpoint.load.records_summary import step_summaries
from pinchpoint.load.step_totals import endpoint_totals, totals
from pinchpoint.plan.model import parse_plan
from pinchpoint.rundir.view import RunView
from pinchpoint_lab.serving import serving

RUNS = Path(__file__).resolve().parent.parent / "data" / "runs"


def _exact_at_rank(values: np.ndarray, q: float) -> int:
    """The record at the rank HdrHistogram reads percentile q (of 100) at."""
    ordered = np.sort(values)
    rank = max(math.ceil(q / 100.0 * len(ordered)), 1)
    return int(ordered[rank - 1])


def _assert_latency_of(records: np.ndarray, got: dict | None) -> None:
    """`got` is the latency summary of `records` (µs) within the histogram's buckets."""
    if records.size == 0:
        assert got is None
        return
    assert got is not None
    for q in PERCENTILES:
        assert got[f"p{q:g}"] == highest_equivalent(_exact_at_rank(records, q)), q
    assert got["min"] <= int(records.min()) <= highest_equivalent(got["min"])
    assert got["max"] == highest_equivalent(int(records.max()))
    assert got["mean"] == pytest.approx(float(records.mean()), rel=1e-3)


def _records(run_dir: Path) -> dict[str, np.ndarray]:
    frame = RunView(run_dir).requests
    return {
        "step": frame["step"].to_numpy(),
        "endpoint": frame["endpoint"].to_numpy(),
        "latency": frame["latency_us"].to_numpy().astype(np.int64),
        "status": frame["status"].to_numpy().astype(np.int64),
        "bytes": frame["bytes"].to_numpy().astype(np.int64),
        "answered": frame["error"].is_null().to_numpy(),
        "error": np.array(frame["error"].to_list(), dtype=object),
    }


def _assert_totals_are_the_records(
    whole: dict, endpoints: list[dict], r: dict[str, np.ndarray], names: list[str]
) -> None:
    answered = r["answered"]
    assert whole["requests"] == r["step"].size
    assert whole["responses"] == int(answered.sum())
    assert whole["bytes"] == int(r["bytes"].sum())
    codes, counts = np.unique(r["status"][answered], return_counts=True)
    assert whole["statuses"] == {str(c): int(n) for c, n in zip(codes, counts, strict=True)}
    classes, counts = np.unique(r["error"][~answered].astype(str), return_counts=True)
    assert whole["errors"] == {str(c): int(n) for c, n in zip(classes, counts, strict=True)}
    _assert_latency_of(r["latency"][answered], whole["latency_us"])
    assert [e["request"] for e in endpoints] == names
    for e in endpoints:
        mine = r["endpoint"] == e["endpoint"]
        assert e["requests"] == int(mine.sum())
        assert e["failed"] == int((mine & (~answered | (r["status"] >= 400))).sum())
        _assert_latency_of(r["latency"][mine & answered], e["latency_us"])


@pytest.mark.parametrize("run", ["journey-checkout-uwsgi", "journey-search-db-sync", "db-scan-app"])
def test_totals_of_a_recorded_runs_histograms_are_its_records(run: str) -> None:
    """The recorded run's per-step histograms are made from its records as the engine
    makes them (records_summary.py, checked byte for byte against the engine)."""
    plan = parse_plan((RUNS / run / "plan.toml").read_text(), run)
    view = RunView(RUNS / run)
    steps = step_summaries(view.requests.to_arrow(), plan.load.levels())
    records = _records(RUNS / run)
    assert sum(s["requests"] for s in steps) == records["step"].size > 1000
    names = plan.endpoints()
    _assert_totals_are_the_records(totals(steps), endpoint_totals(steps, names), records, names)


def test_totals_of_no_steps_are_zero_and_no_latency() -> None:
    assert totals([]) == {
        "requests": 0,
        "responses": 0,
        "bytes": 0,
        "statuses": {},
        "errors": {},
        "latency_us": None,
    }
    assert endpoint_totals([], ["GET /"]) == [
        {"endpoint": 0, "request": "GET /", "requests": 0, "failed": 0, "latency_us": None}
    ]


class _Mixed(BaseHTTPRequestHandler):
    """200 on /ok, 503 on /bad, and /slow answered after the plan's timeout."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.path.startswith("/slow"):
            time.sleep(0.25)
        body = b"fine" if self.path.startswith("/ok") else b"no"
        self.send_response(200 if self.path.startswith("/ok") else 503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def mixed_server() -> Iterator[int]:
    with serving(_Mixed) as port:
        yield port


def _load(*args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "pinchpoint", "load", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_the_summary_of_a_real_load_is_its_records(mixed_server: int, tmp_path: Path) -> None:
    """Two steps, three requests: answers 200 and 503, and timeouts."""
    plan = tmp_path / "plan.toml"
    plan.write_text(
        f'[target]\nurl = "http://127.0.0.1:{mixed_server}"\n'
        '[load]\nlower = 1\nupper = 2\nstep = 1\nduration = "0.5s"\nwarmup = 0\n'
        'timeout = "0.1s"\nthreads = 1\n'
        '[[request]]\npath = "/ok"\nweight = 3\n'
        '[[request]]\npath = "/bad"\n'
        '[[request]]\npath = "/slow"\n'
    )
    summary = _load(str(plan), "--out", str(tmp_path / "run"))
    records = _records(tmp_path / "run")
    assert set(summary["statuses"]) == {"200", "503"}
    assert set(summary["errors"]) == {"timeout"}
    names = ["GET /ok", "GET /bad", "GET /slow"]
    _assert_totals_are_the_records(summary, summary["endpoints"], records, names)
    assert [s["requests"] for s in summary["steps"]] == [
        int((records["step"] == i).sum()) for i in (0, 1)
    ]
    for i, step in enumerate(summary["steps"]):
        mine = (records["step"] == i) & records["answered"]
        _assert_latency_of(records["latency"][mine], step["latency_us"])


def test_the_send_lag_of_an_open_loop_is_its_records(tmp_path: Path) -> None:
    with http_server() as (port, _):
        summary = _load(
            f"http://127.0.0.1:{port}/", "--rate", "400", "-d", "0.5", "--out", str(tmp_path)
        )
    frame = RunView(tmp_path).requests
    lag = (frame["start_us"] - frame["intended_us"]).to_numpy().astype(np.int64)
    assert summary["requests"] == lag.size == 200
    got = summary["generator"]["send_lag_us"]
    # Lags under 1 µs count as 1 µs, the histogram's lowest value.
    clamped = np.maximum(lag, 1)
    for q in (50, 99):
        assert got[f"p{q}"] == highest_equivalent(_exact_at_rank(clamped, q))
    assert got["max"] == int(lag.max())
