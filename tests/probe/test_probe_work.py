"""cpu=, wait= and bytes= do the work they ask for, through both middlewares."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from probe_helpers import asgi_scope, call_asgi_async, inner_asgi, probe_call

from pinchpoint.probe import ProbeASGI

KINDS = ["wsgi", "asgi"]


def timed_call(kind: str, query: str, **kwargs: object) -> tuple[float, float, object]:
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    result = probe_call(kind, query, **kwargs)
    return time.thread_time() - cpu0, time.perf_counter() - wall0, result


@pytest.mark.parametrize("kind", KINDS)
def test_cpu_burns_at_least_that_much_thread_cpu_time(kind: str) -> None:
    cpu, wall, result = timed_call(kind, "cpu=50&wait=0")
    assert result.status == 200
    assert cpu >= 0.050
    assert wall >= 0.050
    assert result.json()["cpu_ms"] == 50.0


@pytest.mark.parametrize("kind", KINDS)
def test_fractional_cpu_is_accepted_and_burned(kind: str) -> None:
    cpu, _, result = timed_call(kind, "cpu=2.5")
    assert result.status == 200
    assert cpu >= 0.0025
    assert result.json()["cpu_ms"] == 2.5


@pytest.mark.parametrize("kind", KINDS)
def test_default_is_ten_ms_of_cpu_and_no_wait(kind: str) -> None:
    cpu, _, result = timed_call(kind, "")
    summary = result.json()
    assert cpu >= 0.010
    assert summary["cpu_ms"] == 10.0
    assert summary["wait_ms"] == 0.0
    assert summary["elapsed_ms"] >= 10.0


@pytest.mark.parametrize("kind", KINDS)
def test_wait_takes_wall_time_but_little_cpu(kind: str) -> None:
    cpu, wall, result = timed_call(kind, "cpu=0&wait=100")
    assert result.status == 200
    assert wall >= 0.100
    assert cpu < 0.030
    assert result.json()["wait_ms"] == 100.0
    assert result.json()["elapsed_ms"] >= 100.0


@pytest.mark.parametrize("kind", KINDS)
def test_cpu_and_wait_combine(kind: str) -> None:
    cpu, wall, result = timed_call(kind, "cpu=30&wait=60")
    assert cpu >= 0.030
    assert wall >= 0.090
    summary = result.json()
    assert (summary["cpu_ms"], summary["wait_ms"]) == (30.0, 60.0)
    assert summary["elapsed_ms"] >= 90.0


def test_cpu_is_thread_cpu_time_so_contention_stretches_wall_time() -> None:
    # Two threads of one process share the GIL: each needs its own 60 ms of CPU, so together
    # they cannot finish before 120 ms of wall time. A wall-clock burn would end at ~60 ms.
    results: list[int] = []

    def request() -> None:
        results.append(probe_call("wsgi", "cpu=60").status)

    threads = [threading.Thread(target=request) for _ in range(2)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert time.perf_counter() - started >= 0.115
    assert results == [200, 200]


def test_asgi_wait_leaves_the_event_loop_free() -> None:
    app = ProbeASGI(inner_asgi)

    async def four_at_once() -> float:
        started = time.perf_counter()
        scope = asgi_scope(query="cpu=0&wait=200")
        results = await asyncio.gather(*(call_asgi_async(app, scope) for _ in range(4)))
        assert [r.status for r in results] == [200] * 4
        return time.perf_counter() - started

    # Sequential waits would take 800 ms.
    assert 0.200 <= asyncio.run(four_at_once()) < 0.500


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("size", [0, 1, 17, 80, 100, 4096, 1_000_000, 10 * 1024 * 1024])
def test_bytes_gives_exactly_that_body_length(kind: str, size: int) -> None:
    result = probe_call(kind, f"cpu=0&bytes={size}")
    assert result.status == 200
    assert len(result.body) == size
    assert result.headers["Content-Length" if kind == "wsgi" else "content-length"] == str(size)
    if size >= 100:
        summary = result.json()
        assert summary["bytes"] == size
        assert summary["cpu_ms"] == 0.0


@pytest.mark.parametrize("kind", KINDS)
def test_default_body_is_short_json_reporting_its_own_length(kind: str) -> None:
    result = probe_call(kind, "cpu=1&wait=2")
    summary = result.json()
    assert set(summary) == {"cpu_ms", "wait_ms", "bytes", "elapsed_ms"}
    assert summary["bytes"] == len(result.body)
    assert len(result.body) < 100
    content_type = result.headers.get("Content-Type") or result.headers["content-type"]
    assert content_type == "application/json"


@pytest.mark.parametrize("kind", KINDS)
def test_head_does_the_work_and_sends_headers_without_body(kind: str) -> None:
    cpu0 = time.thread_time()
    result = probe_call(kind, "cpu=20&bytes=500", method="HEAD")
    assert time.thread_time() - cpu0 >= 0.020
    assert result.status == 200
    assert result.body == b""
    length = result.headers.get("Content-Length") or result.headers["content-length"]
    assert length == "500"


@pytest.mark.parametrize("kind", KINDS)
def test_tag_parameters_are_ignored_by_the_work(kind: str) -> None:
    result = probe_call(kind, "cpu=1&wait=0&pp_run=r-1.x&pp_users=8&pp_req=12345")
    assert result.status == 200
    assert json.loads(result.body)["cpu_ms"] == 1.0
    # Open-loop runs tag with the rate of the phase instead of the users.
    result = probe_call(kind, "cpu=1&wait=0&pp_run=r-1.x&pp_rate=7.5&pp_req=12345")
    assert result.status == 200
