"""nginx access logs read by the Rust parser (`pinchpoint._engine.NginxScanner`).

The Rust parser compiles the same `log_format` and gives the same records and counts as
`formats/nginx.py` with `logs.match_lines`, which stay the reference: a line the Rust
parser does not decide alone (one holding a non-ASCII byte, which nginx escapes unless
`escape=none`, or one that would need too much backtracking) is handed back and parsed
here by the Python parser, in its place. The file is read in chunks and the records come
in batches of columns, with the GIL released while Rust reads and parses.

Used for nginx logs when the compiled module is built; `match_file` returns None
otherwise, and the caller reads the lines in Python.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import pyarrow as pa

from pinchpoint.collect.logs import reader as logs
from pinchpoint.collect.logs.reader import FileCounts, TierRow, match_lines
from pinchpoint.logformats import LineParser
from pinchpoint.logformats.nginx import NginxParser
from pinchpoint.rundir.schemas import TIERS_SCHEMA

if TYPE_CHECKING:
    from pinchpoint import _engine

NginxScanner: type[_engine.NginxScanner] | None
try:
    from pinchpoint import _engine as _compiled

    # A module built before the scanner's record batches (TiersBatch) is not used.
    NginxScanner = _compiled.NginxScanner if hasattr(_compiled, "TiersBatch") else None
except ImportError:  # the compiled module is not built
    NginxScanner = None

# Lines per batch: the collector's `tick` is called about this often.
BATCH_LINES = 4096
# Lines per batch when the records go to tiers.parquet: the fewer batches, the fewer
# calls from Python and the fewer, larger row groups.
TABLE_LINES = 65536
# Python 3.12's sum() of floats is compensated; the Rust parser sums retries the same way.
_COMPENSATED_SUM = sys.version_info >= (3, 12)


def available() -> bool:
    """Whether the Rust parser is built."""
    return NginxScanner is not None


def match_file(
    name: str,
    path: str | Path,
    offset: int,
    parser: LineParser,
    run_id: str,
    counts: FileCounts,
    tick: Callable[[], None] | None = None,
    batch_lines: int = BATCH_LINES,
) -> Iterator[TierRow] | None:
    """The records of run `run_id` in the file at `path` from byte `offset` (as
    `match_lines(name, read_from(path, offset), parser, run_id, counts)` gives them), read
    by the Rust parser; None if it cannot read this log (not nginx, or not built).

    `counts` is complete once the iterator is exhausted; `tick` is called about every
    `batch_lines` lines read.
    """
    if NginxScanner is None or not isinstance(parser, NginxParser):
        return None
    return _match_file(name, path, offset, parser, run_id, counts, tick, batch_lines)


def _match_file(
    name: str,
    path: str | Path,
    offset: int,
    parser: NginxParser,
    run_id: str,
    counts: FileCounts,
    tick: Callable[[], None] | None,
    batch_lines: int,
) -> Iterator[TierRow]:
    for batch in _scan(name, path, offset, parser, run_id, counts, tick, batch_lines):
        yield from batch_rows(name, batch) if isinstance(batch, dict) else batch


def _scan(
    name: str,
    path: str | Path,
    offset: int,
    parser: NginxParser,
    run_id: str,
    counts: FileCounts,
    tick: Callable[[], None] | None,
    batch_lines: int,
    tiers: bool = False,
) -> Iterator[dict[str, Any] | list[TierRow]]:
    """The Rust parser's batches (of columns of bytes, or with `tiers` of a `TiersBatch`
    of component `name`), each line it hands back parsed here as a row in its place;
    `counts` complete once exhausted."""
    # Only reached when the scanner is there: the caller checks.
    scanner = cast("type[_engine.NginxScanner]", NginxScanner)(
        str(path), offset, parser.log_format, run_id, logs.MAX_LINE_BYTES, _COMPENSATED_SUM
    )
    since_tick = 0
    while True:
        batch = scanner.next_tiers(batch_lines, name) if tiers else scanner.next_batch(batch_lines)
        _add_counts(counts, batch)
        if batch["rows"]:
            yield batch
        deferred = batch["deferred"]
        if deferred is not None:
            line = deferred.decode("utf-8", errors="replace").rstrip("\r\n")
            yield list(match_lines(name, [line], parser, run_id, counts))
        since_tick += batch["read"]
        if tick is not None and since_tick >= batch_lines:
            tick()
            since_tick = 0
        if batch["done"]:
            return


def _add_counts(counts: FileCounts, batch: dict[str, Any]) -> None:
    first = counts.lines
    counts.lines += batch["lines"]
    counts.matched += batch["matched"]
    counts.other_run += batch["other_run"]
    counts.untagged += batch["untagged"]
    counts.unparseable += batch["unparseable"]
    for number in batch["unparseable_lines"]:
        if len(counts.unparseable_lines) < logs._EXAMPLES:
            counts.unparseable_lines.append(first + number)


def match_file_batches(
    name: str, path: str | Path, offset: int, parser: LineParser, run_id: str, counts: FileCounts
) -> Iterator[pa.RecordBatch | list[TierRow]] | None:
    """As `match_file`, the records in batches: the Rust parser's as record batches of
    tiers.parquet's columns, built in Rust and taken through the Arrow C data interface
    (no object per record nor per line); a line it handed back as a row. None if it
    cannot read this log."""
    if NginxScanner is None or not isinstance(parser, NginxParser):
        return None
    scanned = _scan(name, path, offset, parser, run_id, counts, None, TABLE_LINES, tiers=True)
    return (tiers_batch(b) if isinstance(b, dict) else b for b in scanned)


def tiers_batch(batch: dict[str, Any]) -> pa.RecordBatch:
    """The record batch of a batch `next_tiers` gave."""
    records = pa.record_batch(batch["tiers"])
    if not records.schema.equals(TIERS_SCHEMA):
        raise RuntimeError(
            f"the Rust parser's batch has columns {records.schema}, not tiers.parquet's "
            f"{TIERS_SCHEMA}: the compiled module does not match this code; rebuild it"
        )
    return records


def batch_rows(name: str, batch: dict[str, Any]) -> Iterator[TierRow]:
    """The TierRows of component `name` from one batch of the Rust parser's columns."""
    if not batch["rows"]:
        return
    users = memoryview(batch["users"]).cast("I").tolist()
    durations = memoryview(batch["duration_s"]).cast("d").tolist()
    req_ids = _nullable(batch, "req_id", "Q")
    ts = _nullable(batch, "ts", "d")
    upstream = _nullable(batch, "upstream_s", "d")
    status = _nullable(batch, "status", "i")
    for row in zip(users, req_ids, ts, durations, upstream, status, strict=True):
        yield TierRow(name, *row)


def _nullable(batch: dict[str, Any], key: str, code: Literal["Q", "d", "i"]) -> list[Any]:
    values = memoryview(batch[key]).cast(code).tolist()
    return [v if ok else None for v, ok in zip(values, batch[key + "_valid"], strict=True)]
