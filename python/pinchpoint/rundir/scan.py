"""Tables of the run folder read lazily: a query over requests.parquet reads only the
columns it names and runs on polars' streaming engine, so what it holds is set by what it
keeps (a group per step, per endpoint, per latency bucket), not by the rows it reads."""

from __future__ import annotations

import os
from typing import TypeAlias

import polars as pl

# A table of requests as a caller has it: read whole (a test's, a knee probe's), or a scan.
Frame: TypeAlias = pl.DataFrame | pl.LazyFrame

# Row groups a scan decodes ahead (Polars' default is at least 8). The engine's hold 128 Ki
# requests each (~9 MB decoded): one ahead keeps a scan's memory flat at the same speed
# (100 M requests: 27 s either way, 440 MB peak against 590 MB). A value the user set is kept.
PREFETCH_ROW_GROUPS = "1"


def lazy(frame: Frame) -> pl.LazyFrame:
    return frame.lazy() if isinstance(frame, pl.DataFrame) else frame


def columns(frame: Frame) -> list[str]:
    """The frame's column names, without reading its rows."""
    return frame.columns if isinstance(frame, pl.DataFrame) else frame.collect_schema().names()


def schema(frame: Frame) -> pl.Schema:
    return frame.schema if isinstance(frame, pl.DataFrame) else frame.collect_schema()


def collect(frame: Frame) -> pl.DataFrame:
    """The query's result, computed by the streaming engine. A file that cannot be decoded
    raises ValueError, as a read of the folder does."""
    if isinstance(frame, pl.DataFrame):
        return frame
    os.environ.setdefault("POLARS_ROW_GROUP_PREFETCH_SIZE", PREFETCH_ROW_GROUPS)
    try:
        return frame.collect(engine="streaming")
    except pl.exceptions.PolarsError as exc:
        raise ValueError(f"unreadable: {' '.join(str(exc).split())[:500]}") from exc


def height(frame: Frame) -> int:
    """The frame's rows: a Parquet scan counts them from the file's footer."""
    if isinstance(frame, pl.DataFrame):
        return frame.height
    if not columns(frame):
        return 0
    return int(collect(frame.select(pl.len())).item())
