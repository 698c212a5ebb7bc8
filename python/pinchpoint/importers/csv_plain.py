"""Plain `timestamp, latency` CSV, both in seconds:

    1459452334.73, 0.00141596794128

The timestamp is taken as the request's start. A first line that is not numeric is a
header; blank lines and `#` comments are ignored; any other unreadable line is skipped
and counted. Every row is a response (the format has no status or error).
"""

from __future__ import annotations

from pathlib import Path

from pinchpoint.importers.common import (
    Imported,
    RequestRows,
    Skipped,
    check_readable,
    open_text,
    seconds_to_us,
)

TOOL = "csv"


def read_rows(path: Path) -> tuple[RequestRows, int, Skipped]:
    """The rows of the file, its line count and its skipped lines."""
    path = check_readable(path)
    rows = RequestRows()
    skipped = Skipped()
    lines = 0
    for number, line in open_text(path):
        lines = number
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        fields = [f.strip() for f in text.split(",")]
        if number == 1 and not _numeric(fields[0]):
            continue  # header
        if len(fields) != 2:
            skipped.add(number, f"expected 2 comma-separated fields, found {len(fields)}")
            continue
        try:
            start_us = seconds_to_us(fields[0])
        except ValueError:
            skipped.add(number, f"timestamp {fields[0]!r} is not a number")
            continue
        try:
            latency_us = seconds_to_us(fields[1])
        except ValueError:
            skipped.add(number, f"latency {fields[1]!r} is not a number")
            continue
        if latency_us < 0:
            skipped.add(number, f"latency {fields[1]} is negative")
            continue
        rows.add(start_us, latency_us)
    return rows, lines, skipped


def read(path: Path) -> Imported:
    rows, lines, skipped = read_rows(path)
    if not len(rows):
        raise skipped.error(path, "no `timestamp, latency` rows (seconds, comma-separated)")
    imported = Imported(
        tool=TOOL, lines=lines, skipped=skipped, requests=rows.frame(), sources=[Path(path)]
    )
    imported.span_from_requests()
    return imported


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
