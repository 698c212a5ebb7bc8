"""The tiers' records (tiers.parquet) as the analysis and the report hold them: whole up to
`WHOLE_ROWS`, else the records of a share of the requests, chosen by a hash of the request
id, so that what they hold is set by that bound and not by the run.

A request is kept with every record of it (the tiers of one request still join), and the
same requests are kept wherever the sample is drawn. Counts taken from the sample are
divided by its share; times (percentiles, means, self and queue time) are those of the
sampled requests: with some 25,000 records per tier and step, a p95 within a few percent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from pinchpoint.rundir import files
from pinchpoint.rundir.scan import Frame, collect, columns, height, lazy

# Up to this many records the tiers are read whole; above, about this many are kept.
WHOLE_ROWS = 500_000
SEED = 0x5EED


@dataclass(frozen=True)
class TierRecords:
    frame: pl.DataFrame
    # The share of the requests whose records `frame` holds (1.0: every record).
    share: float = 1.0
    # Records in the file.
    total: int = 0


def in_sample(share: float, names: Sequence[str] = ("req_id", "ts")) -> pl.Expr:
    """The rows whose request id (a record without one: its time) hashes into the first
    `share` of the range; the same request is in it in every table that has its id."""
    if share >= 1.0:
        return pl.lit(True)
    by_time = pl.col("ts").hash(SEED) if "ts" in names else pl.lit(0, pl.UInt64)
    hashed = (
        pl.when(pl.col("req_id").is_not_null())
        .then(pl.col("req_id").cast(pl.UInt64).hash(SEED))
        .otherwise(by_time)
        if "req_id" in names
        else by_time
    )
    return hash_below(hashed, share)


def hash_below(hashed: pl.Expr, share: float) -> pl.Expr:
    """The rows whose 64-bit hash falls in the first `share` of its range."""
    return hashed < pl.lit(min(int(share * 2.0**64), 2**64 - 1), pl.UInt64)


def sample(records: Frame, total: int | None = None) -> TierRecords:
    """`records` (read whole or scanned) held whole or sampled to about WHOLE_ROWS."""
    total = height(records) if total is None else total
    if total <= WHOLE_ROWS:
        return TierRecords(collect(records), 1.0, total)
    share = WHOLE_ROWS / total
    kept = lazy(records).filter(in_sample(share, columns(records)))
    return TierRecords(collect(kept), share, total)


def read_tiers(folder: files.RunFolder) -> TierRecords:
    """The folder's tier records (none without tiers.parquet). Raises as `read_frame`."""
    if not folder.has(files.TIERS):
        return TierRecords(pl.DataFrame())
    scan = folder.scan_frame(files.TIERS)
    try:
        return sample(scan)
    except ValueError as exc:
        raise ValueError(f"{folder / files.TIERS}: {exc}") from exc
