"""Per-step summaries of the resource samples: disk, network, sockets, threads, limits."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from pinchpoint.analyze.steps import Window, resource_step

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).parent.parent.parent
BASIC = ["ts", "component", "cpu_cores", "rss_bytes", "processes"]


def samples() -> pl.DataFrame:
    """Three samples of gunicorn and the host in the step [10, 13], one after it."""
    rows = []
    for i, ts in enumerate([10.5, 11.5, 12.5, 20.0]):
        rows.append(
            {
                "ts": ts,
                "component": "gunicorn",
                "cpu_cores": 0.5,
                "rss_bytes": 100 + i,
                "processes": 3,
                "disk_read_bytes_s": 0.0,
                "disk_write_bytes_s": [1000.0, 2000.0, None, 9e9][i],
                "memory_limit_bytes": 2**30,
                "threads": [3, 5, 5, 99][i],
                "listen_backlog": [0, 6, 12, 500][i],
                "listen_backlog_limit": 2048,
                "connections": [2, 2, 5, 0][i],
            }
        )
        rows.append(
            {
                "ts": ts,
                "component": "host",
                "cpu_cores": 1.0,
                "rss_bytes": 5000,
                "processes": 2,
                "disk_read_bytes_s": [1e6, 3e6, 2e6, 0.0][i],
                "disk_write_bytes_s": 4e6,
                "disk_util": [0.1, 0.2, 0.6, 1.0][i],
                "net_rx_bytes_s": 1e5,
                "net_tx_bytes_s": [1e6, 2e6, 3e6, 0.0][i],
                "net_loopback_bytes_s": 7e6,
                "net_util": None,
                "cpu_nice_cores": [0.2, 0.4, 0.6, 1.9][i],
                "memory_limit_bytes": 2**34,
            }
        )
    return pl.DataFrame(rows, infer_schema_length=None)


def test_step_means_peaks_and_limits() -> None:
    out = resource_step(samples(), Window(step=0, users=4, start=10.0, end=13.0))
    gunicorn, host = out["gunicorn"], out["host"]
    assert gunicorn["listen_backlog"] == pytest.approx(6.0)
    assert gunicorn["listen_backlog_peak"] == 12
    assert gunicorn["listen_backlog_limit"] == 2048
    assert gunicorn["connections"] == pytest.approx(3.0)
    assert gunicorn["threads"] == 5
    assert gunicorn["disk_write_bytes_s"] == pytest.approx(1500.0)  # the missing one left out
    assert gunicorn["memory_limit_bytes"] == 2**30
    assert "disk_util" not in gunicorn and "net_rx_bytes_s" not in gunicorn
    assert host["disk_read_bytes_s"] == pytest.approx(2e6)
    assert host["disk_util"] == pytest.approx(0.3)
    assert host["net_tx_bytes_s"] == pytest.approx(2e6)
    assert host["net_loopback_bytes_s"] == pytest.approx(7e6)
    assert host["memory_limit_bytes"] == 2**34
    assert host["cpu_nice_cores"] == pytest.approx(0.4)
    assert "net_util" not in host  # no interface reported a speed
    assert "listen_backlog" not in host


def test_the_summaries_match_the_verdict_schema() -> None:
    schema = json.loads((ROOT / "docs" / "verdict.schema.json").read_text())
    resource = {"$defs": schema["$defs"], "$ref": "#/$defs/resource"}
    validator = jsonschema.Draft202012Validator(resource)
    out = resource_step(samples(), Window(step=0, users=4, start=10.0, end=13.0))
    for summary in out.values():
        assert list(validator.iter_errors(summary)) == []
    broken = dict(out["host"], disk_util=1.5)
    assert not validator.is_valid(broken)


def test_samples_without_the_new_columns_give_only_the_old_keys() -> None:
    old = samples().select(BASIC)
    out = resource_step(old, Window(step=0, users=4, start=10.0, end=13.0))
    assert set(out["gunicorn"]) == {"cpu_cores", "rss_bytes", "processes"}
    assert out["gunicorn"]["rss_bytes"] == 102


def test_rows_without_cpu_memory_or_processes_are_summarised() -> None:
    """A Prometheus series may lack them (cAdvisor without process metrics)."""
    frame = pl.DataFrame(
        {
            "ts": [10.5, 11.5],
            "component": ["db", "db"],
            "cpu_cores": [None, None],
            "rss_bytes": [None, None],
            "processes": [None, None],
            "cpu_throttled": [1, 2],
        },
        schema_overrides={
            "cpu_cores": pl.Float64,
            "rss_bytes": pl.Int64,
            "processes": pl.Int32,
            "cpu_throttled": pl.Int64,
        },
    )
    out = resource_step(frame, Window(step=0, users=1, start=10.0, end=13.0))
    assert out["db"] == {"cpu_cores": None, "rss_bytes": 0, "processes": 0}
