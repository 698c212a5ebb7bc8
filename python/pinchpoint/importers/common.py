"""What every import shares: the error type, skipped-line bookkeeping, the request rows,
timestamps, error classes, and writing the run folder."""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import polars as pl

from pinchpoint.redact import private_files
from pinchpoint.rundir import files

SUMMARY_SCHEMA = "pinchpoint.summary/1"
REQUEST_SCHEMA: dict[str, Any] = {
    "req_id": pl.UInt64,
    "step": pl.UInt32,
    "users": pl.UInt32,
    "start_us": pl.Int64,
    "latency_us": pl.Int64,
    "status": pl.UInt16,
    "error": pl.String,
    "bytes": pl.UInt64,
}
ERROR_CLASSES = (
    "connect_refused",
    "connect_timeout",
    "connect_error",
    "tls",
    "reset",
    "closed",
    "timeout",
    "io",
)
MAX_EXAMPLES = 5


class ImportFormatError(ValueError):
    """The input cannot be imported. The message names the file, the line when there is
    one, and what is wrong."""

    def __init__(self, path: Path, line: int | None, what: str) -> None:
        self.path = Path(path)
        self.line = line
        self.what = what
        where = f"{self.path}, line {line}" if line is not None else str(self.path)
        super().__init__(f"{where}: {what}")


@dataclass
class Skipped:
    """Lines that could not be read: counted, with the first few reasons kept."""

    count: int = 0
    examples: list[tuple[int, str]] = field(default_factory=list)

    def add(self, line: int, reason: str) -> None:
        self.count += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append((line, reason))

    def error(self, path: Path, what: str) -> ImportFormatError:
        """The error for a file of which nothing could be read."""
        if self.examples:
            line, reason = self.examples[0]
            more = f" ({self.count} unreadable lines)" if self.count > 1 else ""
            return ImportFormatError(path, line, f"{reason}; {what}{more}")
        return ImportFormatError(path, None, what)


@dataclass
class RequestRows:
    """Per-request rows, in file order; req_id is the row's position."""

    start_us: list[int] = field(default_factory=list)
    latency_us: list[int] = field(default_factory=list)
    status: list[int | None] = field(default_factory=list)
    error: list[str | None] = field(default_factory=list)
    bytes: list[int | None] = field(default_factory=list)
    failed: list[bool | None] | None = None  # only for sources that say which requests failed

    def add(
        self,
        start_us: int,
        latency_us: int,
        status: int | None = None,
        error: str | None = None,
        size: int | None = None,
    ) -> None:
        self.start_us.append(start_us)
        self.latency_us.append(latency_us)
        self.status.append(status)
        self.error.append(error)
        self.bytes.append(size)

    def __len__(self) -> int:
        return len(self.start_us)

    def frame(self) -> pl.DataFrame:
        n = len(self)
        values: dict[str, Any] = {
            "req_id": range(n),
            "step": [0] * n,
            "users": [0] * n,
            "start_us": self.start_us,
            "latency_us": self.latency_us,
            "status": self.status,
            "error": self.error,
            "bytes": self.bytes,
        }
        columns = {
            name: pl.Series(name, values[name], dtype=dtype)
            for name, dtype in REQUEST_SCHEMA.items()
        }
        if self.failed is not None:
            columns["failed"] = pl.Series("failed", self.failed, dtype=pl.Boolean)
        return pl.DataFrame(columns)


@dataclass
class Imported:
    """What a format module read: per-request rows, or an aggregate summary (and series)."""

    tool: str
    lines: int
    skipped: Skipped
    requests: pl.DataFrame | None = None
    summary: dict[str, Any] | None = None
    series: pl.DataFrame | None = None
    started: float | None = None
    ended: float | None = None
    steps: list[dict[str, Any]] | None = None
    sources: list[Path] = field(default_factory=list)  # every file read, the main one first

    def span_from_requests(self) -> None:
        """Start and end of the run from the requests, where not already known."""
        if self.requests is None or self.requests.height == 0:
            return
        ends = self.requests["start_us"] + self.requests["latency_us"]
        if self.started is None:
            self.started = float(cast(float, self.requests["start_us"].min())) / 1e6
        if self.ended is None:
            self.ended = float(cast(float, ends.max())) / 1e6


def level_steps(
    times_s: list[float], users: list[int], start_s: float, end_s: float
) -> list[dict[str, Any]]:
    """Step windows from samples of the user count: a step per run of equal counts, from
    its first sample (the run's start for the first) to the next step's (the run's end)."""
    starts: list[tuple[float, int]] = []
    for t, u in sorted(zip(times_s, users, strict=True)):
        if not starts or starts[-1][1] != u:
            starts.append((t, u))
    steps = []
    for i, (t, u) in enumerate(starts):
        start = min(t, start_s) if i == 0 else t
        end = starts[i + 1][0] if i + 1 < len(starts) else max(end_s, t)
        steps.append({"step": i, "users": u, "start": start, "end": end})
    return steps


def assign_steps(requests: pl.DataFrame, steps: list[dict[str, Any]]) -> pl.DataFrame:
    """Each request's step and users: the step its start falls in (the first step for a
    request before it)."""
    if not steps or requests.height == 0:
        return requests
    bounds = pl.Series([round(s["start"] * 1e6) for s in steps[1:]], dtype=pl.Int64)
    index = bounds.search_sorted(requests["start_us"], side="right")
    users = pl.Series([s["users"] for s in steps], dtype=pl.UInt32)
    return requests.with_columns(
        pl.Series("step", index, dtype=pl.UInt32),
        pl.Series("users", users.gather(index), dtype=pl.UInt32),
    )


def open_text(path: Path) -> Iterator[tuple[int, str]]:
    """(line number from 1, line without its newline) of a text file, gzip or not.

    Bytes that are not UTF-8 are replaced, so one broken line costs one line."""
    with path.open("rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    opener = gzip.open if gzipped else open
    with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as f:
        for number, line in enumerate(f, start=1):
            yield number, line.rstrip("\r\n")


def check_readable(path: Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise ImportFormatError(path, None, "no such file")
    if not path.is_file():
        raise ImportFormatError(path, None, "not a file")
    return path


_RFC3339 = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:[.,](\d+))?(Z|z|[+-]\d{2}:?\d{2})?$"
)


def rfc3339_us(text: str) -> int:
    """Unix microseconds of an RFC 3339 time with any number of fraction digits (Go
    writes nanoseconds), truncated to the microsecond. No zone means UTC."""
    m = _RFC3339.match(text.strip())
    if m is None:
        raise ValueError(f"not an RFC 3339 time: {text!r}")
    day, clock, fraction, zone = m.groups()
    if zone is None or zone in ("Z", "z"):
        zone = "+00:00"
    elif ":" not in zone:
        zone = f"{zone[:3]}:{zone[3:]}"
    whole = datetime.fromisoformat(f"{day}T{clock}{zone}")
    seconds = int(whole.timestamp())
    micros = int((fraction or "0")[:6].ljust(6, "0"))
    return seconds * 1_000_000 + micros


def seconds_to_us(text: str) -> int:
    """Microseconds from a decimal number of seconds, exactly as written (no float
    rounding surprises on 10-digit unix times)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {text!r}")
    whole, _, fraction = text.strip().partition(".")
    if "e" in text.lower() or not whole.lstrip("+-").isdigit():
        return round(value * 1e6)
    negative = whole.startswith("-")
    micros = int(whole.lstrip("+-") or "0") * 1_000_000 + int(fraction[:6].ljust(6, "0") or "0")
    if len(fraction) > 6 and fraction[6] >= "5":
        micros += 1
    return -micros if negative else micros


def classify_error(message: str) -> str:
    """One of the run folder's error classes for a client's error message."""
    text = message.lower()
    if "refused" in text:
        return "connect_refused"
    if "reset" in text:
        return "reset"
    if "dial" in text or "no such host" in text or "lookup" in text:
        if "timeout" in text or "timed out" in text:
            return "connect_timeout"
        return "connect_error"
    if "timeout" in text or "timed out" in text or "deadline exceeded" in text:
        return "timeout"
    if "eof" in text or "closed" in text or "broken pipe" in text:
        return "closed"
    return "io"


def new_run_id(tool: str, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%d-%H%M%S}-{tool}-{secrets.token_hex(2)}"


@private_files()
def write_run(imported: Imported, runs_dir: Path) -> Path:
    """Write the run folder under runs_dir and return it. Written to a hidden folder
    first and renamed, so a half-written import never looks like a run. The folder (and
    a runs_dir made for it) is 0700, its files 0600."""
    runs_dir = Path(runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    while True:
        run_id = new_run_id(imported.tool)
        run_dir = runs_dir / run_id
        if not run_dir.exists():
            break
    tmp = runs_dir / f".{run_id}.importing"
    tmp.mkdir()
    try:
        if imported.requests is not None:
            imported.requests.write_parquet(
                tmp / files.REQUESTS, row_group_size=files.REQUESTS_ROW_GROUP
            )
        if imported.series is not None:
            imported.series.write_parquet(tmp / "series.parquet")
        if imported.summary is not None:
            _write_json(tmp / files.SUMMARY, imported.summary)
        _write_json(tmp / files.RUN, _run_json(imported, run_id))
        os.replace(tmp, run_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return run_dir


def _run_json(imported: Imported, run_id: str) -> dict[str, Any]:
    main = imported.sources[0]
    run: dict[str, Any] = {
        "run_id": run_id,
        "started": imported.started,
        "ended": imported.ended,
        "interrupted": False,
        "source": {"tool": imported.tool, "file": main.name},
    }
    if len(imported.sources) > 1:
        run["source"]["files"] = [p.name for p in imported.sources]
    if imported.steps is not None:
        run["steps"] = imported.steps
    rows = imported.requests.height if imported.requests is not None else None
    run["import"] = {
        "imported_at": datetime.now(UTC).timestamp(),
        "lines": imported.lines,
        "rows": rows,
        "skipped_lines": imported.skipped.count,
        "skipped_examples": [
            {"line": line, "reason": reason} for line, reason in imported.skipped.examples
        ],
    }
    return run


def _write_json(path: Path, value: dict[str, Any]) -> None:
    path.write_text(json.dumps(value, indent=2, allow_nan=False) + "\n", encoding="utf-8")
