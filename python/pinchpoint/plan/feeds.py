"""Test data for flows: a CSV file with a header row, or JSON lines (a file ending in
`.jsonl` or `.ndjson`, one object per line), of at most `MAX_ROWS` rows and
`MAX_FEED_BYTES` bytes: a larger feed is refused, never cut. Errors name the file and
the line."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path

from pinchpoint.plan.templates import BUILTIN_VARS, is_name
from pinchpoint.plan.user_paths import NotUsable, open_input

# The most rows a feed holds: every row goes to the engine and is kept for the run.
MAX_ROWS = 1_000_000
MAX_FEED_BYTES = 256 << 20


@dataclass(frozen=True)
class FeedData:
    columns: list[str]
    rows: list[list[str]]


def _text(path: Path) -> io.TextIOWrapper:
    try:
        return io.TextIOWrapper(open_input(path, MAX_FEED_BYTES, "feed"), "utf-8", newline="")
    except NotUsable as e:
        raise ValueError(str(e)) from None


def read_columns(path: Path) -> list[str]:
    """The feed's column names: the CSV header, or the keys of the first JSON line."""
    return read_feed(path, limit=1).columns


def read_feed(path: Path, limit: int | None = None) -> FeedData:
    """The feed's columns and its rows, or only the first `limit` rows; ValueError names
    the file and line, and refuses a feed of more than `MAX_ROWS` rows."""
    with _text(path) as f:
        try:
            data = _jsonl(f, path, limit) if _is_jsonl(path) else _csv(f, path, limit)
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: not UTF-8 text ({e.reason})") from None
    if not data.rows:
        raise ValueError(f"{path}: no row of data")
    return data


def _is_jsonl(path: Path) -> bool:
    return path.suffix.lower() in (".jsonl", ".ndjson")


def _csv(f: io.TextIOWrapper, path: Path, limit: int | None) -> FeedData:
    reader = csv.reader(f)
    try:
        header = next(reader, None)
        if not header:
            raise ValueError(f"{path}:1: no header row (the column names)")
        columns = _names(header, path, 1)
        rows: list[list[str]] = []
        for row in reader:
            if not row:
                continue
            if len(row) != len(columns):
                raise ValueError(
                    f"{path}:{reader.line_num}: {len(row)} values, the header has {len(columns)}"
                )
            if len(rows) == MAX_ROWS:
                raise ValueError(_too_many(path, reader.line_num))
            rows.append(row)
            if len(rows) == limit:
                break
    except csv.Error as e:
        raise ValueError(f"{path}:{reader.line_num}: {e}") from None
    return FeedData(columns, rows)


def _jsonl(f: io.TextIOWrapper, path: Path, limit: int | None) -> FeedData:
    columns: list[str] | None = None
    rows: list[list[str]] = []
    for number, line in enumerate(f, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{number}: not JSON ({e.msg})") from None
        if not isinstance(item, dict):
            raise ValueError(f"{path}:{number}: a line is one JSON object")
        if columns is None:
            columns = _names(list(item), path, number)
        if set(item) != set(columns):
            raise ValueError(f"{path}:{number}: keys {sorted(item)}, the first line has {columns}")
        if len(rows) == MAX_ROWS:
            raise ValueError(_too_many(path, number))
        rows.append([_value(item[c]) for c in columns])
        if len(rows) == limit:
            break
    return FeedData(columns or [], rows)


def _too_many(path: Path, line: int) -> str:
    return f"{path}:{line}: more than {MAX_ROWS:,} rows, the most a feed holds"


def _value(v: object) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def _names(names: list[str], path: Path, line: int) -> list[str]:
    for name in names:
        if not is_name(name):
            raise ValueError(f"{path}:{line}: column {name!r} is not a variable name")
        if name in BUILTIN_VARS:
            raise ValueError(f"{path}:{line}: column {name!r} is a built-in variable")
    if len(set(names)) != len(names):
        raise ValueError(f"{path}:{line}: a column name is repeated")
    return names
