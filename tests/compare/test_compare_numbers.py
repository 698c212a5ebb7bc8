from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from pinchpoint.compare import compare
from pinchpoint.compare.sides import CompareInputError
from pinchpoint.compare.stats import bootstrap_interval, percentile
from pinchpoint.importers import import_results

SAMPLES = Path(__file__).parent.parent / "importers" / "samples"
MakeRun = Callable[..., Path]  # the make_run fixture


@pytest.fixture
def doubled(make_run: MakeRun) -> tuple[Path, Path]:
    """A: the 10000 values 1 … 10000 µs, shuffled; B: each of them doubled."""
    a = np.random.default_rng(1).permutation(np.arange(1, 10_001))
    return make_run("before", a), make_run("after", a * 2)


def test_ladder_of_known_percentiles(doubled: tuple[Path, Path]) -> None:
    result = compare(*doubled, out=None, sla_ms=None)
    expected_a_ms = {
        "p50": 5.0, "p90": 9.0, "p95": 9.5, "p99": 9.9,
        "p99.5": 9.95, "p99.9": 9.99, "p99.95": 9.995, "p99.99": 9.999,
    }  # fmt: skip
    assert [r.label for r in result.ladder] == list(expected_a_ms)
    for row in result.ladder:
        assert row.a_ms == pytest.approx(expected_a_ms[row.label], abs=0.001)
        assert row.b_ms == pytest.approx(2 * expected_a_ms[row.label], abs=0.002)
        assert row.ratio == pytest.approx(2.0)
        assert row.resolved
    assert result.row("p99").a_ms == 9.9
    assert result.a.used == result.b.used == 10_000
    assert result.a.sla_error_rate is None
    assert result.html is None


def test_sla_error_rate_is_exact(doubled: tuple[Path, Path]) -> None:
    result = compare(*doubled, out=None, sla_ms=9.5)
    assert result.sla_ms == 9.5
    assert result.a.sla_error_rate == 0.05  # 9501 … 10000 µs
    assert result.b.sla_error_rate == 0.525  # 2 × 4751 … 2 × 10000 µs
    assert compare(*doubled, out=None, sla_ms=20).b.sla_error_rate == 0.0


def test_doubling_is_significant(doubled: tuple[Path, Path]) -> None:
    result = compare(*doubled, out=None, sla_ms=None)
    assert result.mann_whitney_p < 1e-100
    assert result.distributions_differ
    assert result.p99_change == pytest.approx(1.0)
    assert result.p99_significant
    for interval in result.intervals:
        assert interval.a_low_ms <= interval.a_ms <= interval.a_high_ms
        assert interval.b_low_ms <= interval.b_ms <= interval.b_high_ms
        assert not interval.overlap
    p99 = next(i for i in result.intervals if i.label == "p99")
    assert 9.85 <= p99.a_low_ms < 9.9 < p99.a_high_ms <= 9.95
    assert [i.label for i in result.intervals] == ["p50", "p99", "p99.9"]
    assert result.verdict.startswith("B is slower at p99 by 100.0% (9.9 ms → 19.8 ms), significant")
    assert "Mann–Whitney p < 0.001" in result.verdict


def test_faster_the_other_way(doubled: tuple[Path, Path]) -> None:
    before, after = doubled
    result = compare(after, before, out=None, sla_ms=None)
    assert result.row("p99").ratio == pytest.approx(0.5)
    assert result.verdict.startswith("B is faster at p99 by 50.0% (19.8 ms → 9.9 ms), significant")


def test_same_distribution_is_not_significant(make_run: MakeRun) -> None:
    def draw(seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        return np.round(rng.lognormal(np.log(5000), 0.5, 20_000)).astype(np.int64)

    result = compare(make_run("a1", draw(11)), make_run("a2", draw(12)), out=None, sla_ms=20)
    assert result.mann_whitney_p > 0.05
    assert not result.distributions_differ
    assert not result.p99_significant
    assert all(i.overlap for i in result.intervals)
    assert all(r.ratio == pytest.approx(1.0, abs=0.1) for r in result.ladder[:5])
    assert "not significant: the 95% intervals of p99 overlap" in result.verdict
    assert "the distributions do not differ" in result.verdict


def test_only_successful_requests_count(make_run: MakeRun) -> None:
    a = make_run(
        "mixed",
        [1000, 2000, 3000, 900_000, 5_000_000, 4000],
        status=[200, 302, 200, 500, 0, 200],
        error=[None, None, None, None, "timeout", None],
    )
    b = make_run("clean", [1000, 2000, 3000, 4000])
    result = compare(a, b, out=None, sla_ms=None)
    assert (result.a.requests, result.a.used, result.a.excluded) == (6, 4, 2)
    assert result.a.max_ms == 4.0
    assert result.row("p99").ratio == 1.0
    assert result.verdict.startswith("B matches A at p99")


def test_k6_failed_column_wins(tmp_path: Path) -> None:
    run_dir = import_results(SAMPLES / "k6_results.json", "k6", tmp_path / "runs")
    result = compare(run_dir, run_dir, out=None, sla_ms=None)
    assert (result.a.requests, result.a.used) == (17, 14)


def test_csv_files_are_imported_on_the_fly(tmp_path: Path) -> None:
    before, after = SAMPLES / "latency_before.csv", SAMPLES / "latency_after.csv"
    result = compare(before, after, out=None, sla_ms=1.5)
    assert result.a.label == "latency_before"
    assert result.a.used == result.b.used == 20
    # nearest rank: p50 of 20 values is the 10th smallest
    before_us = sorted(
        round(float(line.split(",")[1]) * 1e6) for line in before.read_text().splitlines()
    )
    assert result.row("p50").a_ms == before_us[9] / 1000
    assert result.row("p99").a_ms == before_us[-1] / 1000
    assert result.a.sla_error_rate == sum(v > 1500 for v in before_us) / 20
    # 20 requests resolve p95 (the 19th) but not p99 and beyond (the slowest)
    assert [r.resolved for r in result.ladder] == [True, True, True] + [False] * 5
    assert not list(tmp_path.iterdir())  # nothing written


def test_mixed_inputs_and_to_dict(make_run: MakeRun, tmp_path: Path) -> None:
    run_dir = make_run("run", [1000, 1200, 1400])
    result = compare(run_dir / "requests.parquet", SAMPLES / "latency_after.csv", None, 2.0)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["a"]["label"] == "run"
    assert data["ladder"][0]["label"] == "p50"
    assert data["verdict"] == result.verdict


def test_inputs_that_cannot_be_compared(make_run: MakeRun, tmp_path: Path) -> None:
    good = make_run("good", [1000, 2000])
    aggregate = import_results(SAMPLES / "wrk2_latency.txt", "wrk2", tmp_path / "runs")
    with pytest.raises(CompareInputError, match="aggregates only"):
        compare(aggregate, good, None, None)
    with pytest.raises(CompareInputError, match="no such file or run folder"):
        compare(tmp_path / "nowhere", good, None, None)
    all_failed = make_run("down", [10, 20], status=[0, 0], error=["connect_refused"] * 2)
    with pytest.raises(CompareInputError, match="no successful requests"):
        compare(good, all_failed, None, None)
    with pytest.raises(ValueError, match="SLA must be a positive"):
        compare(good, good, None, -1)


def test_bootstrap_matches_resampling() -> None:
    rng = np.random.default_rng(5)
    values = np.sort(np.round(rng.lognormal(np.log(5000), 0.6, 800)))
    draw = np.random.default_rng(6)
    for q in (50.0, 99.0):
        fast = bootstrap_interval(values, q, np.random.default_rng(7), resamples=20_000)
        brute = np.sort(
            [percentile(np.sort(draw.choice(values, values.size)), q) for _ in range(4000)]
        )
        slow = (percentile(brute, 2.5), percentile(brute, 97.5))
        # the same bootstrap: bounds agree within a couple of order statistics
        for got, want in zip(fast, slow, strict=True):
            rank_got = np.searchsorted(values, got)
            rank_want = np.searchsorted(values, want)
            assert abs(rank_got - rank_want) <= 2
