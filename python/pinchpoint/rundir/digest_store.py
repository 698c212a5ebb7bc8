"""The requests' digest kept in the run folder (digest.parquet), so that the analysis and
the report read requests.parquet once between them: the report of 100 M requests saves a
pass of ~9 s and the memory it takes.

A stored digest stands for the requests while requests.parquet is the file it was computed
from (same size and modification time) and when it was computed by the same step windows
and bucket widths, from at least the columns asked, counting at least the latency
thresholds asked, with the extent when that is asked. Anything else computes it again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import polars as pl

from pinchpoint.rundir import files
from pinchpoint.rundir.digest import BUCKET_SHARE, EXACT_ROWS, KEYS, Digest, over_column
from pinchpoint.rundir.scan import Frame, columns
from pinchpoint.rundir.steady import Window

# Changes whenever what a digest holds does.
VERSION = 1


def folder_digest(
    folder: files.RunFolder,
    requests: Frame,
    windows: Sequence[Window],
    over_ms: Sequence[float] = (),
    extent: bool = False,
) -> Digest:
    """`Digest.of(requests, windows, over_ms, extent)` for `requests`, a scan of the
    folder's requests.parquet: read from digest.parquet when that one serves, else computed
    and written there (a folder that cannot be written to only costs the next reader a
    pass)."""
    stamp = folder.stamp(files.REQUESTS)
    if stamp is None:
        return Digest.of(requests, windows, over_ms, extent)
    asked = columns(requests)
    spec = {
        "version": VERSION,
        "buckets": [EXACT_ROWS, BUCKET_SHARE],
        "source": stamp,
        "windows": [asdict(w) for w in windows],
    }
    stored = folder.read_derived(files.DIGEST)
    if stored is not None:
        rows, key = stored
        if _serves(rows, key, spec, asked, over_ms, extent):
            return Digest(rows, tuple(key["columns"]), bool(key["exact"]))
    digest = Digest.of(requests, windows, over_ms, extent)
    if folder.stamp(files.REQUESTS) == stamp:  # not replaced while it was read
        key = {
            **spec,
            "columns": list(digest.source),
            "exact": digest.exact,
            "over_ms": list(over_ms),
            "extent": extent,
        }
        with contextlib.suppress(OSError):
            folder.write_derived(files.DIGEST, digest.rows, key)
    return digest


def _serves(
    rows: pl.DataFrame,
    key: dict[str, Any],
    spec: dict[str, Any],
    asked: Sequence[str],
    over_ms: Sequence[float],
    extent: bool,
) -> bool:
    if any(key.get(name) != value for name, value in spec.items()):
        return False
    stored_columns = key.get("columns")
    stored_over = key.get("over_ms")
    if not isinstance(stored_columns, list) or not isinstance(stored_over, list):
        return False
    if not set(asked) <= set(stored_columns) or not set(over_ms) <= set(stored_over):
        return False
    if extent and key.get("extent") is not True:
        return False
    needed = {*KEYS, "n", "lo_us", "hi_us", "sum_us", *map(over_column, over_ms)}
    if not needed <= set(rows.columns):
        return False
    return isinstance(key.get("exact"), bool)
