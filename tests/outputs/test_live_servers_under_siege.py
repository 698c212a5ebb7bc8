"""`--serve` and `--metrics` under a siege of idle and half-sent connections: their threads
stay a fixed pool, a real client is answered at once, a connection past the cap is closed
cleanly (503 when it had sent something) and a stalled one at its deadline."""

from __future__ import annotations

import resource
import socket
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import httpx
import numpy as np
import pytest

from pinchpoint.load.hdr import Histogram
from pinchpoint.outputs.bounded_server import MAX_HEAD_BYTES, Limits
from pinchpoint.outputs.live_page import LIMITS as PAGE_LIMITS
from pinchpoint.outputs.live_page import LivePage
from pinchpoint.outputs.openmetrics import LIMITS as METRICS_LIMITS
from pinchpoint.outputs.openmetrics import MetricsServer

TOKEN = "siege-token-0123456789"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
SIEGE = 1000  # half idle, half with a head cut short
HALF_HEAD = b"GET /state HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Ag"


def _snapshot(requests: int, step: int) -> dict[str, Any]:
    return {
        "requests": requests,
        "errors": 0,
        "step": step,
        "users": 2 * (step + 1),
        "kind": "users",
        "level": float(2 * (step + 1)),
        "window_hdr_v2": Histogram.of(np.full(10, 5000)).v2(),
    }


@pytest.fixture(autouse=True)
def _descriptors() -> Iterator[None]:
    """Room for the siege's client ends, besides the servers' own."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2 * SIEGE + 512
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"the open-files hard limit {hard} is below {wanted}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@contextmanager
def _siege(port: int, count: int) -> Iterator[tuple[list[socket.socket], list[socket.socket]]]:
    """`count` connections, alternately idle and sending half a head; all reset on exit."""
    idle: list[socket.socket] = []
    half: list[socket.socket] = []
    try:
        for n in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.setblocking(False)
            if n % 2:
                sock.sendall(HALF_HEAD)
                half.append(sock)
            else:
                idle.append(sock)
        yield idle, half
    finally:
        for sock in idle + half:
            with suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
            sock.close()


def _fate(sock: socket.socket) -> str:
    """What the server did with a connection: `open`, `closed` (silently), `reset`, or the
    status line it answered with."""
    try:
        data = sock.recv(4096, socket.MSG_DONTWAIT | socket.MSG_PEEK)
    except BlockingIOError:
        return "open"
    except OSError:
        return "reset"
    return data.split(b"\r\n", 1)[0].decode() if data else "closed"


def _threads() -> set[int]:
    return {thread.ident or 0 for thread in threading.enumerate()}


def _until(condition: Callable[[], bool], within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _timed(get: Callable[[], httpx.Response], times: int) -> list[tuple[float, int]]:
    out = []
    for _ in range(times):
        started = time.perf_counter()
        status = get().status_code
        out.append((time.perf_counter() - started, status))
    return out


def _assert_besieged(
    server: Any, limits: Limits, idle: list[socket.socket], half: list[socket.socket]
) -> None:
    """Past the cap, the waiting the longest were closed: silently if idle, 503 if not."""
    _until(lambda: sum(_fate(s) == "open" for s in idle + half) <= limits.max_connections)
    assert server.open_connections() <= limits.max_connections
    fates = Counter(_fate(s) for s in idle)
    assert set(fates) <= {"open", "closed"}, fates
    fates = Counter(_fate(s) for s in half)
    assert set(fates) <= {"open", "HTTP/1.0 503 Service Unavailable"}, fates
    assert fates["HTTP/1.0 503 Service Unavailable"] >= len(half) - limits.max_connections


def test_the_live_page_under_a_thousand_stalled_connections_answers_a_real_client() -> None:
    before = _threads()
    with LivePage("127.0.0.1", 0, "r1", token=TOKEN) as page:
        started = _threads()
        page(_snapshot(10, 0))
        base = f"http://127.0.0.1:{page.port}"
        with _siege(page.port, SIEGE) as (idle, half):
            _assert_besieged(page.httpd, PAGE_LIMITS, idle, half)
            during = _threads()
            page(_snapshot(20, 0))  # the run goes on: its seconds reach the page
            answers = _timed(lambda: httpx.get(base + "/state", headers=BEARER, timeout=10), 20)
            state = httpx.get(base + "/state", headers=BEARER, timeout=10).json()
            assert httpx.get(base + "/", headers=BEARER, timeout=10).status_code == 200
            assert httpx.get(base + "/state", timeout=10).status_code == 401  # still its token
            assert page.httpd.counts.evicted >= SIEGE - PAGE_LIMITS.max_connections
    # Its own: the pool and the selector thread; none more under the siege.
    assert len(started - before) == PAGE_LIMITS.workers + 1
    assert during - started == set()
    assert [status for _, status in answers] == [200] * 20
    assert [row["total"] for row in state["rows"]] == [10, 20]
    # One stuck behind the siege would wait for the head timeout (5 s) or forever; a pause
    # of a busy host is allowed for.
    seconds = [s for s, _ in answers]
    assert statistics.median(seconds) < 0.5, seconds
    assert max(seconds) < 3.0, seconds


def test_the_metrics_under_a_thousand_stalled_connections_answer_a_scrape() -> None:
    before = _threads()
    with MetricsServer("127.0.0.1", 0, "r1") as server:
        started = _threads()
        server(_snapshot(10, 0))
        url = f"http://127.0.0.1:{server.port}/metrics"
        with _siege(server.port, SIEGE) as (idle, half):
            _assert_besieged(server.httpd, METRICS_LIMITS, idle, half)
            during = _threads()
            server(_snapshot(30, 1))
            answers = _timed(lambda: httpx.get(url, timeout=10), 20)
            text = httpx.get(url, timeout=10).text
    assert len(started - before) == METRICS_LIMITS.workers + 1
    assert during - started == set()
    assert [status for _, status in answers] == [200] * 20
    assert 'pinchpoint_requests_total{run_id="r1"} 30' in text
    assert 'pinchpoint_step{run_id="r1"} 1' in text
    # One stuck behind the siege would wait for the head timeout (5 s) or forever; a pause
    # of a busy host is allowed for.
    seconds = [s for s, _ in answers]
    assert statistics.median(seconds) < 0.5, seconds
    assert max(seconds) < 3.0, seconds


def test_a_head_that_stalls_is_closed_at_its_deadline_however_it_trickles() -> None:
    limits = Limits(head_timeout_s=0.5)
    with MetricsServer("127.0.0.1", 0, "r1", limits=limits) as server:
        # Before the first byte: the deadline is at least 0.5 s after this. One pushed back
        # by each byte would never come while it trickles (a byte every 50 ms, for 10 s).
        started = time.monotonic()
        with _siege(server.port, 8) as (idle, half):
            while any(_fate(s) == "open" for s in idle + half):
                assert time.monotonic() - started < 10, [_fate(s) for s in idle + half]
                for sock in half:
                    with suppress(OSError):
                        sock.send(b"x")
                time.sleep(0.05)
            closed_after = time.monotonic() - started
            assert [_fate(s) for s in idle] == ["closed"] * 4
            assert [_fate(s) for s in half] == ["HTTP/1.0 408 Request Timeout"] * 4
        assert httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=5).status_code == 200
        assert server.httpd.counts.timed_out == 8
    assert 0.4 <= closed_after < 4.0


def test_past_its_streams_a_page_is_answered_503_and_the_pool_stays_free() -> None:
    limits = Limits(workers=3, streams=2)
    with (
        LivePage("127.0.0.1", 0, "r1", limits=limits) as page,
        httpx.Client(base_url=f"http://127.0.0.1:{page.port}", timeout=5) as client,
    ):
        with client.stream("GET", "/events") as one, client.stream("GET", "/events") as two:
            assert one.status_code == two.status_code == 200
            third = client.get("/events")
            assert (third.status_code, third.text) == (503, "too many pages follow this run\n")
            assert client.get("/state").status_code == 200  # the third thread is free
        _until(lambda: page.httpd.open_connections() == 0)
        with client.stream("GET", "/events") as again:
            assert again.status_code == 200


def test_when_every_connection_is_being_answered_a_new_one_is_answered_503() -> None:
    limits = Limits(max_connections=2, workers=3, streams=2)
    with (
        LivePage("127.0.0.1", 0, "r1", limits=limits) as page,
        httpx.Client(base_url=f"http://127.0.0.1:{page.port}", timeout=5) as client,
    ):
        with client.stream("GET", "/events") as one, client.stream("GET", "/events") as two:
            assert one.status_code == two.status_code == 200
            refused = client.get("/state")
            assert refused.status_code == 503
            assert refused.text == "too many connections: try again in a few seconds\n"
            assert page.httpd.counts.refused == 1
        _until(lambda: page.httpd.open_connections() == 0)
        assert client.get("/state").status_code == 200


def test_a_head_past_its_bound_is_answered_431_and_the_next_client_is_served() -> None:
    with MetricsServer("127.0.0.1", 0, "r1") as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(b"GET /metrics HTTP/1.1\r\nX-Long: " + b"a" * MAX_HEAD_BYTES)
            answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.0 431 Request Header Fields Too Large\r\n")
        assert server.httpd.counts.too_large == 1
        assert httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=5).status_code == 200
