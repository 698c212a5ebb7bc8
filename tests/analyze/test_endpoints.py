"""Per endpoint: a throughput ceiling (synchronous workers) or none (asynchronous), and the
worker count as peak throughput × minimal latency — on built steps and on a real server."""

from __future__ import annotations

import asyncio
import itertools
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from pinchpoint.analyze.endpoints import describe
from pinchpoint.pipeline import execute
from pinchpoint.plan.model import parse_plan
from pinchpoint_lab.serving import serving

# Times a stack that waits more than it computes: one at a time, beside the parallel part.
pytestmark = pytest.mark.timed


def closed_loop(users: list[int], workers: int | None, service_ms: float) -> list[dict]:
    """Closed-loop steps of an endpoint served by `workers` (None: no limit)."""
    steps = []
    for n in users:
        busy = n if workers is None else min(n, workers)
        throughput = busy / (service_ms / 1000)
        latency = n / throughput * 1000
        steps.append(
            {
                "users": n,
                "level": float(n),
                "throughput_rps": throughput,
                "p50_ms": latency,
                "concurrency": throughput * latency / 1000,
            }
        )
    return steps


def test_a_throughput_ceiling_is_synchronous_with_its_worker_count() -> None:
    e = describe("GET /slow", 0, closed_loop([1, 2, 4, 6, 8], workers=2, service_ms=10), 10.0)
    assert e["behaviour"] == "synchronous"
    assert e["ceiling"] == pytest.approx(200)
    assert e["workers"] == pytest.approx(2.0)
    assert e["at_users"] == 2  # the first step at the peak
    assert "about 2.0 requests are served at once" in e["summary"]


def test_a_ceiling_is_read_past_one_starved_step_before_the_heaviest() -> None:
    steps = closed_loop([1, 3, 5, 7], workers=2, service_ms=10)
    # A neighbour took the CPU during the third step: it served a fifth less.
    steps[2]["throughput_rps"] *= 0.8
    e = describe("GET /slow", 0, steps, 10.0)
    assert e["behaviour"] == "synchronous"
    assert e["ceiling"] == pytest.approx(200)
    # A heaviest step that still gains on every step before it, by 60% on a load 2.3
    # times as heavy, is no ceiling.
    steps[-1]["throughput_rps"] *= 1.6
    assert describe("GET /slow", 0, steps, 10.0)["behaviour"] == "undecided"


def test_a_ceiling_is_read_when_throughput_gains_little_of_what_the_load_gained() -> None:
    # Two workers beside the suite's parallel tests: 106.6, 98.7 then 123.4 req/s at 3, 5
    # and 7 users, while the median grew 4 times. +16% on a load 2.3 times as heavy.
    steps = closed_loop([1, 3, 5, 7], workers=2, service_ms=10)
    for s, rps, p50 in zip(
        steps, (77.2, 106.6, 98.7, 123.4), (12.5, 22.9, 46.1, 49.9), strict=True
    ):
        s["throughput_rps"], s["p50_ms"] = rps, p50
    assert describe("GET /slow", 0, steps, 11.2)["behaviour"] == "synchronous"
    # +60% on that load is more than a ceiling lets through.
    steps[-1]["throughput_rps"] = 1.6 * 106.6
    assert describe("GET /slow", 0, steps, 11.2)["behaviour"] == "undecided"


def test_flat_latency_as_the_load_grows_is_asynchronous() -> None:
    e = describe("GET /wait", 1, closed_loop([1, 2, 4, 8], workers=None, service_ms=20), 20.0)
    assert e["behaviour"] == "asynchronous"
    assert e["workers"] == pytest.approx(8.0)
    assert "8.0 requests in flight" in e["summary"]


def test_growing_latency_with_growing_throughput_is_undecided() -> None:
    steps = closed_loop([1, 2, 4, 8], workers=None, service_ms=20)
    for s, slower in zip(steps, (1.0, 1.3, 1.6, 1.9), strict=True):
        s["p50_ms"] *= slower
        s["throughput_rps"] /= slower
    assert describe("GET /x", 0, steps, 20.0)["behaviour"] == "undecided"
    # Nor can two steps decide anything, nor a load that did not grow enough.
    assert describe("GET /x", 0, steps[:2], 20.0)["behaviour"] == "undecided"
    flat = closed_loop([4, 5, 6], workers=None, service_ms=20)
    assert describe("GET /x", 0, flat, 20.0)["behaviour"] == "undecided"


class AsyncServer:
    """An asyncio HTTP/1.1 server answering every request after 20 ms of waiting: as many
    requests in flight as clients send, as an event-loop server has."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.port = 0
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait(5)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()
        server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                await asyncio.sleep(0.02)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def async_server() -> Iterator[int]:
    server = AsyncServer()
    yield server.port
    server.stop()


@pytest.mark.timeout(60)
def test_an_event_loop_server_shows_no_ceiling(async_server: int, tmp_path: Path) -> None:
    text = f"""
[target]
url = "http://127.0.0.1:{async_server}"

[load]
lower = 2
upper = 8
step = 3
duration = "1.2s"
warmup = "0.2s"

[[request]]
path = "/wait"
"""
    outcome = execute(parse_plan(text, "plan.toml"), text, tmp_path, run_id="async")
    [e] = outcome.verdict["endpoints"]
    assert e["endpoint"] == "GET /wait"
    assert e["behaviour"] == "asynchronous", e
    # Every user's request is in flight at once: 8 users, about 8 at 20 ms each.
    top = e["steps"][-1]
    assert top["users"] == 8
    assert 6.0 <= top["concurrency"] <= 8.5
    assert 300 <= top["throughput_rps"] <= 420
    assert outcome.verdict["workers_estimate"][0]["endpoint"] == "GET /wait"


class _Statuses(BaseHTTPRequestHandler):
    """/ok answers 200, /missing 404 every time, /flaky 404 and 500 in turn."""

    protocol_version = "HTTP/1.1"
    flaky = itertools.cycle((404, 500))
    lock = threading.Lock()

    def do_GET(self) -> None:
        path = urlsplit(self.path).path  # the run tags each request in its query
        if path == "/flaky":
            with self.lock:
                status = next(self.flaky)
        else:
            status = {"/ok": 200, "/missing": 404}.get(path, 400)
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.timeout(60)
def test_a_route_never_answered_is_said_by_what_it_answered(tmp_path: Path) -> None:
    with serving(_Statuses) as port:
        text = f"""
[target]
url = "http://127.0.0.1:{port}"

[load]
lower = 2
upper = 2
duration = "1s"
warmup = "0.2s"

[[request]]
path = "/ok"

[[request]]
path = "/missing"

[[request]]
path = "/flaky"
"""
        outcome = execute(parse_plan(text, "plan.toml"), text, tmp_path, run_id="statuses")
    summaries = {e["endpoint"]: e["summary"] for e in outcome.verdict["endpoints"]}
    assert "GET /ok: peak" in summaries["GET /ok"]
    missing = re.fullmatch(
        r"GET /missing: every request answered 404 \((\d+) of (\d+)\)", summaries["GET /missing"]
    )
    assert missing is not None, summaries["GET /missing"]
    assert missing[1] == missing[2] and int(missing[1]) > 10
    flaky = re.fullmatch(
        r"GET /flaky: no request succeeded: (\d+) answered (404|500), "
        r"(\d+) answered (404|500) \(of (\d+)\)",
        summaries["GET /flaky"],
    )
    assert flaky is not None, summaries["GET /flaky"]
    assert {flaky[2], flaky[4]} == {"404", "500"}
    # Answered in turn: as many of each, give or take the one a step's edge cut off.
    assert abs(int(flaky[1]) - int(flaky[3])) <= 2
    assert int(flaky[1]) + int(flaky[3]) == int(flaky[5]) > 10


def test_an_endpoint_that_failed_without_a_status_says_its_error() -> None:
    e = describe("GET /down", 2, [], None, {"connect": 3, "timeout": 5})
    assert (
        e["summary"]
        == "GET /down: no request succeeded: 5 failed (timeout), 3 failed (connect) (of 8)"
    )
    assert describe("GET /x", 0, [], None)["summary"] == "GET /x: no answered request"
