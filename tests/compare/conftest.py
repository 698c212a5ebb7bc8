from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import polars as pl
import pytest

MakeRun = Callable[..., Path]


@pytest.fixture
def make_run(tmp_path: Path) -> MakeRun:
    """A run folder with a requests.parquet of the given latencies (µs), a request every
    millisecond from a fixed start."""

    def make(
        name: str,
        latency_us: Sequence[int] | np.ndarray,
        status: Sequence[int | None] | None = None,
        error: Sequence[str | None] | None = None,
    ) -> Path:
        n = len(latency_us)
        run_dir = tmp_path / name
        run_dir.mkdir()
        pl.DataFrame(
            {
                "req_id": pl.Series(range(n), dtype=pl.UInt64),
                "step": pl.Series([0] * n, dtype=pl.UInt32),
                "users": pl.Series([4] * n, dtype=pl.UInt32),
                "start_us": pl.Series(1_795_342_500_000_000 + np.arange(n) * 1000, dtype=pl.Int64),
                "latency_us": pl.Series(np.asarray(latency_us), dtype=pl.Int64),
                "status": pl.Series(status if status is not None else [200] * n, dtype=pl.UInt16),
                "error": pl.Series(error if error is not None else [None] * n, dtype=pl.String),
                "bytes": pl.Series([64] * n, dtype=pl.UInt64),
            }
        ).write_parquet(run_dir / "requests.parquet")
        return run_dir

    return make
