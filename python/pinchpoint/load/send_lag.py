"""How late an open-loop run's requests left against their schedule (`start_us -
intended_us`), read from requests.parquet a batch of rows at a time into an HdrHistogram:
the memory it takes does not grow with the requests."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import polars as pl

from pinchpoint.load.hdr import COUNTS_LEN, Histogram
from pinchpoint.rundir.scan import PREFETCH_ROW_GROUPS
from pinchpoint.rundir.view import RunView


def send_lag_us(view: RunView) -> dict[str, Any] | None:
    """The send lag's `p50` and `p99` (the histogram's, 3 significant digits; a lag under
    1 µs counts as 1 µs) and its exact `max`, in µs; None when no request was sent."""
    lag = (pl.col("start_us") - pl.col("intended_us")).alias("lag")
    scan = view.scan_requests(["start_us", "intended_us"]).select(lag)
    os.environ.setdefault("POLARS_ROW_GROUP_PREFETCH_SIZE", PREFETCH_ROW_GROUPS)
    counts = np.zeros(COUNTS_LEN, dtype=np.int64)
    most: int | None = None
    for batch in scan.collect_batches(engine="streaming"):
        values = batch["lag"].to_numpy()
        if values.size == 0:
            continue
        counts += Histogram.of(values).counts
        most = int(values.max()) if most is None else max(most, int(values.max()))
    if most is None:
        return None
    histogram = Histogram.of_counts(counts)
    return {
        "p50": histogram.value_at_quantile(0.5),
        "p99": histogram.value_at_quantile(0.99),
        "max": most,
    }
