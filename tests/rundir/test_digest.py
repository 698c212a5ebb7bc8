"""The requests' digest: counts, sums and means exact, percentiles as numpy's (exact up to
EXACT_ROWS requests, within 0.1% above), the steady windows cut as `in_window` cuts them,
from a table read whole or from a scan of the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pinchpoint.analyze.client import client_numbers
from pinchpoint.rundir import digest as digests
from pinchpoint.rundir import files
from pinchpoint.rundir.digest import FAILED, OK, Digest, percentiles
from pinchpoint.rundir.steady import Window, in_window

QS = [0, 1, 25, 50, 90, 95, 99, 99.9, 99.99, 100]
WINDOWS = [
    Window(step=0, users=2, start=1.0, end=5.0),
    Window(step=1, users=4, start=6.0, end=10.0),
]


def _requests(n: int = 20_000, seed: int = 4) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    step = np.repeat([0, 1], n // 2).astype(np.uint32)
    sent = np.concatenate([np.linspace(0, 5e6, n // 2), np.linspace(5e6, 10e6, n // 2)])
    status = np.where(rng.random(n) < 0.05, 503, 200).astype(np.uint16)
    error = np.where(rng.random(n) < 0.02, "timeout", None)
    status[error != None] = 0  # noqa: E711 (numpy compares elementwise)
    return pl.DataFrame(
        {
            "req_id": np.arange(n, dtype=np.uint64),
            "step": step,
            "users": np.where(step == 0, 2, 4).astype(np.uint32),
            "endpoint": rng.integers(0, 3, n).astype(np.uint16),
            "start_us": sent.astype(np.int64),
            "intended_us": sent.astype(np.int64) - 100,
            "latency_us": rng.lognormal(np.log(20_000), 0.7, n).astype(np.int64),
            "status": status,
            "error": error.tolist(),
            "bytes": rng.integers(100, 900, n).astype(np.uint64),
        }
    )


def test_percentiles_of_buckets_are_numpys_for_one_value_a_bucket() -> None:
    values = np.array([3, 3, 7, 10, 10, 10, 40, 41, 1000])
    got = percentiles(np.ones(values.size), values, values, QS)
    assert got == list(np.percentile(values, QS))
    assert percentiles(np.array([]), np.array([]), np.array([]), [50]) == [None]


def test_exact_digest_gives_numpys_percentiles_and_exact_counts() -> None:
    requests = _requests()
    digest = Digest.of(requests, WINDOWS)
    assert digest.exact
    for i, w in enumerate(WINDOWS):
        part = in_window(requests, w)
        mine = digest.where(pl.col("window") == i)
        assert mine.count() == part.height
        ok = part.filter(OK)
        assert mine.where(OK).count() == ok.height
        assert mine.where(FAILED).count() == part.filter(FAILED).height
        assert mine.total("bytes") == part["bytes"].sum()
        expected = np.percentile(ok["latency_us"].to_numpy(), QS)
        assert mine.where(OK).percentiles_us(QS) == list(expected)
        assert mine.where(OK).mean_us() == pytest.approx(ok["latency_us"].mean(), rel=1e-12)
        counts = part.filter(FAILED).group_by(digests.ERROR_CLASS).len()
        assert mine.by_class() == {str(c): n for c, n in counts.sort("len", "error").iter_rows()}
    # Warm-ups and requests of no window are kept out of every window, not out of the digest.
    assert digest.count() == requests.height
    assert digest.where(pl.col("window").is_null()).count() > 0


def test_above_the_exact_rows_percentiles_are_within_a_tenth_of_a_percent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(digests, "EXACT_ROWS", 0)
    requests = _requests(60_000)
    digest = Digest.of(requests, WINDOWS)
    assert not digest.exact
    # Buckets set by the latencies' range, not by the requests.
    lat = requests["latency_us"]
    span = np.log(lat.max() / lat.min()) / np.log1p(digests.BUCKET_SHARE)
    assert digest.rows["bucket"].n_unique() <= span + 2
    for i, w in enumerate(WINDOWS):
        ok = in_window(requests, w).filter(OK)
        mine = digest.where((pl.col("window") == i) & OK)
        expected = np.percentile(ok["latency_us"].to_numpy(), QS)
        assert mine.percentiles_us(QS) == pytest.approx(list(expected), rel=1e-3)
        # Counts, sums and the shortest latency stay exact.
        assert mine.count() == ok.height
        assert mine.total("sum_us") == ok["latency_us"].sum()
        assert mine.min_us() == ok["latency_us"].min()


def test_a_scan_of_the_file_gives_the_tables_digest(tmp_path: Path) -> None:
    requests = _requests()
    requests.write_parquet(tmp_path / files.REQUESTS, row_group_size=3_000)
    scan = files.RunFolder(tmp_path).scan_frame(files.REQUESTS)
    whole, scanned = Digest.of(requests, WINDOWS), Digest.of(scan, WINDOWS)
    order = list(digests.KEYS)
    assert scanned.rows.sort(order).equals(whole.rows.sort(order))
    for i, w in enumerate(WINDOWS):
        step = client_numbers(scanned.where(pl.col("window") == i), w)
        assert step["requests"] == in_window(requests, w).height


def test_a_step_with_two_windows_gives_each_its_requests() -> None:
    requests = _requests()
    windows = [
        Window(step=0, users=2, start=1.0, end=2.0),
        Window(step=0, users=2, start=3.0, end=4.0),
    ]
    digest = Digest.of(requests.lazy(), windows)
    for i, w in enumerate(windows):
        assert digest.where(pl.col("window") == i).count() == in_window(requests, w).height


def test_latencies_over_a_threshold_are_counted_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(digests, "EXACT_ROWS", 0)
    requests = _requests()
    digest = Digest.of(requests, over_ms=[20.0])
    slow = requests.filter(pl.col("latency_us") / 1000.0 > 20.0).height
    assert digest.total(digests.over_column(20.0)) == slow


def test_no_requests_no_numbers() -> None:
    empty = Digest.of(pl.DataFrame())
    assert empty.count() == 0
    assert empty.percentiles_us([50]) == [None]
    assert empty.min_us() is None and empty.mean_us() is None
    assert empty.by_class() == {}
    none = Digest.of(_requests().clear(), WINDOWS)
    assert none.count() == 0 and none.percentiles_us([99]) == [None]
