"""vegeta results, as `vegeta encode` writes them: JSON lines (the default,
`--to json`) or CSV (`--to csv`). One line per request:

    {"attack":"","seq":0,"code":200,"timestamp":"2026-11-22T10:15:00.123456789Z",
     "latency":2179813,"bytes_out":0,"bytes_in":12,"error":"","body":null, ...}

`timestamp` is when the request was sent, `latency` is in nanoseconds. vegeta writes
the status text into `error` for a non-2xx response; only a request with no response
(code 0) gets an error class here. The binary output of `vegeta attack` is refused with
a hint to encode it first.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from pinchpoint.importers.common import (
    Imported,
    ImportFormatError,
    RequestRows,
    Skipped,
    check_readable,
    classify_error,
    open_text,
    rfc3339_us,
)

TOOL = "vegeta"
# timestamp ns, code, latency ns, bytes out, bytes in, error, body, attack, seq; vegeta 12.9
# and later add method, url and the response headers.
CSV_FIELDS = (9, 12)


class BadLine(ValueError):
    pass


def read(path: Path) -> Imported:
    path = check_readable(path)
    _refuse_binary(path)
    rows = RequestRows()
    skipped = Skipped()
    lines = 0
    for number, line in open_text(path):
        lines = number
        text = line.strip()
        if not text:
            continue
        try:
            start_us, latency_us, code, error, size = (
                _json_line(text) if text.startswith("{") else _csv_line(text)
            )
        except BadLine as exc:
            skipped.add(number, str(exc))
            continue
        rows.add(start_us, latency_us, code, error, size)
    if not len(rows):
        raise skipped.error(path, "no vegeta results (expected the output of `vegeta encode`)")
    imported = Imported(
        tool=TOOL, lines=lines, skipped=skipped, requests=rows.frame(), sources=[path]
    )
    imported.span_from_requests()
    return imported


def _json_line(text: str) -> tuple[int, int, int, str | None, int | None]:
    try:
        record: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadLine(f"not JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(record, dict):
        raise BadLine("not a JSON object")
    for key in ("timestamp", "latency", "code"):
        if key not in record:
            raise BadLine(f"no {key!r} field")
    timestamp = record["timestamp"]
    if not isinstance(timestamp, str):
        raise BadLine(f"timestamp {timestamp!r} is not an RFC 3339 string")
    try:
        start_us = rfc3339_us(timestamp)
    except ValueError as exc:
        raise BadLine(str(exc)) from None
    latency_ns = _integer(record["latency"], "latency")
    code = _integer(record["code"], "code")
    size = record.get("bytes_in")
    size = None if size is None else _integer(size, "bytes_in")
    message = record.get("error") or ""
    if not isinstance(message, str):
        raise BadLine(f"error {message!r} is not a string")
    return _row(start_us, latency_ns, code, message, size)


def _csv_line(text: str) -> tuple[int, int, int, str | None, int | None]:
    try:
        fields = next(csv.reader([text], skipinitialspace=True))
    except csv.Error as exc:
        raise BadLine(f"not CSV: {exc}") from None
    if len(fields) not in CSV_FIELDS:
        raise BadLine(f"expected a JSON object or 9 or 12 CSV fields, found {len(fields)} field(s)")
    timestamp_ns = _integer(fields[0], "timestamp")
    code = _integer(fields[1], "code")
    latency_ns = _integer(fields[2], "latency")
    size = _integer(fields[4], "bytes_in")
    return _row(timestamp_ns // 1000, latency_ns, code, fields[5], size)


def _row(
    start_us: int, latency_ns: int, code: int, message: str, size: int | None
) -> tuple[int, int, int, str | None, int | None]:
    if latency_ns < 0:
        raise BadLine(f"latency {latency_ns} is negative")
    if not 0 <= code <= 999:
        raise BadLine(f"code {code} is not an HTTP status")
    if size is not None and size < 0:
        raise BadLine(f"bytes_in {size} is negative")
    error = classify_error(message or "no response") if code == 0 else None
    return start_us, (latency_ns + 500) // 1000, code, error, size


def _integer(value: Any, name: str) -> int:
    if isinstance(value, bool):
        raise BadLine(f"{name} {value!r} is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise BadLine(f"{name} {value!r} is not an integer")


def _refuse_binary(path: Path) -> None:
    with path.open("rb") as f:
        head = f.read(512)
    if head[:2] == b"\x1f\x8b":
        return  # gzip: open_text reads it
    text_bytes = bytes(range(32, 127)) + b"\t\r\n"
    if head and sum(b not in text_bytes for b in head) > len(head) // 10:
        raise ImportFormatError(
            path,
            None,
            "binary data, likely vegeta's own results format; "
            "convert it first with `vegeta encode --to json`",
        )
