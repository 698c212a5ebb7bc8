"""Reads a run folder for the reports: the verdict (required) and whatever else is there.
The requests stay in their file: the report scans them (`requests` is a LazyFrame) into
their digest by steady window, once, and into its charts' time buckets and sample."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import polars as pl

from pinchpoint.analyze.digest import Digest
from pinchpoint.analyze.digest_store import folder_digest
from pinchpoint.analyze.tier_records import sample
from pinchpoint.rundir import files
from pinchpoint.rundir.scan import collect
from pinchpoint.rundir.steady import SENT_AT, steady_requests, usable_windows

__all__ = ["steady_requests"]

REQUEST_COLUMNS = ["step", "users", "start_us", "latency_us", "status", "error"]
RESOURCE_COLUMNS = ["ts", "component", "cpu_cores", "rss_bytes", "processes"]
# Read when there, for the backlog and host I/O charts (report/resource_charts.py).
OPTIONAL_RESOURCE_COLUMNS = [
    "listen_backlog", "disk_read_bytes_s", "disk_write_bytes_s",
    "net_rx_bytes_s", "net_tx_bytes_s", "net_loopback_bytes_s",
]  # fmt: skip


@dataclass
class RunData:
    run_dir: Path
    verdict: dict[str, Any]
    run: dict[str, Any] = field(default_factory=dict)
    plan_text: str | None = None
    requests: pl.LazyFrame | None = None  # a scan of requests.parquet
    resources: pl.DataFrame | None = None
    tier_records: dict[str, int] | None = None  # tagged log records per component
    # Each tier record's request, end and duration, for the waterfalls.
    tiers: pl.DataFrame | None = None
    problems: dict[str, str] = field(default_factory=dict)  # file name -> why it is unused
    # The requests' digest, by the latencies each counts above (see `digest`).
    digests: dict[tuple[float, ...], Digest] = field(default_factory=dict, repr=False)

    def digest(self, over_ms: Sequence[float] | None = None) -> Digest | None:
        """The requests' digest by run.json's steady windows, with each group's users and
        times, counting the latencies above `over_ms` (None: any digest computed already
        will do); None without requests."""
        if self.requests is None:
            return None
        if over_ms is None and self.digests:
            return next(iter(self.digests.values()))
        key = tuple(over_ms or ())
        if key not in self.digests:
            windows = usable_windows(self.run)
            folder = files.RunFolder(self.run_dir)
            self.digests[key] = folder_digest(folder, self.requests, windows, key, extent=True)
        return self.digests[key]

    def steady_digest(self) -> Digest | None:
        """The digest of the requests of every step's steady part (`steady_requests`): all
        of them when run.json has no usable step windows."""
        digest = self.digest()
        if digest is None or not usable_windows(self.run):
            return digest
        return digest.where(pl.col("window").is_not_null())

    def requests_extent(self) -> tuple[float, float] | None:
        """The first request's send and the last one's answer, in unix seconds."""
        digest = self.digest()
        first = digest.first("first_us") if digest is not None else None
        last = digest.first("last_us", "max") if digest is not None else None
        if first is None or last is None:
            return None
        return float(first) / 1e6, float(last) / 1e6

    def start_s(self) -> float | None:
        """Run start in unix seconds: run.json, else the first request or sample."""
        start = _unix_seconds(self.run, ("started", "start", "start_s", "started_at"))
        if start is not None:
            return start
        candidates = []
        extent = self.requests_extent()
        if extent is not None:
            candidates.append(extent[0])
        if self.resources is not None and self.resources.height:
            candidates.append(float(cast(float, self.resources["ts"].min())))
        return min(candidates) if candidates else None

    def end_s(self) -> float | None:
        return _unix_seconds(self.run, ("ended", "end", "end_s", "ended_at"))


def load_run(run_dir: Path) -> RunData:
    """Read `run_dir`. Raises if verdict.json is missing or unreadable; every other file
    is optional and a problem with it is recorded in `problems` instead."""
    folder = files.RunFolder(run_dir)
    if not folder.has(files.VERDICT):
        raise FileNotFoundError(f"{folder / files.VERDICT}: not found; analyze the run first")
    try:
        verdict = dict(folder.read_verdict())
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the verdict: {exc}") from exc

    data = RunData(run_dir=folder.path, verdict=verdict)
    data.run = _read_json(folder, files.RUN, data.problems)
    data.plan_text = _read_text(folder, files.PLAN, data.problems)
    data.requests = _scan_parquet(
        folder, files.REQUESTS, REQUEST_COLUMNS, data.problems, [*SENT_AT, "req_id"]
    )
    data.resources = _read_parquet(
        folder, files.RESOURCES, RESOURCE_COLUMNS, data.problems, OPTIONAL_RESOURCE_COLUMNS
    )
    _read_tiers(data, folder)
    return data


def _read_tiers(data: RunData, folder: files.RunFolder) -> None:
    """The tiers' records for the waterfall (a sample of the requests' in a big run) and
    the count of each component's, in a pass over tiers.parquet."""
    scan = _scan_parquet(
        folder, files.TIERS, ["component"], data.problems, ["req_id", "ts", "duration_s"]
    )
    if scan is None:
        return
    try:
        counts = collect(scan.group_by("component").len()).sort("component")
        data.tiers = sample(scan, int(counts["len"].sum())).frame
    except ValueError as exc:
        data.problems[files.TIERS] = str(exc)
        return
    data.tier_records = {str(c): int(n) for c, n in counts.iter_rows()}


# A missing, damaged or foreign file must cost one chart, not the whole report: what is
# wrong with it goes into `problems` under its name.


def _why(folder: files.RunFolder, name: str, exc: Exception) -> str:
    if isinstance(exc, FileNotFoundError):
        return "not found"
    return str(exc).removeprefix(f"{folder / name}: ")


def _read_json(folder: files.RunFolder, name: str, problems: dict[str, str]) -> dict[str, Any]:
    try:
        return folder.read_json(name)
    except (OSError, ValueError) as exc:
        problems[name] = _why(folder, name, exc)
        return {}


def _read_text(folder: files.RunFolder, name: str, problems: dict[str, str]) -> str | None:
    if not folder.has(name):
        problems[name] = "not found"
        return None
    try:
        return (folder / name).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        problems[name] = f"unreadable: {exc}"
        return None


def _read_parquet(
    folder: files.RunFolder,
    name: str,
    columns: Sequence[str],
    problems: dict[str, str],
    optional: Sequence[str] = (),
) -> pl.DataFrame | None:
    try:
        return folder.read_frame(name, columns, optional)
    except (OSError, ValueError) as exc:
        problems[name] = _why(folder, name, exc)
        return None


def _scan_parquet(
    folder: files.RunFolder,
    name: str,
    columns: Sequence[str],
    problems: dict[str, str],
    optional: Sequence[str] = (),
) -> pl.LazyFrame | None:
    try:
        return folder.scan_frame(name, columns, optional)
    except (OSError, ValueError) as exc:
        problems[name] = _why(folder, name, exc)
        return None


def _unix_seconds(run: dict[str, Any], keys: tuple[str, ...]) -> float | None:
    for key in keys:
        value = run.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return datetime.fromisoformat(value).timestamp()
            except ValueError:
                continue
    return None
