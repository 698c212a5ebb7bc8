"""The report's charts over time from a scan: time buckets of a round width (at most
TIME_POINTS), their percentiles, and a sample bounded and the same on every draw."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pinchpoint.report import time_charts
from pinchpoint.report.over_time import (
    TIME_POINTS,
    Tails,
    Timeline,
    bucket_width,
    sample_requests,
)


def _requests(n: int = 50_000) -> pl.DataFrame:
    rng = np.random.default_rng(2)
    step = np.repeat(np.arange(5), n // 5).astype(np.uint32)
    latency = rng.integers(1_000, 3_000, n)
    latency[step == 4] *= 10  # the last step is ten times slower
    error = np.where(rng.random(n) < 0.001, "timeout", None)
    return pl.DataFrame(
        {
            "req_id": np.arange(n, dtype=np.uint64),
            "step": step,
            "users": (step + 1).astype(np.uint32) * 2,
            "start_us": np.arange(n, dtype=np.int64) * 200,  # 10 s
            "latency_us": latency.astype(np.int64),
            "status": np.where(error == None, 200, 0).astype(np.uint16),  # noqa: E711
            "error": error.tolist(),
        }
    )


def test_bucket_width_is_round_and_bounded() -> None:
    assert bucket_width(None) == 1.0
    assert bucket_width(12.5) == 1.0
    assert bucket_width(1_000) == 1.0
    assert bucket_width(1_001) == 2.0
    assert bucket_width(86_400) == 120.0
    for span in (3_000.0, 50_000.0, 10**7):
        assert span / bucket_width(span) <= TIME_POINTS


def test_the_sample_of_a_scan_is_the_tables_and_the_same_each_time(tmp_path: Path) -> None:
    requests = _requests()
    requests.write_parquet(tmp_path / "r.parquet", row_group_size=7_000)
    scan = pl.scan_parquet(tmp_path / "r.parquet")
    shown, note = sample_requests(requests, limit=2_000)
    again, _ = sample_requests(scan, limit=2_000)
    assert shown.height == 2_000 and note.startswith("2,000 of 50,000 requests")
    assert again.equals(shown)
    # Every error and the slowest of each step first.
    assert shown["error"].drop_nulls().len() == requests["error"].drop_nulls().len()
    slowest = requests.group_by("step").agg(pl.col("latency_us").max())
    kept = shown.group_by("step").agg(pl.col("latency_us").max())
    assert kept.sort("step").equals(slowest.sort("step"))


def test_time_buckets_give_each_seconds_percentiles() -> None:
    requests = _requests()
    timeline = Timeline.of(requests, 0.0, 1.0)
    lines = timeline.lines((50, 99))
    assert lines["t"].to_list() == [i + 0.5 for i in range(10)]
    ok = requests.filter(pl.col("error").is_null())
    for second in (0, 9):
        part = ok.filter((pl.col("start_us") // 1_000_000) == second)["latency_us"].to_numpy()
        row = lines.filter(pl.col("t") == second + 0.5)
        assert row["n"].item() == part.size
        assert row["p50"].item() == pytest.approx(np.percentile(part, 50) / 1000, rel=0.01)
        assert row["p99"].item() == pytest.approx(np.percentile(part, 99) / 1000, rel=0.01)
    tails = Tails.of(timeline.rows)
    assert sorted(tails.from_us) == [0, 1, 2, 3, 4]
    assert tails.total == requests.height


def test_latency_over_time_draws_percentile_lines_over_the_sample() -> None:
    fig = time_charts.latency_over_time(_requests(), 0.0, [], (0.0, 10.0))
    assert fig is not None
    names = [t["name"] for t in fig.data]
    assert names == ["responses", "errors and 5xx", "p50 per 1 s", "p99 per 1 s"]
    assert sum(len(t["x"]) for t in fig.data[:2]) == time_charts.MAX_POINTS
    assert "per 1 s" in fig.layout["title"]["text"]
