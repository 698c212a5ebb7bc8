"""The timing log: one JSON line per tagged request, with the time spent in the app."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from probe_helpers import (
    asgi_scope,
    call_asgi,
    call_wsgi,
    inner_wsgi,
    probe_call,
    read_log,
    wsgi_environ,
)

from pinchpoint.probe import ProbeASGI, ProbeWSGI
from pinchpoint.probe.timing import TimingLog

KINDS = ["wsgi", "asgi"]
TAG_QUERY = "pp_run=20261122-101500-a1b2&pp_users=4&pp_req=17"
TAG_HEADER = ("X-Pinchpoint", "run=20261122-101500-a1b2; users=4; req=17")


@pytest.mark.parametrize("kind", KINDS)
def test_tagged_probe_request_is_logged_with_its_fields(kind: str, tmp_path: Path) -> None:
    log = tmp_path / "timing.log"
    before = time.time()
    result = probe_call(kind, f"cpu=20&wait=30&{TAG_QUERY}", log_path=log)
    after = time.time()
    assert result.status == 200
    [record] = read_log(log)
    assert set(record) == {"ts", "method", "uri", "status", "duration_s"}
    assert record["method"] == "GET"
    assert record["uri"] == f"/sys_perf_check?cpu=20&wait=30&{TAG_QUERY}"
    assert record["status"] == 200
    assert record["duration_s"] >= 0.050
    assert before + 0.050 <= record["ts"] <= after
    assert isinstance(record["ts"], float)


@pytest.mark.parametrize("kind", KINDS)
def test_untagged_requests_are_not_logged(kind: str, tmp_path: Path) -> None:
    log = tmp_path / "timing.log"
    probe_call(kind, "cpu=1", log_path=log)
    probe_call(kind, "cpu=1&pp_users=4&pp_req=1", log_path=log)
    probe_call(kind, "xpp_run=abc", request_path="/other", log_path=log)
    assert log.read_text() == ""


@pytest.mark.parametrize("kind", KINDS)
def test_header_tag_is_enough(kind: str, tmp_path: Path) -> None:
    log = tmp_path / "timing.log"
    probe_call(kind, "cpu=5", headers=[TAG_HEADER], log_path=log)
    [record] = read_log(log)
    assert record["uri"] == "/sys_perf_check?cpu=5"
    assert record["duration_s"] >= 0.005


@pytest.mark.parametrize("kind", KINDS)
def test_tagged_requests_to_other_paths_are_logged_with_the_app_status(
    kind: str, tmp_path: Path
) -> None:
    log = tmp_path / "timing.log"
    result = probe_call(kind, TAG_QUERY, request_path="/hello", log_path=log)
    assert result.body == b"inner app body"
    [record] = read_log(log)
    assert record["uri"] == f"/hello?{TAG_QUERY}"
    assert record["status"] == 200


@pytest.mark.parametrize("kind", KINDS)
def test_refused_probe_requests_are_logged_with_their_status(kind: str, tmp_path: Path) -> None:
    log = tmp_path / "timing.log"
    probe_call(kind, f"cpu=-1&{TAG_QUERY}", log_path=log)
    probe_call(kind, TAG_QUERY, method="POST", log_path=log)
    assert [(r["method"], r["status"]) for r in read_log(log)] == [("GET", 400), ("POST", 405)]


def test_wsgi_timing_covers_streaming_until_the_last_chunk_not_the_close(tmp_path: Path) -> None:
    log = tmp_path / "timing.log"
    closed: list[float] = []

    class Streaming:
        def __iter__(self) -> Any:
            for _ in range(3):
                time.sleep(0.02)
                yield b"chunk"

        def close(self) -> None:
            time.sleep(0.02)
            closed.append(time.perf_counter())

    def app(environ: dict[str, Any], start_response: Any) -> Streaming:
        start_response("201 Created", [])
        return Streaming()

    began = time.perf_counter()
    result = call_wsgi(ProbeWSGI(app, log_path=log), wsgi_environ("/s", TAG_QUERY))
    assert result.body == b"chunk" * 3
    assert len(closed) == 1
    [record] = read_log(log)
    assert record["status"] == 201
    # Three 20 ms chunks are timed; the 20 ms close after them is the server's, not the app's.
    assert record["duration_s"] >= 0.060
    assert record["duration_s"] <= closed[0] - began - 0.015


def test_wsgi_is_logged_only_once_even_if_closed_twice(tmp_path: Path) -> None:
    log = tmp_path / "timing.log"
    body = ProbeWSGI(inner_wsgi, log_path=log)(wsgi_environ("/", TAG_QUERY), lambda *a: None)
    list(body)
    body.close()
    body.close()
    assert len(read_log(log)) == 1


def test_wsgi_app_raising_is_logged_as_500_and_reraised(tmp_path: Path) -> None:
    log = tmp_path / "timing.log"

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        ProbeWSGI(app, log_path=log)(wsgi_environ("/", TAG_QUERY), lambda *a: None)
    [record] = read_log(log)
    assert record["status"] == 500


def test_wsgi_uri_is_rebuilt_when_the_server_gives_no_raw_uri(tmp_path: Path) -> None:
    log = tmp_path / "timing.log"
    environ = wsgi_environ("/caf\xc3\xa9 x", TAG_QUERY)  # UTF-8 bytes of "café x", as WSGI gives
    environ["SCRIPT_NAME"] = "/app"
    call_wsgi(ProbeWSGI(inner_wsgi, log_path=log), environ)
    environ = wsgi_environ("/ignored", TAG_QUERY)
    environ["RAW_URI"] = "/raw%2Fpath?" + TAG_QUERY
    call_wsgi(ProbeWSGI(inner_wsgi, log_path=log), environ)
    assert [r["uri"] for r in read_log(log)] == [
        f"/app/caf%C3%A9%20x?{TAG_QUERY}",
        f"/raw%2Fpath?{TAG_QUERY}",
    ]


def test_asgi_timing_covers_until_the_final_body(tmp_path: Path) -> None:
    log = tmp_path / "timing.log"
    final_body_sent = 0.0

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        nonlocal final_body_sent
        await send({"type": "http.response.start", "status": 202, "headers": []})
        for _ in range(3):
            await asyncio.sleep(0.02)
            await send({"type": "http.response.body", "body": b"chunk", "more_body": True})
        await asyncio.sleep(0.02)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        final_body_sent = time.perf_counter()
        await asyncio.sleep(0.2)  # after the response: not part of the request's time

    called = time.perf_counter()
    result = call_asgi(ProbeASGI(app, log_path=log), asgi_scope("/s", TAG_QUERY))
    assert result.body == b"chunk" * 3
    [record] = read_log(log)
    assert record["status"] == 202
    # Clock readings, not a wall-time bound: the time ends once the final body is
    # sent, before the app's own 0.2 s after it, however long the host stalls.
    assert 0.080 <= record["duration_s"] <= final_body_sent - called


def test_asgi_app_raising_is_logged_as_500_and_reraised(tmp_path: Path) -> None:
    log = tmp_path / "timing.log"

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        call_asgi(ProbeASGI(app, log_path=log), asgi_scope("/", TAG_QUERY))
    [record] = read_log(log)
    assert record["status"] == 500


def test_asgi_uri_uses_the_raw_path(tmp_path: Path) -> None:
    log = tmp_path / "timing.log"
    scope = asgi_scope("/a b", TAG_QUERY, headers=[("x-other", "1")])
    scope["raw_path"] = b"/a%20b"
    call_asgi(ProbeASGI(probe_asgi_inner, log_path=log), scope)
    del scope["raw_path"]
    call_asgi(ProbeASGI(probe_asgi_inner, log_path=log), scope)
    assert [r["uri"] for r in read_log(log)] == [f"/a%20b?{TAG_QUERY}"] * 2


async def probe_asgi_inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def _write_lines(path: str, worker: int, count: int) -> None:
    log = TimingLog(path)
    for i in range(count):
        log.write("GET", f"/w{worker}/{i}?" + "x" * 2000, 200, 0.001)


def test_lines_from_threads_and_processes_never_interleave(tmp_path: Path) -> None:
    log = tmp_path / "timing.log"
    threads = [threading.Thread(target=_write_lines, args=(str(log), t, 200)) for t in range(4)]
    processes = [
        multiprocessing.get_context("fork").Process(target=_write_lines, args=(str(log), p, 200))
        for p in range(10, 14)
    ]
    # Fork before starting threads, so no child inherits a lock held by a thread.
    for worker in [*processes, *threads]:
        worker.start()
    for thread in threads:
        thread.join(timeout=30)
    for process in processes:
        process.join(timeout=30)
        assert process.exitcode == 0
    lines = log.read_text().splitlines()
    assert len(lines) == 8 * 200
    uris = {json.loads(line)["uri"].split("?")[0] for line in lines}
    assert len(uris) == 8 * 200


def test_write_failure_after_mounting_does_not_fail_the_request(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "timing.log"
    app = ProbeWSGI(inner_wsgi, log_path=log)
    log.unlink()
    log.mkdir()  # opening it for writing now fails with EISDIR
    for _ in range(3):
        assert call_wsgi(app, wsgi_environ("/", TAG_QUERY)).status == 200
    warnings = [r for r in caplog.records if "cannot write timing log" in r.getMessage()]
    assert len(warnings) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_the_log_named_by_the_environment_is_written_when_the_code_gives_none(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, given = tmp_path / "from-env.log", tmp_path / "given.log"
    monkeypatch.setenv("PINCHPOINT_PROBE_LOG", str(log))
    assert probe_call(kind, f"cpu=1&{TAG_QUERY}").status == 200
    assert len(read_log(log)) == 1
    # A path given in the code wins over the variable.
    assert probe_call(kind, f"cpu=1&{TAG_QUERY}", log_path=given).status == 200
    assert (len(read_log(log)), len(read_log(given))) == (1, 1)
    monkeypatch.delenv("PINCHPOINT_PROBE_LOG")
    assert probe_call(kind, f"cpu=1&{TAG_QUERY}").status == 200
    assert len(read_log(log)) == 1
