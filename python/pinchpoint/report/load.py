"""What the report shows of a run folder, taken from its view (`rundir.view.RunView`): the
verdict (required) and whatever else is there, a file that is missing or damaged noted in
`problems` instead. The requests stay in their file: the report scans them (`requests` is a
LazyFrame) into their digest by steady window, once, and into its charts' time buckets and
sample."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from os import PathLike
from pathlib import Path
from typing import Any, cast

import polars as pl

from pinchpoint.rundir import files
from pinchpoint.rundir.digest import Digest
from pinchpoint.rundir.scan import collect
from pinchpoint.rundir.steady import SENT_AT, steady_requests, usable_windows
from pinchpoint.rundir.tier_sample import sample
from pinchpoint.rundir.view import RunView, as_view

__all__ = ["steady_requests"]

REQUEST_COLUMNS = ["step", "users", "start_us", "latency_us", "status", "error"]
RESOURCE_COLUMNS = ["ts", "component", "cpu_cores", "rss_bytes", "processes"]
# Read when there, for the backlog and host I/O charts (report/resource_charts.py).
OPTIONAL_RESOURCE_COLUMNS = [
    "listen_backlog", "disk_read_bytes_s", "disk_write_bytes_s",
    "net_rx_bytes_s", "net_tx_bytes_s", "net_loopback_bytes_s",
]  # fmt: skip


@dataclass
class ReportInput:
    view: RunView
    verdict: dict[str, Any]
    run: dict[str, Any] = field(default_factory=dict)
    plan_text: str | None = None
    requests: pl.LazyFrame | None = None  # a scan of requests.parquet
    resources: pl.DataFrame | None = None
    tier_records: dict[str, int] | None = None  # tagged log records per component
    # Each tier record's request, end and duration, for the waterfalls.
    tiers: pl.DataFrame | None = None
    problems: dict[str, str] = field(default_factory=dict)  # file name -> why it is unused

    @property
    def run_dir(self) -> Path:
        return self.view.path

    def digest(self) -> Digest | None:
        """The requests' digest by run.json's steady windows, with each group's users and
        times; None without requests."""
        if self.requests is None:
            return None
        return self.view.digest(self.requests, usable_windows(self.run), extent=True)

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


def load_run(run_dir: RunView | files.RunFolder | PathLike[str]) -> ReportInput:
    """Read the run folder. Raises if verdict.json is missing or unreadable; every other
    file is optional and a problem with it is recorded in `problems` instead."""
    view = as_view(run_dir)
    if not view.has(files.VERDICT):
        raise FileNotFoundError(f"{view.folder / files.VERDICT}: not found; analyze the run first")
    try:
        verdict = view.verdict
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the verdict: {exc}") from exc

    data = ReportInput(view=view, verdict=verdict)
    data.run = _read_run(view, data.problems)
    data.plan_text = _read_plan(view, data.problems)
    data.requests = _scan_parquet(
        view, files.REQUESTS, REQUEST_COLUMNS, data.problems, [*SENT_AT, "req_id"]
    )
    data.resources = _read_parquet(
        view, files.RESOURCES, RESOURCE_COLUMNS, data.problems, OPTIONAL_RESOURCE_COLUMNS
    )
    _read_tiers(data, view)
    return data


def _read_tiers(data: ReportInput, view: RunView) -> None:
    """The tiers' records for the waterfall (a sample of the requests' in a big run) and
    the count of each component's, in a pass over tiers.parquet."""
    scan = _scan_parquet(
        view, files.TIERS, ["component"], data.problems, ["req_id", "ts", "duration_s"]
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


def _why(view: RunView, name: str, exc: Exception) -> str:
    if isinstance(exc, FileNotFoundError):
        return "not found"
    return str(exc).removeprefix(f"{view.folder / name}: ")


def _read_run(view: RunView, problems: dict[str, str]) -> dict[str, Any]:
    try:
        return view.run
    except (OSError, ValueError) as exc:
        problems[files.RUN] = _why(view, files.RUN, exc)
        return {}


def _read_plan(view: RunView, problems: dict[str, str]) -> str | None:
    if not view.has(files.PLAN):
        problems[files.PLAN] = "not found"
        return None
    try:
        return view.plan_text
    except OSError as exc:
        problems[files.PLAN] = f"unreadable: {exc}"
        return None


def _read_parquet(
    view: RunView,
    name: str,
    columns: Sequence[str],
    problems: dict[str, str],
    optional: Sequence[str] = (),
) -> pl.DataFrame | None:
    try:
        return view.table(name, columns, optional)
    except (OSError, ValueError) as exc:
        problems[name] = _why(view, name, exc)
        return None


def _scan_parquet(
    view: RunView,
    name: str,
    columns: Sequence[str],
    problems: dict[str, str],
    optional: Sequence[str] = (),
) -> pl.LazyFrame | None:
    try:
        return view.scan(name, columns, optional)
    except (OSError, ValueError) as exc:
        problems[name] = _why(view, name, exc)
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
