"""`pinchpoint run --metrics HOST:PORT`: the exposition of synthetic snapshots, and a real
Prometheus scraping a real run every second, whose totals and per-step p99 are checked
against the run folder, with the Grafana dashboard's queries run against it."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import polars as pl
import pytest
from prometheus_helpers import START_S, prometheus, query

from ok_target import OkTarget
from pinchpoint.load.hdr import Histogram
from pinchpoint.outputs.openmetrics import BOUNDS_US, MAX_REQUESTS, MetricsServer
from pinchpoint.plan.output import parse_address
from pinchpoint.rundir import files
from pinchpoint_cli import pinchpoint
from pinchpoint_lab.ports import free_port
from pinchpoint_lab.serving import serving

DASHBOARD = Path(__file__).parents[2] / "docs" / "grafana-dashboard.json"
SAMPLE = re.compile(r"^(?P<name>[a-z_]+)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")


def _snapshot(
    requests: int, errors: int, step: int, ms: list[float], classes: dict[str, int] | None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "requests": requests,
        "errors": errors,
        "step": step,
        "users": 2 + step,
        "kind": "users",
        "level": float(2 + step),
        "window_requests": len(ms),
        "window_hdr_v2": Histogram.of(np.array([int(m * 1000) for m in ms])).v2(),
    }
    if classes is not None:
        out["errors_by_class"] = classes
    return out


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match, line
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', match["labels"] or ""))
        out[(match["name"], labels)] = float(match["value"])
    return out


@contextmanager
def _metrics(run_id: str = "r1") -> Iterator[MetricsServer]:
    server = MetricsServer("127.0.0.1", 0, run_id, cpu_clock=lambda: 0.0)
    try:
        yield server
    finally:
        server.close()


def test_the_exposition_counts_each_step_and_class() -> None:
    with _metrics() as server:
        server.update(_snapshot(10, 1, 0, [0.5] * 5 + [3.0] * 4, None), now=1.0, cpu_s=0.0)
        server.update(_snapshot(30, 3, 0, [20.0] * 18, None), now=2.0, cpu_s=0.5)
        classes = {"timeout": 2, "503": 3}
        server.update(_snapshot(60, 5, 1, [700.0] * 24 + [30_000.0], None), now=3.0, cpu_s=1.25)
        server.update(_snapshot(60, 5, 1, [], classes), now=4.0, cpu_s=1.25)
        response = httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=5)
        missing = httpx.get(f"http://127.0.0.1:{server.port}/", timeout=5)
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert missing.status_code == 404
    samples = _samples(response.text)

    def value(name: str, **labels: str) -> float:
        return samples[(name, frozenset({"run_id": "r1", **labels}.items()))]

    assert value("pinchpoint_requests_total") == 60
    assert value("pinchpoint_errors_total", **{"class": "timeout"}) == 2
    assert value("pinchpoint_errors_total", **{"class": "503"}) == 3
    assert not any(k[0] == "pinchpoint_errors_total" and ("class", "any") in k[1] for k in samples)
    assert value("pinchpoint_users") == 3 and value("pinchpoint_step") == 1
    assert value("pinchpoint_load_level", kind="users") == 3.0
    assert value("pinchpoint_generator_cpu_cores") == 0.0  # the last second burnt none
    expected = {"0": [0.5] * 5 + [3.0] * 4 + [20.0] * 18, "1": [700.0] * 24 + [30_000.0]}
    for step, ms in expected.items():
        les = [f"{b / 1e6:g}" for b in BOUNDS_US] + ["+Inf"]
        buckets = [value("pinchpoint_latency_seconds_bucket", step=step, le=le) for le in les]
        assert buckets == sorted(buckets)  # cumulative
        assert buckets == [sum(m * 1000 <= b for m in ms) for b in BOUNDS_US] + [len(ms)]
        assert value("pinchpoint_latency_seconds_count", step=step) == len(ms)
        total = value("pinchpoint_latency_seconds_sum", step=step)
        assert total == pytest.approx(sum(ms) / 1000, rel=1e-3)


def test_without_classes_the_errors_are_one_series_and_cpu_is_a_rate() -> None:
    with _metrics() as server:
        snapshot = {"requests": 7, "errors": 2, "step": 0, "users": 1, "kind": "rate"}
        server.update({**snapshot, "level": 50.0}, now=10.0, cpu_s=3.0)
        server.update({**snapshot, "level": 50.0}, now=12.0, cpu_s=4.0)
        samples = _samples(server.render())
    errors = {k: v for k, v in samples.items() if k[0] == "pinchpoint_errors_total"}
    assert errors == {
        ("pinchpoint_errors_total", frozenset({("run_id", "r1"), ("class", "any")})): 2
    }
    rate = ("pinchpoint_load_level", frozenset({("run_id", "r1"), ("kind", "rate")}))
    assert samples[rate] == 50.0
    cpu = ("pinchpoint_generator_cpu_cores", frozenset({("run_id", "r1")}))
    assert samples[cpu] == 0.5
    assert not any(k[0].startswith("pinchpoint_latency") for k in samples)


def _endpoint(requests: int, errors: int, ms: list[float]) -> dict[str, Any]:
    out: dict[str, Any] = {"requests": requests, "errors": errors}
    if ms:
        out["window_hdr_v2"] = Histogram.of(np.array([int(m * 1000) for m in ms])).v2()
    return out


def test_each_named_request_has_its_counts_and_latencies_past_the_bound_as_other() -> None:
    names = [f"GET /r{i}" for i in range(MAX_REQUESTS + 5)]
    server = MetricsServer("127.0.0.1", 0, "r1", cpu_clock=lambda: 0.0, requests=names[:2])
    try:
        first = [_endpoint(4, 1, [2.0] * 3), _endpoint(2, 0, [30.0] * 2)]
        server.update({**_snapshot(6, 1, 0, [], None), "endpoints": first}, now=1.0, cpu_s=0.0)
        then = [_endpoint(9, 2, [2.0] * 4), _endpoint(2, 0, [])]
        then += [_endpoint(1, 1, []) for _ in range(MAX_REQUESTS + 3)]
        server.update({**_snapshot(11, 3, 0, [], None), "endpoints": then}, now=2.0, cpu_s=0.0)
        samples = _samples(server.render())
    finally:
        server.close()

    def value(name: str, request: str, **labels: str) -> float:
        return samples[(name, frozenset({"run_id": "r1", "request": request, **labels}.items()))]

    assert value("pinchpoint_named_requests_total", "GET /r0") == 9
    assert value("pinchpoint_named_errors_total", "GET /r0") == 2
    assert value("pinchpoint_named_requests_total", "GET /r1") == 2
    assert value("pinchpoint_named_latency_seconds_count", "GET /r0") == 7
    assert value("pinchpoint_named_latency_seconds_bucket", "GET /r1", le="0.025") == 0
    assert value("pinchpoint_named_latency_seconds_bucket", "GET /r1", le="0.05") == 2
    # Unnamed indexes are named by their number; past the bound they are summed as other.
    assert value("pinchpoint_named_requests_total", "request 2") == 1
    named = {dict(k[1])["request"] for k in samples if k[0] == "pinchpoint_named_requests_total"}
    assert len(named) == MAX_REQUESTS
    # 69 indexes: 0 to 62 named, 63 to 68 summed (a request each).
    assert value("pinchpoint_named_requests_total", "other") == len(then) - (MAX_REQUESTS - 1) == 6


def test_in_flight_and_the_send_lag_are_the_last_tick_s() -> None:
    with _metrics() as server:
        base = _snapshot(10, 0, 0, [], None)
        server.update({**base, "in_flight": 7, "send_lag_max_us": 2500}, now=1.0, cpu_s=0.0)
        server.update({**base, "in_flight": 3, "send_lag_max_us": 0}, now=2.0, cpu_s=0.0)
        samples = _samples(server.render())
    run = frozenset({("run_id", "r1")})
    assert samples[("pinchpoint_in_flight", run)] == 3
    assert samples[("pinchpoint_send_lag_seconds", run)] == 0.0
    with _metrics() as server:  # a snapshot without them (Locust's): no sample
        server.update(_snapshot(10, 0, 0, [], None), now=1.0, cpu_s=0.0)
        samples = _samples(server.render())
    assert not any(k[0] in ("pinchpoint_in_flight", "pinchpoint_send_lag_seconds") for k in samples)


def test_addresses() -> None:
    assert parse_address("127.0.0.1:9464") == ("127.0.0.1", 9464)
    assert parse_address("[::1]:9464") == ("::1", 9464)
    for bad in ("9464", "host:", ":9464", "host:port", "host:70000"):
        with pytest.raises(ValueError):
            parse_address(bad)


def test_an_address_that_cannot_be_listened_on_stops_before_the_run(tmp_path: Path) -> None:
    (tmp_path / "plan.toml").write_text(
        '[target]\nurl = "http://127.0.0.1:9"\n\n[load]\nusers = 1\nduration = "1s"\n\n'
        '[[request]]\npath = "/"\n'
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _pinchpoint(tmp_path, "--metrics", f"127.0.0.1:{port}", timeout=60)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert f"--metrics 127.0.0.1:{port}: cannot listen" in line
    assert not (tmp_path / "runs").exists()


def _pinchpoint(folder: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return pinchpoint(folder, "run", "plan.toml", "-q", *args, timeout=timeout)


# A real Prometheus scraping a real run.


class _Target(OkTarget):
    """3 ms on /fast, 30 ms on /slow, 503 at once on /fail."""

    nodelay = True

    def do_GET(self) -> None:
        delay = {"/fast": 0.003, "/slow": 0.03}.get(self.path.split("?", 1)[0])
        self.answer(200 if delay is not None else 503, delay or 0.0)


def _scraping(folder: Path, *targets: str) -> AbstractContextManager[str]:
    """A Prometheus scraping `targets` every second; its URL."""
    config = (
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: pinchpoint\n"
        f"    static_configs:\n      - targets: {json.dumps(list(targets))}\n"
    )
    return prometheus(folder, config)


@dataclass
class Scraped:
    prometheus: str
    run_dir: Path
    run_id: str
    start: float
    end: float
    # Latencies (µs) by step that a server of this process served beside the run.
    fed: dict[int, list[int]]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant vector of `promql` at the end of the run's linger."""
        return query(self.prometheus, promql, self.end)

    def query_range(self, promql: str) -> list[dict[str, Any]]:
        got = httpx.get(
            f"{self.prometheus}/api/v1/query_range",
            params={"query": promql, "start": self.start, "end": self.end, "step": 1},
        )
        assert got.status_code == 200, f"{promql}: {got.text}"
        return list(got.json()["data"]["result"])


FED_RUN = "fed"


@contextmanager
def _fed(server: MetricsServer) -> Iterator[dict[int, list[int]]]:
    """Ticks `server` each second with windows of known latencies, step 0 then 1 (a tenth
    of them ten times slower), until the block ends; the latencies by step."""
    fed: dict[int, list[int]] = {0: [], 1: []}
    stop = threading.Event()
    rng = np.random.default_rng(7)

    def feed() -> None:
        second = requests = 0
        while not stop.wait(1.0):
            step = min(second // 3, 1)
            us = (rng.lognormal(np.log(2000 * (1 + 3 * step)), 0.4, 300)).astype(np.int64)
            us[::10] *= 10
            fed[step].extend(us.tolist())
            requests += len(us)
            window = Histogram.of(us).v2()
            server({"requests": requests, "errors": 0, "step": step, "window_hdr_v2": window})
            second += 1

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    try:
        yield fed
    finally:
        stop.set()
        thread.join(timeout=5)


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    folder = tmp_path_factory.mktemp("metrics")
    metrics = f"127.0.0.1:{free_port()}"
    with (
        MetricsServer("127.0.0.1", 0, FED_RUN) as beside,
        _scraping(folder, metrics, f"127.0.0.1:{beside.port}") as url,
        serving(_Target) as port,
    ):
        (folder / "plan.toml").write_text(
            f'[target]\nurl = "http://127.0.0.1:{port}"\n\n'
            '[load]\nlower = 1\nupper = 2\nduration = "2s"\nwarmup = "0s"\nthink_time = "10ms"\n\n'
            '[[request]]\npath = "/fast"\nweight = 90\n\n'
            '[[request]]\npath = "/slow"\nweight = 6\n\n'
            '[[request]]\npath = "/fail"\nweight = 4\n'
        )
        # Prometheus starts its scrape loops seconds after it is ready: once the server
        # beside is up, so is the loop of the run's address.
        _wait_up(url, f"127.0.0.1:{beside.port}")
        start = time.time()
        with _fed(beside) as fed:
            done = _pinchpoint(folder, "--metrics", metrics, "--metrics-linger", "3", timeout=180)
        end = time.time()
        assert done.returncode in (0, 1), done.stderr
        [run_dir] = (folder / "runs").iterdir()
        run_id = json.loads((run_dir / files.RUN).read_text())["run_id"]
        # The last scrape of the linger, at most a scrape interval before its end.
        yield Scraped(url, run_dir, run_id, start, end - 1.0, fed)


def _wait_up(prometheus: str, instance: str) -> None:
    until = time.monotonic() + START_S
    query = {"query": f'up{{instance="{instance}"}} == 1'}
    while not httpx.get(f"{prometheus}/api/v1/query", params=query).json()["data"]["result"]:
        if time.monotonic() > until:
            pytest.fail(f"Prometheus did not scrape {instance} in {START_S:g}s")
        time.sleep(0.2)


def _last(scraped: Scraped, promql: str) -> float:
    [sample] = scraped.query(promql)
    return float(sample["value"][1])


@pytest.mark.timed
@pytest.mark.timeout(240)
def test_prometheus_totals_are_the_run_s_records(scraped: Scraped) -> None:
    requests = pl.read_parquet(scraped.run_dir / files.REQUESTS)
    failed = requests.filter(pl.col("error").is_not_null() | (pl.col("status") >= 400)).height
    run = f'run_id="{scraped.run_id}"'
    total = _last(scraped, f"sum(last_over_time(pinchpoint_requests_total{{{run}}}[1m]))")
    errors = _last(scraped, f"sum(last_over_time(pinchpoint_errors_total{{{run}}}[1m]))")
    print(f"\nrequests.parquet {requests.height} rows, Prometheus {total:g} requests")
    print(f"failed rows {failed}, Prometheus {errors:g} errors")
    assert total == requests.height and errors == failed > 0
    classes = scraped.query(f"last_over_time(pinchpoint_errors_total{{{run}}}[1m])")
    assert {c["metric"]["class"] for c in classes} == {"http_5xx"}  # the engine's class
    # Scraped while the run went, not only after it.
    scrapes = _last(scraped, f"count_over_time(pinchpoint_requests_total{{{run}}}[1m])")
    first = _last(scraped, f"min_over_time(pinchpoint_requests_total{{{run}}}[1m])")
    print(f"{scrapes:g} scrapes of the run, the first at {first:g} requests")
    assert scrapes >= 5 and first < total
    steps = scraped.query(f"max_over_time(pinchpoint_step{{{run}}}[1m])")
    assert float(steps[0]["value"][1]) == 1.0
    # Scraped each second, never more than the 2 users' requests in flight (the requests
    # take 3 ms of every 13: most ticks see none); closed loop sends on time.
    assert _last(scraped, f"count_over_time(pinchpoint_in_flight{{{run}}}[1m])") >= 5
    assert _last(scraped, f"max_over_time(pinchpoint_in_flight{{{run}}}[1m])") <= 2
    assert _last(scraped, f"max_over_time(pinchpoint_send_lag_seconds{{{run}}}[1m])") == 0


@pytest.mark.timed
@pytest.mark.timeout(240)
def test_prometheus_totals_per_named_request_are_the_run_s_records(scraped: Scraped) -> None:
    requests = pl.read_parquet(scraped.run_dir / files.REQUESTS)
    names = json.loads((scraped.run_dir / files.RUN).read_text())["endpoint_names"]
    run = f'run_id="{scraped.run_id}"'
    totals = scraped.query(f"last_over_time(pinchpoint_named_requests_total{{{run}}}[1m])")
    errors = scraped.query(f"last_over_time(pinchpoint_named_errors_total{{{run}}}[1m])")
    counted = scraped.query(f"last_over_time(pinchpoint_named_latency_seconds_count{{{run}}}[1m])")
    by_name = {
        what: {r["metric"]["request"]: float(r["value"][1]) for r in rows}
        for what, rows in (("requests", totals), ("errors", errors), ("answered", counted))
    }
    expected: dict[str, dict[str, float]] = {"requests": {}, "errors": {}, "answered": {}}
    for at, name in enumerate(names):
        mine = requests.filter(pl.col("endpoint") == at)
        failed = mine.filter(pl.col("error").is_not_null() | (pl.col("status") >= 400))
        expected["requests"][name] = mine.height
        expected["errors"][name] = failed.height
        expected["answered"][name] = mine.filter(pl.col("error").is_null()).height
    print(f"\nper request, Prometheus {by_name} and requests.parquet {expected}")
    assert by_name == expected
    assert set(names) == {"GET /fast", "GET /slow", "GET /fail"}


@pytest.mark.timed
@pytest.mark.timeout(240)
def test_prometheus_p99_per_step_is_the_hdr_p99_within_its_bucket(scraped: Scraped) -> None:
    run = f'run_id="{scraped.run_id}"'
    requests = pl.read_parquet(scraped.run_dir / files.REQUESTS)
    # The engine's window holds the latency of every answered request, HTTP errors too.
    answered = requests.filter(pl.col("error").is_null())
    counted = _last(scraped, f"sum(last_over_time(pinchpoint_latency_seconds_count{{{run}}}[1m]))")
    print(f"\nanswered rows {answered.height}, Prometheus histogram count {counted:g}")
    assert counted == answered.height
    by_step = {
        step: answered.filter(pl.col("step") == step)["latency_us"].to_list() for step in (0, 1)
    }
    _p99_within_buckets(scraped, scraped.run_id, by_step)


@pytest.mark.timed
@pytest.mark.timeout(240)
def test_prometheus_p99_of_known_windows_is_their_hdr_p99_within_its_bucket(
    scraped: Scraped,
) -> None:
    """The histogram path alone, whatever the engine's snapshot holds: a server beside the
    run ticked with windows of known latencies, scraped by the same Prometheus."""
    _p99_within_buckets(scraped, FED_RUN, scraped.fed)


def _p99_within_buckets(scraped: Scraped, run_id: str, by_step: dict[int, list[int]]) -> None:
    """For each step, Prometheus' p99 lies in the classic bucket holding the HDR p99."""
    bounds = [0.0] + [b / 1e6 for b in BOUNDS_US]
    for step, latencies in sorted(by_step.items()):
        hdr_p99 = Histogram.of(np.array(latencies)).value_at_quantile(0.99) / 1e6
        promql = (
            f"histogram_quantile(0.99, last_over_time(pinchpoint_latency_seconds_bucket"
            f'{{run_id="{run_id}",step="{step}"}}[1m]))'
        )
        prom_p99 = _last(scraped, promql)
        # The classic bucket holding the HDR p99 (its value within HDR's 3 digits).
        upper = next(i for i, b in enumerate(bounds) if b * 1.001 >= hdr_p99)
        low, high = bounds[upper - 1], bounds[upper]
        print(
            f"{run_id} step {step}: {len(latencies)} latencies, HDR p99 {hdr_p99 * 1e3:.3f} ms,"
            f" Prometheus p99 {prom_p99 * 1e3:.3f} ms (bucket {low * 1e3:g}..{high * 1e3:g} ms)"
        )
        assert low * 0.999 <= prom_p99 <= high * 1.001


def _dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]


def test_the_dashboard_reads_prometheus_through_its_variables() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    queries = _dashboard_queries()
    assert len(queries) >= 7
    assert all("pinchpoint_" in q and '$run_id"' in q for q in queries)
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}"


@pytest.mark.timed
@pytest.mark.timeout(240)
def test_the_dashboard_s_queries_return_the_run(scraped: Scraped) -> None:
    for expr in _dashboard_queries():
        promql = expr.replace("$__rate_interval", "4s").replace("$run_id", scraped.run_id)
        result = scraped.query_range(promql)
        assert result, f"no data for {promql}"
