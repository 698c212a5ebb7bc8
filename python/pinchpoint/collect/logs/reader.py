"""Reading tier logs from a mark and keeping the records of one run.

Records are matched to the run by the tag they carry, never by a time window:
`mark` only bounds how much of a log is read, and lines of other runs or without
a tag are counted, never kept.
"""

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from pinchpoint.logformats import NOT_A_RECORD, LineParser
from pinchpoint.logformats.tag import check_run_id, find_tag, parse_header
from pinchpoint.rundir.schemas import TIERS_SCHEMA

# Longer lines are cut to this many bytes (the rest is skipped), to bound memory.
MAX_LINE_BYTES = 1 << 20
_EXAMPLES = 5


@dataclass(frozen=True)
class Position:
    """Where a log file ended when marked: its inode (None if it did not exist) and size."""

    inode: int | None
    size: int


def mark(path: str | Path) -> Position:
    """The current end of a log file, to read only what is written after it."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return Position(None, 0)
    return Position(info.st_ino, info.st_size)


def read_since(path: str | Path, position: Position | None) -> Iterator[str]:
    """The lines written to a log file after `position` (all its lines if None).

    If the file was rotated by renaming since the mark, the rest of the renamed file
    (found by inode in the same folder) comes first, then the new file from its start.
    If it was truncated (copytruncate), the file is read from its start. Lines are
    decoded as UTF-8 with errors replaced and given without their line ending.
    """
    path = Path(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return
    if position is None or position.inode is None:
        yield from _read(path, 0)
    elif info.st_ino == position.inode:
        yield from _read(path, position.size if info.st_size >= position.size else 0)
    else:
        renamed = _find_inode(path.parent, position.inode)
        if renamed is not None:
            yield from _read(renamed, position.size)
        yield from _read(path, 0)


def read_from(path: str | Path, offset: int) -> Iterator[str]:
    """The lines of a file from byte `offset` on (0 if the file is now shorter).

    A line cut by the offset predates it and is skipped; lines are decoded as in read_since.
    """
    yield from _read(Path(path), offset)


def _find_inode(folder: Path, inode: int) -> Path | None:
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.inode() == inode and entry.is_file(follow_symlinks=False):
                    return Path(entry.path)
    except OSError:
        pass
    return None


def _read(path: Path, offset: int) -> Iterator[str]:
    try:
        file = open(path, "rb")  # noqa: SIM115 - held open across yields
    except FileNotFoundError:
        return
    with file:
        if offset > os.fstat(file.fileno()).st_size:
            offset = 0
        if offset > 0:
            file.seek(offset - 1)
            if file.read(1) != b"\n":
                # The mark fell inside a line being written: that line predates the mark.
                _skip_line(file)
        for line in _lines(file):
            yield line.decode("utf-8", errors="replace").rstrip("\r\n")


def _lines(file: BinaryIO) -> Iterator[bytes]:
    while line := file.readline(MAX_LINE_BYTES):
        if not line.endswith(b"\n") and len(line) == MAX_LINE_BYTES:
            _skip_line(file)
        yield line


def _skip_line(file: BinaryIO) -> None:
    while (rest := file.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
        pass


@dataclass(frozen=True, slots=True)
class TierRow:
    """One row of tiers.parquet."""

    component: str
    users: int
    req_id: int | None
    ts: float | None
    duration_s: float
    upstream_s: float | None
    status: int | None
    queue_s: float | None = None
    # Records from spans: the span's kind (server, client, ...) and its caller's tier.
    span_kind: str | None = None
    parent: str | None = None


# What a collector hands the run's tiers.parquet at once: rows, or a table or record batch
# of its columns (the Rust nginx parser's records, with no object per record).
TierBatch = list[TierRow] | pa.Table | pa.RecordBatch


@dataclass
class FileCounts:
    """What collection found in one log file.

    Every non-empty line read is counted once: `lines == matched + other_run +
    untagged + unparseable`. A line of this run whose record has no duration counts
    as unparseable; a line in the log's format that holds no record (NOT_A_RECORD)
    as untagged. Line numbers count from 1 at the first line read after the mark.
    """

    component: str
    path: str
    lines: int = 0
    matched: int = 0
    other_run: int = 0
    untagged: int = 0
    unparseable: int = 0
    unparseable_lines: list[int] = field(default_factory=list)
    # No file was there to read: the path names none, or the glob matches none.
    missing: bool = False

    def as_dict(self) -> dict[str, Any]:
        out = {
            "lines": self.lines,
            "matched": self.matched,
            "other_run": self.other_run,
            "untagged": self.untagged,
            "unparseable": self.unparseable,
            "unparseable_lines": list(self.unparseable_lines),
        }
        return {**out, "missing": True} if self.missing else out

    def warning(self) -> str | None:
        """What to warn of: a log with no file to read (its 0 lines are not a count)."""
        if not self.missing:
            return None
        what = "no file matches" if any(c in self.path for c in "*?[") else "no such file"
        return f"{self.component}: log {self.path}: {what}, 0 lines read"


def collect_component(
    name: str,
    path: str | Path,
    parser: LineParser,
    run_id: str,
    since: Position | None,
) -> tuple[list[TierRow], FileCounts]:
    """The records of run `run_id` in one log file of component `name`, and the counts."""
    check_run_id(run_id)
    counts = FileCounts(component=name, path=str(path))
    rows = list(match_lines(name, read_since(path, since), parser, run_id, counts))
    return rows, counts


def match_lines(
    name: str,
    lines: Iterable[str],
    parser: LineParser,
    run_id: str,
    counts: FileCounts,
) -> Iterator[TierRow]:
    """The records of run `run_id` among `lines`, one at a time; `counts` is updated as
    lines are read, so it is complete once the iterator is exhausted."""
    for line in lines:
        if not line.strip():
            continue
        counts.lines += 1
        record = parser.parse(line)
        if record is None:
            _unparseable(counts)
            continue
        if record is NOT_A_RECORD:
            counts.untagged += 1
            continue
        tag = find_tag(record.target) if record.target else None
        if tag is None and record.tag_header:
            tag = parse_header(record.tag_header)
        if tag is None:
            counts.untagged += 1
        elif tag.run_id != run_id:
            counts.other_run += 1
        elif record.duration_s is None:
            _unparseable(counts)
        else:
            counts.matched += 1
            yield TierRow(
                component=name,
                users=tag.users,
                req_id=tag.req_id,
                ts=record.ts,
                duration_s=record.duration_s,
                upstream_s=record.upstream_s,
                status=record.status,
                queue_s=getattr(record, "queue_s", None),
            )


def _unparseable(counts: FileCounts) -> None:
    counts.unparseable += 1
    if len(counts.unparseable_lines) < _EXAMPLES:
        counts.unparseable_lines.append(counts.lines)


def write_tiers(rows: Iterable[TierRow], path: str | Path) -> None:
    """Write tiers.parquet (schema TIERS_SCHEMA) from the matched rows of all components."""
    columns: dict[str, list[Any]] = {name: [] for name in TIERS_SCHEMA.names}
    for row in rows:
        for name, values in columns.items():
            values.append(getattr(row, name))
    table = pa.Table.from_pydict(columns, schema=TIERS_SCHEMA)
    pq.write_table(table, path)


def collection_json(run_id: str, counts: Iterable[FileCounts]) -> dict[str, Any]:
    """The content of collection.json: per component, totals and per-file counts."""
    components: dict[str, dict[str, Any]] = {}
    for file_counts in counts:
        entry = components.setdefault(
            file_counts.component,
            {"lines": 0, "matched": 0, "other_run": 0, "untagged": 0, "unparseable": 0},
        )
        for key in ("lines", "matched", "other_run", "untagged", "unparseable"):
            entry[key] += getattr(file_counts, key)
        entry.setdefault("files", {})[file_counts.path] = file_counts.as_dict()
        if (warning := file_counts.warning()) is not None:
            entry.setdefault("warnings", []).append(warning)
    return {"schema": "pinchpoint.collection/1", "run_id": run_id, "components": components}
