"""One side of a comparison: the latencies of its successful requests, from a run
folder, a requests.parquet file, or a `timestamp, latency` CSV file read on the fly."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from pinchpoint.importers import csv_plain
from pinchpoint.importers.common import ImportFormatError
from pinchpoint.rundir import files
from pinchpoint.rundir.scan import collect, columns, height
from pinchpoint.rundir.view import RunView


class CompareInputError(ValueError):
    """A side cannot be compared; the message names the path and why."""


@dataclass
class Side:
    label: str
    path: Path
    requests: int  # all requests the source holds
    latency_us: np.ndarray  # successful requests, in file order
    start_us: np.ndarray  # their start times, same order

    @property
    def used(self) -> int:
        return int(self.latency_us.size)

    @property
    def excluded(self) -> int:
        return self.requests - self.used


def load_side(path: Path) -> Side:
    path = Path(path)
    if path.is_dir():
        return _from_folder(RunView(path))
    if not path.is_file():
        raise CompareInputError(f"{path}: no such file or run folder")
    if path.suffix == ".parquet":
        return _from_parquet(RunView(path.parent), path.name, path.parent.name or path.stem)
    try:
        rows, _, _ = csv_plain.read_rows(path)
    except ImportFormatError as exc:
        raise CompareInputError(str(exc)) from None
    if not len(rows):
        raise CompareInputError(f"{path}: no `timestamp, latency` rows (seconds, comma-separated)")
    return Side(
        label=path.stem,
        path=path,
        requests=len(rows),
        latency_us=np.asarray(rows.latency_us, dtype=np.int64),
        start_us=np.asarray(rows.start_us, dtype=np.int64),
    )


def _from_folder(view: RunView) -> Side:
    """The side of a run folder: its requests.parquet."""
    if not view.has(files.REQUESTS):
        if view.has(files.SUMMARY):
            raise CompareInputError(
                f"{view.path}: holds aggregates only (summary.json, no requests.parquet); "
                "compare needs per-request latencies"
            )
        raise CompareInputError(
            f"{view.folder / files.REQUESTS}: not found; is {view.path} a run folder?"
        )
    return _from_parquet(view, files.REQUESTS, view.path.name)


def _from_parquet(view: RunView, name: str, label: str) -> Side:
    """The side's successful latencies and start times from the table `name` of the
    folder: only those are read into memory (the file is scanned, the failures left in
    it)."""
    path = view.folder / name
    try:
        scan = view.scan(name, ["latency_us", "start_us"], ["error", "status", "failed"])
        ok = collect(
            scan.filter(_succeeded(columns(scan))).select(
                pl.col("latency_us").cast(pl.Int64), pl.col("start_us").cast(pl.Int64)
            )
        )
        requests = height(scan)
    except (OSError, ValueError) as exc:
        # The folder's checks name the file; a page that cannot be decoded does not.
        why = str(exc) if str(exc).startswith(str(path)) else f"{path}: {exc}"
        raise CompareInputError(why) from None
    return Side(
        label=label,
        path=path,
        requests=requests,
        latency_us=ok["latency_us"].to_numpy(),
        start_us=ok["start_us"].to_numpy(),
    )


def _succeeded(names: list[str]) -> pl.Expr:
    """A response with a 1xx-3xx status (or none recorded) and no error; where the source
    said which requests failed (k6's `failed`), that word wins."""
    ok = pl.col("latency_us").is_not_null()
    if "error" in names:
        ok = ok & pl.col("error").is_null()
    if "status" in names:
        status = pl.col("status")
        ok = ok & (status.is_null() | ((status >= 100) & (status < 400)))
    if "failed" in names:
        ok = pl.when(pl.col("failed").is_not_null()).then(~pl.col("failed")).otherwise(ok)
    return ok
