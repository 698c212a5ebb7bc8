"""k6's `--out json=FILE` output: one JSON object a line (gzip too, as `file.gz`).

    {"metric":"http_req_duration","type":"Point","data":{"time":"...","value":5.49,
     "tags":{"status":"200","method":"GET","url":"...","error_code":"1212", ...}}}

Each `http_req_duration` point is a request: `value` is its duration in ms, `time` its
end (k6 stamps a request's samples with its end), so the start is `time - value`. The
`http_req_failed` point k6 writes with the same time and tags says whether the request
failed by the script's idea of an expected response; where present it becomes the
`failed` column. Status "0" is a request with no response: its error class comes from
k6's `error_code` tag. The `vus` gauge gives users and steps. Other metrics are ignored.
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

from pinchpoint.importers.common import (
    Imported,
    RequestRows,
    Skipped,
    assign_steps,
    check_readable,
    classify_error,
    level_steps,
    open_text,
    rfc3339_us,
)

TOOL = "k6"
DURATION = "http_req_duration"
FAILED = "http_req_failed"
VUS = "vus"

# k6's error codes (lib/netext/httpext/error_codes.go) for requests with no response.
ERROR_CODES = {
    1050: "timeout",
    1201: "closed",
    1211: "connect_timeout",
    1212: "connect_refused",
    1220: "reset",
}
CONNECT_CODES = (range(1100, 1200), range(1210, 1220), range(1300, 1400))


class BadLine(ValueError):
    pass


def read(path: Path) -> Imported:
    path = check_readable(path)
    requests: list[tuple[int, int, int | None, str | None, tuple[str, str]]] = []
    failed: dict[tuple[str, str], deque[bool]] = defaultdict(deque)
    vus_times: list[float] = []
    vus_levels: list[int] = []
    skipped = Skipped()
    lines = 0
    for number, line in open_text(path):
        lines = number
        text = line.strip()
        if not text:
            continue
        try:
            record = _record(text)
            if record.get("type") != "Point":
                continue
            metric = record["metric"]
            if metric == DURATION:
                requests.append(_request(record["data"]))
            elif metric == FAILED:
                data = record["data"]
                failed[_key(data)].append(_number(data.get("value"), "value") != 0)
            elif metric == VUS:
                data = record["data"]
                vus_times.append(_time_us(data) / 1e6)
                vus_levels.append(int(_number(data.get("value"), "value")))
        except BadLine as exc:
            skipped.add(number, str(exc))
    if not requests:
        raise skipped.error(path, f"no {DURATION} points (expected k6 `--out json` output)")

    rows = RequestRows()
    any_failed = any(failed.values())
    flags: list[bool | None] = []
    for start_us, latency_us, status, error, key in requests:
        rows.add(start_us, latency_us, status, error)
        queue = failed.get(key)
        flags.append(queue.popleft() if queue else None)
    if any_failed:
        rows.failed = flags
    imported = Imported(
        tool=TOOL, lines=lines, skipped=skipped, requests=rows.frame(), sources=[path]
    )
    imported.span_from_requests()
    if vus_levels and imported.started is not None and imported.ended is not None:
        imported.steps = level_steps(vus_times, vus_levels, imported.started, imported.ended)
        assert imported.requests is not None
        imported.requests = assign_steps(imported.requests, imported.steps)
    return imported


def _record(text: str) -> dict[str, Any]:
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadLine(f"not JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(record, dict) or "type" not in record:
        raise BadLine("not a k6 JSON output object (no 'type')")
    if record["type"] == "Point":
        if not isinstance(record.get("metric"), str):
            raise BadLine("a Point without a metric name")
        if not isinstance(record.get("data"), dict):
            raise BadLine("a Point without data")
    return record


def _request(data: dict[str, Any]) -> tuple[int, int, int | None, str | None, tuple[str, str]]:
    end_us = _time_us(data)
    duration_ms = _number(data.get("value"), "value")
    if duration_ms < 0:
        raise BadLine(f"{DURATION} {duration_ms} is negative")
    latency_us = round(duration_ms * 1000)
    tags = data.get("tags") or {}
    if not isinstance(tags, dict):
        raise BadLine("tags is not an object")
    status = _status(tags.get("status"))
    error = _error(tags) if status == 0 else None
    return end_us - latency_us, latency_us, status, error, _key(data)


def _key(data: dict[str, Any]) -> tuple[str, str]:
    """What ties a request's samples together: k6 gives them one time and one tag set."""
    return str(data.get("time")), json.dumps(data.get("tags"), sort_keys=True)


def _time_us(data: dict[str, Any]) -> int:
    time = data.get("time")
    if not isinstance(time, str):
        raise BadLine(f"time {time!r} is not an RFC 3339 string")
    try:
        return rfc3339_us(time)
    except ValueError as exc:
        raise BadLine(str(exc)) from None


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadLine(f"{name} {value!r} is not a number")
    return float(value)


def _status(value: Any) -> int | None:
    if value is None or value == "":
        return None
    try:
        status = int(value)
    except (TypeError, ValueError):
        raise BadLine(f"status tag {value!r} is not an HTTP status") from None
    if not 0 <= status <= 999:
        raise BadLine(f"status tag {value!r} is not an HTTP status")
    return status


def _error(tags: dict[str, Any]) -> str:
    try:
        code = int(tags.get("error_code", ""))
    except (TypeError, ValueError):
        code = None
    if code is not None:
        if code in ERROR_CODES:
            return ERROR_CODES[code]
        if any(code in r for r in CONNECT_CODES):
            return "connect_error"
    return classify_error(str(tags.get("error") or "no response"))
