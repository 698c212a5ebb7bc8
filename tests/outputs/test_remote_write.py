"""`pinchpoint run --metrics-push URL`: the body's encoding read back, a push that stalls
or fails kept from the run, and a real Prometheus receiving a real run by remote write,
whose counts per step are the run folder's."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import polars as pl
import pytest
from prometheus_helpers import prometheus, query

from ok_target import OkTarget
from pinchpoint import _engine
from pinchpoint.load.hdr import Histogram
from pinchpoint.outputs.remote_write import HEADERS, MetricsPush, parse_header
from pinchpoint.rundir import files
from pinchpoint_cli import pinchpoint
from pinchpoint_lab.serving import serving


def _snapshot(requests: int, errors: int, step: int, ms: list[float]) -> dict[str, Any]:
    return {
        "requests": requests,
        "errors": errors,
        "step": step,
        "users": 2,
        "kind": "users",
        "level": 2.0,
        "window_requests": len(ms),
        "window_hdr_v2": Histogram.of(np.array([int(m * 1000) for m in ms])).v2(),
        "errors_by_class": {"http_5xx": errors},
    }


def test_a_body_reads_back_as_its_series_with_labels_sorted() -> None:
    body = _engine.remote_write_body(
        [([("__name__", "up"), ("job", "a"), ("instance", "b")], 1.5), ([("__name__", "x")], 7)],
        1_700_000_000_123,
    )
    assert _engine.remote_write_read(body) == [
        ([("__name__", "up"), ("instance", "b"), ("job", "a")], [(1.5, 1_700_000_000_123)]),
        ([("__name__", "x")], [(7.0, 1_700_000_000_123)]),
    ]
    with pytest.raises(ValueError, match="snappy"):
        _engine.remote_write_read(b"\xff\xff\xff\xff\xff\xff")


class _Receiver(BaseHTTPRequestHandler):
    """Keeps each push's headers and body; answers 204, or 503 while `failing`."""

    protocol_version = "HTTP/1.1"
    got: ClassVar[list[tuple[dict[str, str], bytes]]] = []
    failing = False

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).got.append((dict(self.headers.items()), body))
        self.send_response(503 if self.failing else 204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return


def test_each_tick_is_pushed_with_its_headers_and_the_last_at_close() -> None:
    _Receiver.got = []
    with serving(_Receiver) as port:
        push = MetricsPush(
            f"http://127.0.0.1:{port}/api/v1/write", "r1", ["GET /"], {"X-Scope-OrgID": "team"}
        )
        push(_snapshot(10, 1, 0, [0.5] * 9) | {"taken_at": 1000.0})
        _until(lambda: len(_Receiver.got) == 1)
        push(_snapshot(30, 3, 1, [20.0] * 18) | {"taken_at": 1001.0})
        push.close()
    assert len(_Receiver.got) == 2 and push.counts.pushed == 2 and push.counts.failed == 0
    headers, body = _Receiver.got[-1]
    for name, value in {**HEADERS, "X-Scope-OrgID": "team"}.items():
        assert headers[name] == value
    series = {
        tuple(labels): samples for labels, samples in _engine.remote_write_read(body)
    }  # fmt: skip
    run = ("run_id", "r1")
    assert series[(("__name__", "pinchpoint_requests_total"), run)] == [(30.0, 1_001_000)]
    step1 = (("__name__", "pinchpoint_step_requests_total"), run, ("step", "1"))
    assert series[step1] == [(20.0, 1_001_000)]
    count = (("__name__", "pinchpoint_latency_seconds_count"), run, ("step", "1"))
    assert series[count] == [(18.0, 1_001_000)]


def test_a_push_that_stalls_holds_no_tick_and_one_that_fails_is_counted() -> None:
    said: list[str] = []
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/api/v1/write"
        push = MetricsPush(url, "r1", timeout_s=0.5, say=said.append)
        began = time.monotonic()
        for second in range(20):
            push(_snapshot(10 * second, 0, 0, [1.0]) | {"taken_at": 1000.0 + second})
        ticked = time.monotonic() - began
        push.close()
        closed = time.monotonic() - began
    print(f"\n20 ticks {ticked * 1000:.1f} ms, closed after {closed:.2f} s: {push.counts}")
    assert ticked < 0.5
    # The push going on and the last one, each cut at its timeout; none queued between.
    assert closed < 2.5 and push.counts.pushed == 0 and 1 <= push.counts.failed <= 2
    assert said == [
        f"--metrics-push {url}: a push failed (ReadTimeout: timed out); the run goes on"
    ]
    summary = push.counts.summary(url)
    assert summary is not None and f"{push.counts.failed} of {push.counts.failed} pushes" in summary


def test_a_refused_answer_is_a_failed_push_with_the_receiver_s_status() -> None:
    _Receiver.got, _Receiver.failing = [], True
    try:
        with serving(_Receiver) as port:
            push = MetricsPush(f"http://127.0.0.1:{port}/api/v1/write", "r1")
            push(_snapshot(5, 0, 0, [1.0]))
            push.close()
    finally:
        _Receiver.failing = False
    assert (push.counts.pushed, push.counts.failed) == (0, 1)
    assert push.counts.last_error == "HTTP 503 "


@pytest.mark.parametrize(
    ("header", "said"),
    [("Authorization: Bearer a:b", ("Authorization", "Bearer a:b")), ("X-A:1", ("X-A", "1"))],
)
def test_headers(header: str, said: tuple[str, str]) -> None:
    assert parse_header(header) == said


def test_a_bad_url_or_header_stops_before_the_run(tmp_path: Path) -> None:
    _plan(tmp_path, 9)
    bad_url = _pinchpoint(tmp_path, "--metrics-push", "127.0.0.1:9090/api/v1/write", timeout=60)
    assert bad_url.returncode == 2
    assert "--metrics-push 127.0.0.1:9090/api/v1/write: expected an http:// or https:// URL" in (
        " ".join(bad_url.stderr.split())
    )
    bad_header = _pinchpoint(
        tmp_path, "--metrics-push", "http://127.0.0.1:9/", "--metrics-push-header", "Bearer x",
        timeout=60,
    )  # fmt: skip
    assert bad_header.returncode == 2
    assert "--metrics-push-header 'Bearer x': expected NAME: VALUE" in bad_header.stderr
    assert not (tmp_path / "runs").exists()


def test_a_run_whose_pushes_are_refused_goes_on_and_says_how_many_failed(
    tmp_path: Path,
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/api/v1/write"  # bound, not listening
        with serving(_Target) as port:
            _plan(tmp_path, port)
            done = _pinchpoint(tmp_path, "--metrics-push", url, timeout=120)
    said = " ".join((done.stdout + done.stderr).split())
    print(f"\n{said[-600:]}")
    assert done.returncode in (0, 1), done.stderr
    assert f"--metrics-push {url}: a push failed (ConnectError: " in said
    [(failed, pushes)] = re.findall(r"--metrics-push \S+: (\d+) of (\d+) pushes failed", said)
    assert failed == pushes and int(pushes) >= 2
    [run_dir] = (tmp_path / "runs").iterdir()
    assert pl.read_parquet(run_dir / files.REQUESTS).height > 0


def _until(done: Any, timeout_s: float = 10.0) -> None:
    until = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < until, "not in time"
        time.sleep(0.01)


def _plan(folder: Path, port: int) -> None:
    (folder / "plan.toml").write_text(
        f'[target]\nurl = "http://127.0.0.1:{port}"\n\n'
        '[load]\nlower = 1\nupper = 2\nduration = "2s"\nwarmup = "0s"\nthink_time = "10ms"\n\n'
        '[[request]]\npath = "/fast"\nweight = 90\n\n'
        '[[request]]\npath = "/fail"\nweight = 10\n'
    )


def _pinchpoint(folder: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return pinchpoint(folder, "run", "plan.toml", "-q", *args, timeout=timeout)


# A real Prometheus receiving a real run.


class _Target(OkTarget):
    """3 ms on /fast, 503 at once on /fail."""

    nodelay = True

    def do_GET(self) -> None:
        fast = self.path.startswith("/fast")
        self.answer(200 if fast else 503, 0.003 if fast else 0.0)


@dataclass
class Pushed:
    prometheus: str
    run_dir: Path
    run_id: str
    said: str
    at: float

    def query(self, promql: str) -> list[dict[str, Any]]:
        return query(self.prometheus, promql, self.at)


@pytest.fixture(scope="module")
def pushed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pushed]:
    folder = tmp_path_factory.mktemp("push")
    config = "global:\n  evaluation_interval: 1s\n"
    receiving = prometheus(folder, config, "--web.enable-remote-write-receiver")
    with receiving as url, serving(_Target) as port:
        _plan(folder, port)
        done = _pinchpoint(folder, "--metrics-push", f"{url}/api/v1/write", timeout=180)
        assert done.returncode in (0, 1), done.stderr
        [run_dir] = (folder / "runs").iterdir()
        run_id = json.loads((run_dir / files.RUN).read_text())["run_id"]
        yield Pushed(url, run_dir, run_id, done.stdout + done.stderr, time.time())


@pytest.mark.timed
@pytest.mark.timeout(240)
def test_prometheus_receives_the_run_s_counts_per_step(pushed: Pushed) -> None:
    requests = pl.read_parquet(pushed.run_dir / files.REQUESTS)
    failed = pl.col("error").is_not_null() | (pl.col("status") >= 400)
    run = f'run_id="{pushed.run_id}"'
    expected = {
        str(step): (rows.height, rows.filter(failed).height)
        for (step,), rows in requests.group_by("step")
    }
    got: dict[str, list[float]] = {}
    for metric in ("pinchpoint_step_requests_total", "pinchpoint_step_errors_total"):
        for row in pushed.query(f"last_over_time({metric}{{{run}}}[5m])"):
            got.setdefault(row["metric"]["step"], []).append(float(row["value"][1]))
    print(f"\nper step, Prometheus {got}, requests.parquet {expected}")
    assert {step: tuple(n) for step, n in got.items()} == expected
    assert set(expected) == {"0", "1"} and all(e > 0 for _, e in expected.values())
    [total] = pushed.query(f"last_over_time(pinchpoint_requests_total{{{run}}}[5m])")
    assert float(total["value"][1]) == requests.height
    # Pushed each second while the run went, not only at its end.
    [pushes] = pushed.query(f"count_over_time(pinchpoint_requests_total{{{run}}}[5m])")
    [first] = pushed.query(f"min_over_time(pinchpoint_requests_total{{{run}}}[5m])")
    print(f"{pushes['value'][1]} pushes, the first at {first['value'][1]} requests")
    assert int(pushes["value"][1]) >= 3 and float(first["value"][1]) < requests.height
    assert "--metrics-push" not in pushed.said  # no push failed
