"""Tier records above the bound are a sample of the requests: every record of a kept
request, the same requests in every table, counts scaled back and times close to those of
all the records."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pinchpoint.analyze.steps import tier_step
from pinchpoint.rundir import files, tier_sample
from pinchpoint.rundir.tier_sample import in_sample, read_tiers

N = 40_000  # requests, each with an nginx and an app record
ORDER = ["nginx", "app"]
CALLS = {"nginx": ["app"], "app": []}


def _tiers(seed: int = 3) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    ids = np.arange(N, dtype=np.uint64) * 7 + 11  # ids need not be dense
    app = rng.lognormal(np.log(0.020), 0.5, N)
    queue = rng.exponential(0.004, N)
    status = np.where(rng.random(N) < 0.03, 502, 200).astype(np.int32)
    ts = 1.8e9 + np.linspace(0, 100, N)

    def tier(name: str, duration: np.ndarray, upstream: np.ndarray | None) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "component": [name] * N,
                "users": np.full(N, 4, np.uint32),
                "req_id": ids,
                "ts": ts,
                "duration_s": duration,
                "upstream_s": upstream,
                "status": status,
            },
            schema_overrides={"upstream_s": pl.Float64},
        )

    return pl.concat([tier("nginx", app + queue + 0.0005, app + queue), tier("app", app, None)])


@pytest.fixture
def bound(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(tier_sample, "WHOLE_ROWS", 8_000)
    return 8_000


def test_records_up_to_the_bound_are_read_whole(tmp_path: Path) -> None:
    tiers = _tiers()
    tiers.write_parquet(tmp_path / files.TIERS)
    got = read_tiers(files.RunFolder(tmp_path))
    assert got.share == 1.0 and got.total == 2 * N
    assert got.frame.equals(tiers)


def test_above_the_bound_whole_requests_are_kept_the_same_each_time(
    tmp_path: Path, bound: int
) -> None:
    tiers = _tiers()
    tiers.write_parquet(tmp_path / files.TIERS, row_group_size=5_000)
    got = read_tiers(files.RunFolder(tmp_path))
    assert got.total == 2 * N and got.share == pytest.approx(bound / (2 * N))
    assert 0.85 * bound <= got.frame.height <= 1.15 * bound
    per_request = got.frame.group_by("req_id").agg(pl.col("component").sort())
    assert per_request["component"].to_list() == [["app", "nginx"]] * per_request.height
    assert read_tiers(files.RunFolder(tmp_path)).frame.equals(got.frame)
    # The requests table draws the same requests by their ids.
    requests = pl.DataFrame({"req_id": tiers["req_id"].unique()})
    drawn = requests.filter(in_sample(got.share, requests.columns))["req_id"]
    assert set(drawn.to_list()) == set(got.frame["req_id"].to_list())


def test_a_steps_numbers_from_the_sample_are_close_to_those_of_every_record(
    tmp_path: Path, bound: int
) -> None:
    tiers = _tiers()
    tiers.write_parquet(tmp_path / files.TIERS)
    got = read_tiers(files.RunFolder(tmp_path))
    every = tier_step(tiers, tiers["req_id"], 4, ORDER, CALLS, 400.0)
    sampled = tier_step(got.frame, got.frame["req_id"], 4, ORDER, CALLS, 400.0, got.share)
    for name in ORDER:
        whole, part = every[name], sampled[name]
        assert whole["count"] == N
        assert part["count"] == pytest.approx(N, rel=0.08)
        assert part["errors"] == pytest.approx(whole["errors"], rel=0.25)
        for key in ("p50_ms", "p95_ms", "self_p50_ms", "concurrency"):
            assert part[key] == pytest.approx(whole[key], rel=0.05), (name, key)
    assert sampled["app"]["queue_p50_ms"] == pytest.approx(every["app"]["queue_p50_ms"], rel=0.08)
    assert sampled["nginx"]["rejected"] == 0
