"""The digest kept in the run folder stands for requests.parquet only while it is the file
it was computed from, by the same windows, and holds what is asked of it."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pinchpoint.rundir import digest as digests
from pinchpoint.rundir import digest_store, files
from pinchpoint.rundir.digest import Digest, over_column
from pinchpoint.rundir.digest_store import folder_digest
from pinchpoint.rundir.steady import Window

WINDOWS = [
    Window(step=0, users=2, start=1.0, end=5.0),
    Window(step=1, users=4, start=6.0, end=10.0),
]
KEYS = list(digests.KEYS)


def _write(folder: Path, seed: int, n: int = 6_000) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    step = np.repeat([0, 1], n // 2).astype(np.uint32)
    sent = np.linspace(0, 10e6, n).astype(np.int64)
    requests = pl.DataFrame(
        {
            "req_id": np.arange(n, dtype=np.uint64),
            "step": step,
            "users": np.where(step == 0, 2, 4).astype(np.uint32),
            "endpoint": rng.integers(0, 2, n).astype(np.uint16),
            "start_us": sent,
            "latency_us": rng.lognormal(np.log(20_000), 0.6, n).astype(np.int64),
            "status": np.full(n, 200, np.uint16),
            "error": pl.Series([None] * n, dtype=pl.String),
            "bytes": np.full(n, 300, np.uint64),
        }
    )
    requests.write_parquet(folder / files.REQUESTS, row_group_size=1_000)
    return requests


@pytest.fixture
def passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the digests computed from the requests."""
    counted: list[int] = []
    of = Digest.of

    def counting(*args: object, **kwargs: object) -> Digest:
        counted.append(1)
        return of(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(digest_store.Digest, "of", staticmethod(counting))
    return counted


def _scan(folder: Path, *names: str) -> pl.LazyFrame:
    return files.RunFolder(folder).scan_frame(files.REQUESTS, list(names) or None)


def test_a_second_reader_gets_the_stored_digest_without_reading_the_requests(
    tmp_path: Path, passes: list[int]
) -> None:
    requests = _write(tmp_path, seed=1)
    folder = files.RunFolder(tmp_path)
    first = folder_digest(folder, _scan(tmp_path), WINDOWS, [30.0], extent=True)
    assert (tmp_path / files.DIGEST).is_file()
    # The report's reading: fewer columns, no threshold, the same windows.
    second = folder_digest(folder, _scan(tmp_path, "step", "latency_us"), WINDOWS)
    assert len(passes) == 1
    assert second.rows.sort(KEYS).equals(first.rows.sort(KEYS))
    assert second.exact == first.exact and second.source == first.source
    assert second.count() == requests.height
    slow = int((requests["latency_us"] > 30_000).sum())
    assert second.total(over_column(30.0)) == slow


def test_a_rewritten_requests_file_is_digested_again(tmp_path: Path, passes: list[int]) -> None:
    _write(tmp_path, seed=1)
    folder = files.RunFolder(tmp_path)
    before = folder_digest(folder, _scan(tmp_path), WINDOWS)
    st = (tmp_path / files.REQUESTS).stat()
    after_requests = _write(tmp_path, seed=2)
    # Even with the old modification time, the new file's size tells it apart...
    os.utime(tmp_path / files.REQUESTS, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = folder_digest(folder, _scan(tmp_path), WINDOWS)
    assert len(passes) == 2
    assert after.total("sum_us") == int(after_requests["latency_us"].sum())
    assert after.total("sum_us") != before.total("sum_us")


def test_other_windows_a_new_threshold_or_more_columns_compute_it_again(
    tmp_path: Path, passes: list[int]
) -> None:
    requests = _write(tmp_path, seed=3)
    folder = files.RunFolder(tmp_path)
    folder_digest(folder, _scan(tmp_path, "step", "start_us", "latency_us"), WINDOWS)
    shifted = [Window(step=0, users=2, start=2.0, end=5.0), WINDOWS[1]]
    moved = folder_digest(folder, _scan(tmp_path), shifted)
    assert len(passes) == 2
    in_first = requests.filter(
        (pl.col("step") == 0) & (pl.col("start_us") >= 2_000_000) & (pl.col("start_us") < 5_000_000)
    )
    assert moved.where(pl.col("window") == 0).count() == in_first.height
    counted = folder_digest(folder, _scan(tmp_path), shifted, [25.0])
    assert len(passes) == 3
    assert counted.total(over_column(25.0)) == int((requests["latency_us"] > 25_000).sum())
    extent = folder_digest(folder, _scan(tmp_path), shifted, [25.0], extent=True)
    assert len(passes) == 4
    assert extent.first("first_us") == 0
    # ...and what was stored last serves what asks for less.
    folder_digest(folder, _scan(tmp_path, "step", "latency_us"), shifted, [25.0])
    assert len(passes) == 4


def test_a_damaged_stored_digest_is_computed_again_and_replaced(
    tmp_path: Path, passes: list[int]
) -> None:
    requests = _write(tmp_path, seed=4)
    folder = files.RunFolder(tmp_path)
    (tmp_path / files.DIGEST).write_bytes(b"PAR1 not a parquet file")
    digest = folder_digest(folder, _scan(tmp_path), WINDOWS)
    assert digest.count() == requests.height and len(passes) == 1
    assert folder.read_derived(files.DIGEST) is not None
    folder_digest(folder, _scan(tmp_path), WINDOWS)
    assert len(passes) == 1


def test_a_stored_digest_without_its_columns_is_computed_again(
    tmp_path: Path, passes: list[int]
) -> None:
    requests = _write(tmp_path, seed=6)
    folder = files.RunFolder(tmp_path)
    folder_digest(folder, _scan(tmp_path), WINDOWS)
    stored = folder.read_derived(files.DIGEST)
    assert stored is not None
    rows, key = stored
    folder.write_derived(files.DIGEST, rows.drop("sum_us"), key)  # its key still matches
    digest = folder_digest(folder, _scan(tmp_path), WINDOWS)
    assert len(passes) == 2
    assert digest.total("sum_us") == int(requests["latency_us"].sum())


def test_a_digest_it_cannot_store_is_still_given_and_leaves_nothing_behind(
    tmp_path: Path, passes: list[int]
) -> None:
    requests = _write(tmp_path, seed=5)
    (tmp_path / files.DIGEST).mkdir()  # in the way of the file
    digest = folder_digest(files.RunFolder(tmp_path), _scan(tmp_path), WINDOWS)
    assert digest.count() == requests.height and len(passes) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [files.DIGEST, files.REQUESTS]
