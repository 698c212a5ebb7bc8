"""Resource series from a real Prometheus scraping a real node_exporter every second (both
started here, on loopback ports of their own, data in a temporary folder): a short run
through the pipeline gets its host rows from Prometheus over the run's window, and a run
whose Prometheus is unreachable completes and says so. Skipped when the binaries are
missing."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest

from pinchpoint.pipeline import execute
from pinchpoint.plan.model import parse_plan
from pinchpoint_lab.neighbour import CpuHog
from pinchpoint_lab.ports import free_port
from pinchpoint_lab.prometheus import (
    NotStarted,
    Servers,
    missing,
    prometheus_with_node_exporter,
)

# The rate window the collector takes for a 1s scrape and a 1s step: 4 scrapes.
RATE_WINDOW_S = 4.0


@contextmanager
def started(folder: Path) -> Iterator[Servers]:
    """Prometheus and node_exporter; skips the test when one is not installed."""
    if (absent := missing()) is not None:
        pytest.skip(
            f"{absent} is not installed (Debian: apt-get install prometheus "
            "prometheus-node-exporter, or `bash scripts/install-system-deps.sh test`)"
        )
    try:
        with prometheus_with_node_exporter(folder) as servers:
            yield servers
    except NotStarted as e:
        pytest.fail(str(e))


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def target() -> Iterator[str]:
    """A small HTTP server on loopback to load."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def plan_text(target_url: str, prometheus: str) -> str:
    return "\n".join(
        [
            f'[target]\nurl = "{target_url}"\n',
            '[load]\nusers = 2\nduration = "3s"\nwarmup = "0.5s"\nthink_time = "10ms"\n',
            '[[request]]\npath = "/"\n',
            prometheus,
        ]
    )


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    with started(tmp_path_factory.mktemp("prometheus")) as running:
        yield running


def test_host_rows_come_from_prometheus_over_the_run(servers: Servers, tmp_path: Path) -> None:
    selector = f"selector = 'instance=\"{servers.node_exporter}\"'"
    prometheus = "\n".join(
        [
            f'[[prometheus]]\nurl = "{servers.prometheus_url}"\nstep = "1s"\n',
            f'[prometheus.series.host]\npreset = "node_exporter"\n{selector}',
            'mode = "replace"\n',
            # The same host again beside it, with a column Prometheus cannot parse.
            f'[prometheus.series."host@node"]\npreset = "node_exporter"\n{selector}',
            "columns.lock_waits = 'sum(rate(node_cpu_seconds_total[1m])'\n",
        ]
    )
    with target() as url, CpuHog(1.0, max_seconds=60, nice=19):  # a busy core, niced
        time.sleep(RATE_WINDOW_S + 0.5)  # every rate window of the run falls in the burn
        text = plan_text(url, prometheus)
        outcome = execute(parse_plan(text), text, tmp_path / "runs")
    resources = pl.read_parquet(outcome.run_dir / "resources.parquet")
    requests = pl.read_parquet(outcome.run_dir / "requests.parquet")
    first, last = requests["start_us"].min() / 1e6, requests["start_us"].max() / 1e6
    host = resources.filter(pl.col("component") == "host").sort("ts")
    beside = resources.filter(pl.col("component") == "host@node").sort("ts")
    # Rows every step over the whole run, from Prometheus alone: those of the same query.
    assert host["ts"].min() <= first + 1.0 and host["ts"].max() >= last - 1.0
    assert host["ts"].diff().drop_nulls().to_list() == pytest.approx([1.0] * (host.height - 1))
    assert host["cpu_cores"].to_list() == beside["cpu_cores"].to_list()
    during = host.filter(pl.col("ts").is_between(first, last))
    assert during.height >= 2
    assert during["cpu_cores"].min() > 0.8  # the busy niced process, at least
    assert during["cpu_nice_cores"].min() > 0.8  # ... at low priority
    assert (during["cpu_nice_cores"] <= during["cpu_cores"] + 0.01).all()
    assert (during["cpu_cores"] <= during["processes"] + 0.1).all()
    assert (during["rss_bytes"] > 0).all()
    assert (during["rss_bytes"] < during["memory_limit_bytes"]).all()
    assert during["run_queue"].min() >= 1
    # The sampler still gives what Prometheus does not watch.
    assert resources.filter(pl.col("component") == "generator").height > 0
    verdict = json.loads((outcome.run_dir / "verdict.json").read_text())
    assert verdict["steps"][0]["resources"]["host"]["cpu_cores"] > 0.8
    report = json.loads((outcome.run_dir / "collection.json").read_text())["prometheus"][0]
    assert report["status"] == "partial"
    assert report["scrape_interval_s"] == 1.0 and report["rate_window_s"] == RATE_WINDOW_S
    assert report["series"]["host"]["used"] == "replace"
    assert report["series"]["host"]["rows"] == host.height
    assert report["series"]["host@node"]["used"] == "merge"
    [problem] = report["problems"]
    assert "host@node.lock_waits" in problem and "bad_data" in problem
    assert outcome.warnings == [problem]
    assert beside["lock_waits"].null_count() == beside.height


def test_an_unreachable_prometheus_is_reported_and_the_run_completes(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    prometheus = "\n".join(
        [
            f'[[prometheus]]\nurl = "{url}"\ntimeout = "2s"\n',
            '[prometheus.series.host]\npreset = "node_exporter"\nmode = "replace"\n',
        ]
    )
    with target() as target_url:
        text = plan_text(target_url, prometheus)
        started = time.monotonic()
        outcome = execute(parse_plan(text), text, tmp_path / "runs")
        took = time.monotonic() - started
    report = json.loads((outcome.run_dir / "collection.json").read_text())["prometheus"][0]
    assert report["status"] == "failed"
    assert report["series"]["host"] == {"mode": "replace", "rows": 0, "used": "sampler"}
    assert "cannot be read: cannot connect" in report["problems"][0]
    assert outcome.warnings[0] == report["problems"][0]
    assert "no rows for host: the sampler's rows are kept" in outcome.warnings[1]
    # The sampler's host rows stand in; the run is whole.
    resources = pl.read_parquet(outcome.run_dir / "resources.parquet")
    assert resources.filter(pl.col("component") == "host").height >= 2
    assert pl.read_parquet(outcome.run_dir / "requests.parquet").height > 10
    assert (outcome.run_dir / "verdict.json").exists()
    assert took < 30
