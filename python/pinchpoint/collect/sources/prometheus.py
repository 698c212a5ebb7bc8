"""Resource series from Prometheus servers the user already runs, read after the run.

The collector takes the run's window from start() and stop(), then asks each server of the
plan's `[[prometheus]]` tables for `/api/v1/query_range` over it: one query per column of
each series (`promql.py`), their numbers made into rows of resources.parquet. overlay()
lays them over the sampler's rows: a `replace` series stands for the sampler's rows of its
host or component, a `merge` series fills the cells the sampler left null (the Prometheus
row nearest in time, within a step) and makes the rows of what the sampler does not watch.

Nothing here raises once the collector exists: a server that cannot be reached or answers
an error becomes a problem (in collection.json and on the terminal), and the sampler's
rows are kept where Prometheus gave none.
"""

from __future__ import annotations

import math
import os
import re
import ssl
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pyarrow as pa

from pinchpoint.collect.logs.reader import FileCounts, TierBatch
from pinchpoint.collect.resources.sampler import conform
from pinchpoint.collect.sources.promql import (
    QueryError,
    fill,
    matrix_values,
    rows_table,
    series_queries,
    series_rows,
)
from pinchpoint.plan.prometheus import Prometheus
from pinchpoint.rundir.schemas import RESOURCES_SCHEMA

# Prometheus answers at most 11 000 points a series: longer runs are asked in parts.
MAX_POINTS = 10_000
# Assumed when the server does not say how often it scrapes (its example config's).
DEFAULT_SCRAPE_S = 15.0
# After the run, wait up to this long for the scrape that covers its last moments.
MAX_SETTLE_S = 5.0
_PROM_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


class _Lost(Exception):
    """The server cannot be reached: no more queries to it."""


def prometheus_duration(text: str) -> float | None:
    """Seconds of a Prometheus duration such as "15s" or "1m30s"; None if it is not one."""
    parts = _PROM_DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def rate_window(step_s: float, scrape_s: float) -> float:
    """The range of rate(): the larger of step + scrape and 4 scrapes, as Grafana's
    `$__rate_interval`, so each rate has samples to work with."""
    return max(step_s + scrape_s, 4 * scrape_s)


def _credentials(server: Prometheus) -> dict[str, Any]:
    from pinchpoint.plan.errors import PlanError

    def env(name: str) -> str:
        value = os.environ.get(name, "").strip()
        if not value:
            raise PlanError(f"prometheus {server.url}: environment variable {name} is not set")
        return value

    if server.token_env is not None:
        return {"headers": {"Authorization": f"Bearer {env(server.token_env)}"}}
    if server.username_env is not None and server.password_env is not None:
        return {"auth": httpx.BasicAuth(env(server.username_env), env(server.password_env))}
    return {}


def client(server: Prometheus) -> httpx.Client:
    """An HTTP client for the server; raises PlanError for missing credentials or CA."""
    from pinchpoint.plan.errors import PlanError

    verify: ssl.SSLContext | bool = True
    if server.ca_file:
        try:
            verify = ssl.create_default_context(cafile=server.ca_file)
        except (OSError, ssl.SSLError) as e:
            raise PlanError(f"prometheus {server.url}: ca_file {server.ca_file}: {e}") from None
    credentials = _credentials(server)
    headers = {"Accept": "application/json", **credentials.pop("headers", {})}
    return httpx.Client(
        base_url=server.url,
        headers=headers,
        timeout=httpx.Timeout(server.timeout),
        verify=verify,
        trust_env=False,
        **credentials,
    )


def query_range(
    http: httpx.Client, query: str, start: float, end: float, step_s: float
) -> dict[float, float]:
    """The numbers of `query` from start to end every step (asked in parts of MAX_POINTS),
    summed over its series by time."""
    values: dict[float, float] = {}
    span = step_s * (MAX_POINTS - 1)
    parts = max(1, math.ceil((end - start) / (span + step_s) + 1e-9))
    for k in range(parts):
        first = start + k * (span + step_s)
        last = min(end, first + span)
        if first > end:
            break
        params = {"query": query, "start": f"{first:.3f}", "end": f"{last:.3f}", "step": step_s}
        payload = _get(http, "/api/v1/query_range", params)
        values.update(matrix_values(payload)[0])
    return values


def scrape_interval(http: httpx.Client) -> float | None:
    """The longest scrape interval of the server's active targets, as it says; None if it
    does not say (an older Prometheus, a proxy in front of it). Raises _Lost when the
    server cannot be reached."""
    try:
        response = http.get("/api/v1/targets", params={"state": "active"})
    except httpx.HTTPError as e:
        raise _Lost(_describe(e)) from e
    try:
        targets = response.json()["data"]["activeTargets"]
        seconds = [prometheus_duration(str(t.get("scrapeInterval", ""))) for t in targets]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    known = [s for s in seconds if s]
    return max(known) if known else None


def _get(http: httpx.Client, path: str, params: dict[str, Any]) -> Any:
    """The JSON object of a GET: Prometheus's answer, also to a bad or failed query (HTTP
    400 or 422). Raises _Lost when the server cannot be reached or answers otherwise."""
    try:
        response = http.get(path, params=params)
    except httpx.HTTPError as e:
        raise _Lost(_describe(e)) from e
    try:
        payload = response.json()
    except ValueError:
        payload = None
    if response.status_code in (200, 400, 422) and isinstance(payload, dict):
        return payload
    raise _Lost(f"HTTP {response.status_code}: {response.text[:200]!r}")


class PrometheusCollector:
    """The plan's `[[prometheus]]` servers, read once after the run."""

    name: str | None = None

    def __init__(self, servers: Sequence[Prometheus]) -> None:
        self.servers = list(servers)
        self.problems: list[str] = []
        self._clients = [client(s) for s in self.servers]
        self._interval_s = 1.0
        self._start: float | None = None
        self._end: float | None = None
        self._table: pa.Table | None = None
        self._reports: list[dict[str, Any]] = []

    # -- the collector interface -------------------------------------------------------

    def start(self, run_id: str, interval_s: float) -> None:
        self._interval_s = interval_s
        self._start = time.time()

    def stop(self) -> None:
        if self._end is None:
            self._end = time.time()

    def resources(self) -> pa.Table:
        """The rows of every series, queried the first time they are asked for."""
        if self._table is None:
            self.stop()
            tables = [self._fetch(s, c) for s, c in zip(self.servers, self._clients, strict=True)]
            self._table = pa.concat_tables(tables) if tables else RESOURCES_SCHEMA.empty_table()
        return self._table

    def overlay(self, sampled: pa.Table) -> pa.Table:
        """The sampler's rows with these laid over them (see the module's doc)."""
        fetched = self.resources()
        modes: dict[str, tuple[str, float]] = {}
        for server, report in zip(self.servers, self._reports, strict=True):
            for name, series in server.series.items():
                modes[name] = (series.mode, report["step_s"])
                entry = report["series"][name]
                entry["used"] = "sampler" if not entry["rows"] else series.mode
                if series.mode == "replace" and not entry["rows"]:
                    self.problems.append(
                        f"prometheus {server.url}: no rows for {name}: the sampler's rows are kept"
                    )
        import polars as pl

        try:
            return overlay(sampled, fetched, modes)
        except (pl.exceptions.PolarsError, pa.ArrowException, ValueError, TypeError) as e:
            # The run keeps the sampler's rows.
            self.problems.append(f"prometheus: its rows could not be laid over: {e}")
            return sampled

    def collect_logs(self, sink: Callable[[TierBatch], None]) -> list[FileCounts]:
        return []

    def report(self) -> dict[str, Any]:
        """collection.json's `prometheus` section: per server what was read and what failed."""
        return {"prometheus": self._reports}

    def log_marks(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        for http in self._clients:
            http.close()

    # -- helpers -----------------------------------------------------------------------

    def _fetch(self, server: Prometheus, http: httpx.Client) -> pa.Table:
        start = self._start if self._start is not None else time.time()
        end = max(start, self._end or start)
        step = server.step or self._interval_s
        report: dict[str, Any] = {
            "url": server.url,
            "status": "ok",
            "start": start,
            "end": end,
            "step_s": step,
            "series": {name: {"mode": s.mode, "rows": 0} for name, s in server.series.items()},
            "problems": [],
        }
        self._reports.append(report)

        def problem(text: str) -> None:
            message = f"prometheus {server.url}: {text}"
            report["problems"].append(message)
            self.problems.append(message)

        rows: list[dict] = []
        try:
            scrape = scrape_interval(http)
            report["scrape_interval_s"] = scrape
            scrape = scrape or DEFAULT_SCRAPE_S
            window = server.rate_window or rate_window(step, scrape)
            report["rate_window_s"] = window
            # The scrape after the run's end covers its last moments.
            time.sleep(max(0.0, end + min(scrape, MAX_SETTLE_S) - time.time()))
            for name, series in server.series.items():
                columns: dict[str, dict[float, float]] = {}
                empty: list[str] = []
                for column, query in series_queries(series).items():
                    try:
                        values = query_range(http, fill(query, window, step), start, end, step)
                    except QueryError as e:
                        problem(f"{name}.{column}: {e}")
                        report["status"] = "partial"
                        continue
                    columns[column] = values
                    if not values:
                        empty.append(column)
                made = series_rows(name, columns)
                entry = report["series"][name]
                entry.update(rows=len(made), no_data=empty)
                if columns and not made:
                    problem(f"{name}: no data in the run's window (check its selector)")
                rows.extend(made)
        except _Lost as e:
            report["status"] = "failed"
            problem(f"cannot be read: {e}")
            return RESOURCES_SCHEMA.empty_table()
        return rows_table(rows)


def overlay(sampled: pa.Table, fetched: pa.Table, modes: dict[str, tuple[str, float]]) -> pa.Table:
    """`sampled` with the rows of `fetched` laid over it; `modes` gives each fetched
    component's mode ("merge" or "replace") and how far apart in time (seconds) a merged
    row may be from the sampled row it fills."""
    import polars as pl

    sampled, fetched = conform(sampled), conform(fetched)
    if fetched.num_rows == 0:
        return sampled
    mine = pl.from_arrow(sampled)
    theirs = pl.from_arrow(fetched)
    assert isinstance(mine, pl.DataFrame) and isinstance(theirs, pl.DataFrame)
    names = set(theirs["component"].unique().to_list())
    parts = [mine.filter(~pl.col("component").is_in(list(names)))]
    values = [c for c in RESOURCES_SCHEMA.names if c not in ("ts", "component")]
    for name in sorted(names):
        own = mine.filter(pl.col("component") == name).sort("ts")
        their = theirs.filter(pl.col("component") == name).sort("ts")
        mode, tolerance = modes.get(name, ("merge", 1.0))
        if mode == "replace" or own.height == 0:
            parts.append(their)
            continue
        joined = own.join_asof(
            their.drop("component"),
            on="ts",
            strategy="nearest",
            tolerance=tolerance,
            suffix="_prometheus",
        )
        parts.append(
            joined.select(
                "ts",
                "component",
                *(pl.coalesce(c, f"{c}_prometheus").alias(c) for c in values),
            )
        )
    merged = pl.concat(parts, how="vertical_relaxed").sort("ts", maintain_order=True)
    return conform(merged.to_arrow())


def _describe(error: Exception) -> str:
    text = str(error) or type(error).__name__
    if isinstance(error, httpx.ConnectError):
        return f"cannot connect ({text})"
    if isinstance(error, httpx.TimeoutException):
        return f"timed out ({type(error).__name__})"
    return text
