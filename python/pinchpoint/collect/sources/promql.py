"""PromQL for the columns of resources.parquet, and `query_range` answers made into rows.

Each column is one query that gives one number per time: the presets aggregate with
`sum` (quantities), `max` (shares, the busiest disk or interface) or `count`; a raw query
that gives several series has them summed. Rates are over `$window` (the rate window);
counts per interval (CFS periods) are rates times `$step`, so that summing a step's rows
gives the step's count, as for the sampler's rows.

node_exporter (host rows): busy cores are all CPU modes but idle and iowait, of them niced
cores the `nice` mode less the niced guests' (as the sampler reads /proc/stat); used memory
is MemTotal - MemAvailable; pressure is the "some" (waiting) share; disks are the physical
ones (not partitions, loop, RAM, zram, device-mapper or md); the network is every
interface but `lo` (`lo` apart), and `net_util` the busiest interface's busier direction
over its `node_network_speed_bytes` (netclass collector). cAdvisor (component rows): the
container's CPU, working set, CFS periods and throttling, quota, limit and processes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from pinchpoint.plan.prometheus import Series
from pinchpoint.rundir.schemas import RESOURCES_SCHEMA

WINDOW = "$window"
STEP = "$step"
_DISKS = 'device!~"(z?ram|loop|fd|sr|dm-|md).*"'
_WIRE = 'device!="lo"'
_LOOPBACK = 'device="lo"'
_BUSY = 'mode!~"idle|iowait"'
_IDLE = 'mode="idle"'
_NICE = 'mode="nice"'
_INTEGER = {f.name for f in RESOURCES_SCHEMA if pa.types.is_integer(f.type)}


class QueryError(Exception):
    """Prometheus answered, but with an error or not with a range of numbers."""


def _selector(*matchers: str) -> str:
    return "{" + ",".join(m for m in matchers if m) + "}"


def node_exporter(selector: str = "") -> dict[str, str]:
    """Host columns from node_exporter's series; `selector` picks the host."""

    def m(metric: str, *matchers: str) -> str:
        return metric + _selector(*matchers, selector)

    def rate(metric: str, *matchers: str) -> str:
        return f"rate({m(metric, *matchers)}[{WINDOW}])"

    rx = rate("node_network_receive_bytes_total", _WIRE)
    tx = rate("node_network_transmit_bytes_total", _WIRE)
    speed = f"({m('node_network_speed_bytes', _WIRE)} > 0)"
    return {
        "cpu_cores": f"sum({rate('node_cpu_seconds_total', _BUSY)})",
        "cpu_nice_cores": (
            f"sum({rate('node_cpu_seconds_total', _NICE)}) - "
            f"(sum({rate('node_cpu_guest_seconds_total', _NICE)}) or vector(0))"
        ),
        "rss_bytes": (
            f"sum({m('node_memory_MemTotal_bytes')} - {m('node_memory_MemAvailable_bytes')})"
        ),
        "processes": f"count({m('node_cpu_seconds_total', _IDLE)})",
        "cpu_pressure": f"max({rate('node_pressure_cpu_waiting_seconds_total')})",
        "memory_pressure": f"max({rate('node_pressure_memory_waiting_seconds_total')})",
        "io_pressure": f"max({rate('node_pressure_io_waiting_seconds_total')})",
        "run_queue": f"sum({m('node_procs_running')})",
        "disk_read_bytes_s": f"sum({rate('node_disk_read_bytes_total', _DISKS)})",
        "disk_write_bytes_s": f"sum({rate('node_disk_written_bytes_total', _DISKS)})",
        "disk_util": f"max({rate('node_disk_io_time_seconds_total', _DISKS)})",
        "net_rx_bytes_s": f"sum({rx})",
        "net_tx_bytes_s": f"sum({tx})",
        "net_loopback_bytes_s": f"sum({rate('node_network_transmit_bytes_total', _LOOPBACK)})",
        "net_util": (
            f'max(label_replace({rx} / {speed}, "direction", "rx", "", "") or '
            f'label_replace({tx} / {speed}, "direction", "tx", "", ""))'
        ),
        "memory_limit_bytes": f"sum({m('node_memory_MemTotal_bytes')})",
    }


def cadvisor(selector: str) -> dict[str, str]:
    """Component columns from cAdvisor's series of the container(s) `selector` picks."""

    def m(metric: str, *matchers: str) -> str:
        return metric + _selector(*matchers, selector)

    def rate(metric: str) -> str:
        return f"rate({m(metric)}[{WINDOW}])"

    return {
        "cpu_cores": f"sum({rate('container_cpu_usage_seconds_total')})",
        "rss_bytes": f"sum({m('container_memory_working_set_bytes')})",
        "processes": f"sum({m('container_processes')})",
        "cpu_quota_cores": (
            f"sum(({m('container_spec_cpu_quota')} > 0) / {m('container_spec_cpu_period')})"
        ),
        "cpu_periods": f"sum({rate('container_cpu_cfs_periods_total')}) * {STEP}",
        "cpu_throttled": f"sum({rate('container_cpu_cfs_throttled_periods_total')}) * {STEP}",
        "cpu_throttled_s": f"sum({rate('container_cpu_cfs_throttled_seconds_total')}) * {STEP}",
        "disk_read_bytes_s": f"sum({rate('container_fs_reads_bytes_total')})",
        "disk_write_bytes_s": f"sum({rate('container_fs_writes_bytes_total')})",
        "memory_limit_bytes": f"min({m('container_spec_memory_limit_bytes')} > 0)",
        "threads": f"sum({m('container_threads')})",
    }


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def series_queries(series: Series) -> dict[str, str]:
    """Column -> PromQL (with `$window` and `$step` still in) for one series of the plan."""
    queries: dict[str, str] = {}
    if series.preset == "node_exporter":
        queries = node_exporter(series.selector)
    elif series.preset == "cadvisor":
        label = "container" if series.container is not None else "name"
        value = series.container if series.container is not None else series.name
        own = f"{label}={_quoted(value)}" if value is not None else ""
        queries = cadvisor(",".join(m for m in (own, series.selector) if m))
    return {**queries, **series.columns}


def promql_duration(seconds: float) -> str:
    """A duration PromQL takes in a range selector: whole milliseconds."""
    return f"{max(1, round(seconds * 1000))}ms"


def fill(query: str, window_s: float, step_s: float) -> str:
    """The query with its rate window and step put in."""
    return query.replace(WINDOW, promql_duration(window_s)).replace(STEP, f"{step_s:g}")


def matrix_values(payload: Any) -> tuple[dict[float, float], int]:
    """The numbers of a `query_range` answer, summed over its series by time; and how
    many series it had. NaN and infinite values (a division by zero) are left out."""
    if not isinstance(payload, dict):
        raise QueryError("the answer is not a JSON object")
    if payload.get("status") != "success":
        kind = payload.get("errorType") or "error"
        raise QueryError(f"{kind}: {payload.get('error') or 'no error message'}")
    data = payload.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        got = data.get("resultType") if isinstance(data, dict) else None
        raise QueryError(f"expected a matrix, got {got!r}")
    out: dict[float, float] = {}
    result = data.get("result") or []
    try:
        for one in result:
            for ts, text in one["values"]:
                value = float(text)
                if math.isfinite(value):
                    key = round(float(ts), 3)
                    out[key] = out.get(key, 0.0) + value
    except (KeyError, TypeError, ValueError) as e:
        raise QueryError(f"malformed matrix: {e}") from None
    return out, len(result)


def series_rows(component: str, columns: Mapping[str, Mapping[float, float]]) -> list[dict]:
    """One row per time any column has a value, in time order; the others null."""
    times = sorted({ts for values in columns.values() for ts in values})
    rows = []
    for ts in times:
        row: dict[str, Any] = {"ts": ts, "component": component}
        for column, values in columns.items():
            value = values.get(ts)
            if value is not None and column in _INTEGER:
                value = round(value)
            row[column] = value
        rows.append(row)
    return rows


def rows_table(rows: list[dict]) -> pa.Table:
    """Rows (dicts with some of RESOURCES_SCHEMA's columns) as a table in RESOURCES_SCHEMA."""
    return (
        pa.Table.from_pylist(rows, schema=RESOURCES_SCHEMA)
        if rows
        else RESOURCES_SCHEMA.empty_table()
    )
