"""A run's requests in a table whose size is set by its steps, endpoints and latencies,
not by its requests: one row per steady window, step, endpoint, error, status and latency
bucket, with the requests in it, their shortest and longest latency, the sum of their
latencies and bytes.

Counts, rates, sums, means and the shortest latency come out exact. Percentiles come from
the buckets: below `EXACT_ROWS` requests a bucket is one latency (exact, as numpy's
linear percentile); above, a bucket holds latencies within `BUCKET_SHARE` of each other
(log-spaced) and a percentile falls between its bucket's shortest and longest latency by
its rank in it, within 0.1% of the exact value.

The table is computed by one streaming pass over requests.parquet (`Digest.of`), so the
analysis of 100 million requests holds about what that of a million does.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import polars as pl

from pinchpoint.rundir.scan import Frame, collect, columns, height, lazy, schema
from pinchpoint.rundir.steady import Window, with_window

# Up to this many requests every latency is its own bucket: percentiles are exact.
EXACT_ROWS = 2_000_000
# Above, a bucket spans latencies within this share of each other.
BUCKET_SHARE = 0.001

# A response below HTTP 400 without a transport error.
OK = pl.col("error").is_null() & (pl.col("status") < 400)
# A transport error or an HTTP status from 400.
FAILED = pl.col("error").is_not_null() | (pl.col("status") >= 400)
# Any response at all (a transport error has no latency to speak of).
ANSWER = pl.col("error").is_null()
# A failure's class: the engine's error, else the HTTP status.
ERROR_CLASS = pl.coalesce(pl.col("error"), pl.col("status").cast(pl.String))

KEYS = ("window", "step", "endpoint", "error", "status", "bucket")


def over_column(ms: float) -> str:
    """The measure counting the latencies above `ms` milliseconds."""
    return f"over:{ms!r}"


def latency_bucket(share: float | None, column: str = "latency_us") -> pl.Expr:
    """Each latency's bucket, in the latencies' order: the latency itself (`share` None),
    else floor(ln(latency) / ln(1 + share)); zero and below are buckets of their own,
    below every other."""
    lat = pl.col(column).cast(pl.Int64)
    if share is None:
        return lat
    log = (lat.cast(pl.Float64).log() / math.log1p(share)).floor().cast(pl.Int64)
    return pl.when(lat > 0).then(log).otherwise(lat - 1)


@dataclass(frozen=True)
class Digest:
    """The requests' table (`rows`, columns KEYS and the measures) and what it came from."""

    rows: pl.DataFrame
    # The columns of the requests it was computed from.
    source: tuple[str, ...] = ()
    exact: bool = True

    @staticmethod
    def of(
        requests: Frame,
        windows: Sequence[Window] | None = None,
        over_ms: Sequence[float] = (),
        extent: bool = False,
    ) -> Digest:
        """The digest of `requests` (read whole or scanned): `window` is the position in
        `windows` of the steady part each request belongs to (null: none); `over:<ms>`
        counts the latencies above each of `over_ms`; with `extent`, each group's least
        `users`, first send (`first_us`) and last answer (`last_us`)."""
        names = columns(requests)
        if "latency_us" not in names:
            return Digest(pl.DataFrame(), tuple(names))
        exact = height(requests) <= EXACT_ROWS
        kinds = schema(requests)

        def given(name: str, dtype: pl.DataType) -> pl.Expr:
            return pl.col(name) if name in names else pl.lit(None, dtype).alias(name)

        def int64(name: str) -> pl.Expr:
            return pl.col(name) if kinds[name] == pl.Int64 else pl.col(name).cast(pl.Int64)

        lat = int64("latency_us")
        frame = lazy(requests)
        if windows and "step" in names:
            frame = with_window(frame, windows)
        else:
            frame = frame.with_columns(pl.lit(None, pl.UInt32).alias("window"))
        keys = [
            pl.col("window"),
            given("step", pl.UInt32()),
            given("endpoint", pl.UInt16()),
            given("error", pl.String()),
            given("status", pl.UInt16()),
            latency_bucket(None if exact else BUCKET_SHARE).alias("bucket"),
        ]
        measures = [
            pl.len().cast(pl.Int64).alias("n"),
            *[((lat / 1000.0) > ms).sum().alias(over_column(ms)) for ms in over_ms],
        ]
        if not exact:  # an exact bucket is its latency: these follow from it
            measures += [lat.min().alias("lo_us"), lat.max().alias("hi_us")]
            measures.append(lat.sum().alias("sum_us"))
        if "bytes" in names:
            measures.append(pl.col("bytes").sum().cast(pl.UInt64).alias("bytes"))
        if extent and "users" in names:
            measures.append(pl.col("users").min().alias("users"))
        if extent and "start_us" in names:
            start = int64("start_us")
            measures += [start.min().alias("first_us"), (start + lat).max().alias("last_us")]
        rows = collect(frame.group_by(keys).agg(measures))
        if exact:
            bucket = pl.col("bucket")
            rows = rows.with_columns(
                bucket.alias("lo_us"), bucket.alias("hi_us"), (bucket * pl.col("n")).alias("sum_us")
            )
        return Digest(rows, tuple(names), exact)

    def where(self, *predicates: pl.Expr) -> Digest:
        """The digest of the requests that meet every predicate (of KEYS)."""
        if self.rows.is_empty():
            return self
        return replace(self, rows=self.rows.filter(*predicates))

    def groups(self, key: str) -> Iterator[tuple[Any, Digest]]:
        """The digest of each value of `key`, in its order (nulls left out)."""
        if self.rows.is_empty():
            return
        for value in self.rows[key].drop_nulls().unique().sort().to_list():
            yield value, self.where(pl.col(key) == value)

    def count(self) -> int:
        return self.total("n")

    def total(self, column: str) -> int:
        """The sum of a measure (`n`, `bytes`, `over:<ms>`); 0 when there is none."""
        if self.rows.is_empty() or column not in self.rows.columns:
            return 0
        return int(self.rows[column].sum())

    def first(self, column: str, how: str = "min") -> Any:
        """The least (`min`) or greatest (`max`) value of a column over the groups."""
        if self.rows.is_empty() or column not in self.rows.columns:
            return None
        values = self.rows[column].drop_nulls()
        return (values.min() if how == "min" else values.max()) if values.len() else None

    def min_us(self) -> float | None:
        """The shortest latency."""
        value = self.first("lo_us")
        return float(value) if value is not None else None

    def mean_us(self) -> float | None:
        n = self.count()
        return self.total("sum_us") / n if n else None

    def percentiles_us(self, qs: Sequence[float]) -> list[float | None]:
        """The latency percentiles `qs` (0-100), as numpy's linear percentile of the
        latencies; None for each when there is none."""
        if self.rows.is_empty():
            return [None] * len(qs)
        merged = (
            self.rows.filter(pl.col("bucket").is_not_null())
            .group_by("bucket")
            .agg(pl.col("n").sum(), pl.col("lo_us").min(), pl.col("hi_us").max())
            .sort("bucket")
        )
        return percentiles(
            merged["n"].to_numpy(), merged["lo_us"].to_numpy(), merged["hi_us"].to_numpy(), qs
        )

    def by_class(self) -> dict[str, int]:
        """The failures by class (the error, else the HTTP status), fewest first."""
        failed = self.where(FAILED)
        if failed.rows.is_empty():
            return {}
        counts = failed.rows.group_by(ERROR_CLASS.alias("class")).agg(pl.col("n").sum())
        return {str(c): int(n) for c, n in counts.sort("n", "class").iter_rows()}


def percentiles(
    n: np.ndarray, lo: np.ndarray, hi: np.ndarray, qs: Sequence[float]
) -> list[float | None]:
    """Percentiles `qs` of the values in buckets (in order) of `n` values from `lo` to
    `hi` each: numpy's linear interpolation between the values of the two ranks about
    each, a value taken in its bucket by its rank there (exact when the bucket holds one
    value, or two: its ends)."""
    total = int(n.sum())
    if total == 0:
        return [None] * len(qs)
    counts = n.astype(np.int64)
    cum = np.cumsum(counts)
    low, high = lo.astype(np.float64), hi.astype(np.float64)

    def value(rank: np.ndarray) -> np.ndarray:
        i = np.searchsorted(cum, rank, side="right")
        k = counts[i]
        j = rank - (cum[i] - k)
        share = np.where(k > 1, j / np.maximum(k - 1, 1), 0.0)
        return np.where(k > 1, low[i] + (high[i] - low[i]) * share, low[i])

    pos = np.asarray(qs, dtype=np.float64) / 100 * (total - 1)
    below = np.floor(pos).astype(np.int64)
    above = np.minimum(below + 1, total - 1)
    t = pos - below
    a, b = value(below), value(above)
    diff = b - a
    # numpy's lerp: from the nearer end, so that equal neighbours give their value exactly.
    out = np.where(t >= 0.5, b - diff * (1 - t), a + diff * t)
    return [float(v) for v in out]
