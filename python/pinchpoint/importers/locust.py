"""Locust's `--csv PREFIX` files: aggregates only, no per-request rows.

- `PREFIX_stats.csv` (required): a row per endpoint and an `Aggregated` row, with
  counts, mean/min/max, requests/s and the percentile columns (`50%` … `100%`), in ms.
  It becomes summary.json.
- `PREFIX_stats_history.csv` (optional): a row a second (per endpoint too with
  `--csv-full-history`), with the user count, current requests/s, percentiles and
  running totals. It becomes series.parquet, the run's start and end, and its steps
  (a step per user count).
- `PREFIX_failures.csv` (optional): failure messages and counts, into summary.json.

Any of these files, or the prefix itself, names the set. "N/A" is a missing value.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from pinchpoint.importers.common import (
    SUMMARY_SCHEMA,
    Imported,
    ImportFormatError,
    Skipped,
    level_steps,
    open_text,
)

TOOL = "locust"
SUFFIXES = ("_stats_history.csv", "_stats.csv", "_failures.csv", "_exceptions.csv")
AGGREGATED = ("Aggregated", "Total")
PERCENTILE = re.compile(r"^(\d+(?:\.\d+)?)%$")
STATS_COLUMNS = {
    "Type": "method",
    "Name": "name",
    "Request Count": "requests",
    "Failure Count": "errors",
    "Median Response Time": "median_ms",
    "Average Response Time": "mean_ms",
    "Min Response Time": "min_ms",
    "Max Response Time": "max_ms",
    "Average Content Size": "avg_bytes",
    "Requests/s": "throughput_rps",
    "Failures/s": "errors_per_s",
}
HISTORY_COLUMNS = {
    "Timestamp": "ts",
    "User Count": "users",
    "Type": "method",
    "Name": "name",
    "Requests/s": "rps",
    "Failures/s": "errors_per_s",
    "Total Request Count": "total_requests",
    "Total Failure Count": "total_errors",
    "Total Median Response Time": "total_median_ms",
    "Total Average Response Time": "total_mean_ms",
    "Total Min Response Time": "total_min_ms",
    "Total Max Response Time": "total_max_ms",
    "Total Average Content Size": "total_avg_bytes",
}
INTEGERS = {"requests", "errors", "users", "total_requests", "total_errors"}
REQUIRED = {"ts", "users", "requests", "errors"}  # no "N/A" allowed
TEXT = {"method", "name"}


class BadRow(ValueError):
    pass


def files_for(path: Path) -> tuple[Path, Path | None, Path | None]:
    """The stats file, and the history and failures files where they exist."""
    path = Path(path)
    if path.is_dir():
        found = sorted(path.glob("*_stats.csv"))
        if len(found) != 1:
            what = "no *_stats.csv" if not found else f"{len(found)} *_stats.csv files"
            raise ImportFormatError(path, None, f"{what} in this folder; name the file")
        prefix = str(found[0])[: -len("_stats.csv")]
    else:
        prefix = str(path)
        for suffix in SUFFIXES:
            if prefix.endswith(suffix):
                prefix = prefix[: -len(suffix)]
                break
    stats = Path(prefix + "_stats.csv")
    if not stats.is_file():
        raise ImportFormatError(stats, None, "no such file (Locust's --csv writes it)")
    history = Path(prefix + "_stats_history.csv")
    failures = Path(prefix + "_failures.csv")
    return stats, history if history.is_file() else None, failures if failures.is_file() else None


def read(path: Path) -> Imported:
    stats_path, history_path, failures_path = files_for(path)
    skipped = Skipped()
    stats, lines = _table(stats_path, STATS_COLUMNS, skipped)
    aggregated = [r for r in stats if r["name"] in AGGREGATED and not r["method"]]
    if not aggregated:
        raise skipped.error(stats_path, "no Aggregated row (is this Locust's _stats.csv?)")
    summary: dict[str, Any] = {"schema": SUMMARY_SCHEMA, "tool": TOOL}
    summary.update(_stats_entry(aggregated[-1]))
    summary.pop("method")
    summary.pop("name")
    summary["endpoints"] = [_stats_entry(r) for r in stats if r not in aggregated]
    imported = Imported(tool=TOOL, lines=lines, skipped=skipped, sources=[stats_path])

    if history_path is not None:
        history, n = _table(history_path, HISTORY_COLUMNS, skipped)
        imported.lines += n
        imported.sources.append(history_path)
        _add_history(imported, summary, history)
    if failures_path is not None:
        summary["failures"] = _failures(failures_path)
        imported.sources.append(failures_path)
    imported.summary = summary
    return imported


def _stats_entry(row: dict[str, Any]) -> dict[str, Any]:
    entry = {key: row[key] for key in STATS_COLUMNS.values()}
    requests, errors = entry["requests"], entry["errors"]
    entry["error_rate"] = errors / requests if requests else None
    entry["latency_ms"] = row["percentiles"]
    return entry


def _add_history(imported: Imported, summary: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    percentile_keys = sorted(
        {k for r in rows for k in r["percentiles"]}, key=lambda k: float(k[1:])
    )
    series = pl.DataFrame(
        {
            "ts": pl.Series([float(r["ts"]) for r in rows], dtype=pl.Float64),
            "users": pl.Series([r["users"] for r in rows], dtype=pl.UInt32),
            "method": pl.Series([r["method"] for r in rows], dtype=pl.String),
            "name": pl.Series([r["name"] for r in rows], dtype=pl.String),
            "rps": pl.Series([r["rps"] for r in rows], dtype=pl.Float64),
            "errors_per_s": pl.Series([r["errors_per_s"] for r in rows], dtype=pl.Float64),
            **{
                f"{key}_ms": pl.Series([r["percentiles"].get(key) for r in rows], dtype=pl.Float64)
                for key in percentile_keys
            },
            **{
                column: pl.Series(
                    [r[column] for r in rows],
                    dtype=pl.UInt64 if column in INTEGERS else pl.Float64,
                )
                for column in HISTORY_COLUMNS.values()
                if column.startswith("total_")
            },
        }
    )
    imported.series = series
    summary["series"] = "series.parquet"
    total = [r for r in rows if r["name"] in AGGREGATED and not r["method"]] or rows
    times = [float(r["ts"]) for r in total]
    imported.started, imported.ended = min(times), max(times)
    summary["duration_s"] = imported.ended - imported.started
    running = [(t, r["users"]) for t, r in zip(times, total, strict=True) if r["users"]]
    if running:
        imported.steps = level_steps(
            [t for t, _ in running], [u for _, u in running], running[0][0], imported.ended
        )


def _table(
    path: Path, columns: dict[str, str], skipped: Skipped
) -> tuple[list[dict[str, Any]], int]:
    """The rows of a Locust CSV file, with `percentiles` gathered; unreadable rows are
    skipped. Raises if the header lacks a column."""
    reader = csv.reader(_lines(path))
    try:
        header = next(reader)
    except StopIteration:
        raise ImportFormatError(path, 1, "empty file") from None
    missing = [c for c in columns if c not in header]
    if missing:
        raise ImportFormatError(
            path, 1, f"the header lacks column(s) {', '.join(missing)}: not a Locust CSV file"
        )
    index = {name: header.index(name) for name in columns}
    percentile_columns = [(i, PERCENTILE.match(h)) for i, h in enumerate(header)]
    percentiles = [(i, f"p{m.group(1)}") for i, m in percentile_columns if m]
    rows = []
    for fields in reader:
        if not fields or not any(f.strip() for f in fields):
            continue
        try:
            if len(fields) != len(header):
                raise BadRow(f"expected {len(header)} fields, found {len(fields)}")
            row: dict[str, Any] = {
                key: _value(fields[index[column]], column, key) for column, key in columns.items()
            }
            row["percentiles"] = {key: _value(fields[i], header[i], key) for i, key in percentiles}
        except BadRow as exc:
            skipped.add(reader.line_num, f"{path.name}: {exc}")
            continue
        rows.append(row)
    return rows, reader.line_num


def _lines(path: Path) -> Iterator[str]:
    for _, line in open_text(path):
        yield line


def _value(text: str, column: str, key: str) -> Any:
    text = text.strip()
    if key in TEXT:
        return text or None
    if text in ("", "N/A"):
        if key in REQUIRED:
            raise BadRow(f"{column} is missing")
        return None
    try:
        if key in INTEGERS:
            return int(float(text)) if "." in text else int(text)
        return float(text)
    except ValueError:
        raise BadRow(f"{column} {text!r} is not a number") from None


def _failures(path: Path) -> list[dict[str, Any]]:
    with path.open(newline="", encoding="utf-8", errors="replace") as f:
        rows = list(csv.DictReader(f))
    failures = []
    for row in rows:
        try:
            occurrences = int(row.get("Occurrences") or 0)
        except ValueError:
            occurrences = None
        failures.append(
            {
                "method": row.get("Method"),
                "name": row.get("Name"),
                "error": row.get("Error"),
                "occurrences": occurrences,
            }
        )
    return failures
