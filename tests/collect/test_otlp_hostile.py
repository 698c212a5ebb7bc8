"""The OTLP receiver against hostile exporters, on real sockets of 127.0.0.1: numbers too
long to read, clients that reset or stall, bodies built to blow up when decoded, a flood
of connections, spans with long attributes, a `file` source that is a FIFO or a device.
Each is answered or counted, never printed as a traceback, within stated memory."""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import struct
import threading
import time
import tracemalloc
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from collect.otlp_process import ReceiverProcess
from pinchpoint.collect.sources import otlp, otlp_http
from pinchpoint.collect.sources.otlp import FileSource, OtlpCollector, Received, Receiver
from pinchpoint.collect.traces.otlp_json import decode_json
from pinchpoint.logformats.tag import trace_id
from pinchpoint.plan.otlp import Otlp
from pinchpoint_lab.ports import free_port

pytestmark = pytest.mark.timeout(240)
RUN = "r-otlp.1"
JSON = {"Content-Type": "application/json"}
PROTOBUF = {"Content-Type": "application/x-protobuf"}
MIB = 1 << 20
# The receiver's peak RSS while four 32 MiB bodies built to blow up are posted at once.
PEAK_RSS_MB = 400


@pytest.fixture
def receiver() -> Iterator[ReceiverProcess]:
    found = ReceiverProcess(RUN)
    yield found
    found.kill()


def test_a_5000_digit_integer_is_answered_400_counted_and_silent(
    receiver: ReceiverProcess,
) -> None:
    huge = b"9" * 5000
    body = b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"kind": ' + huge + b"}]}]}]}"
    answer = httpx.post(receiver.url, content=body, headers=JSON, timeout=30)
    assert answer.status_code == 400 and "digits" in answer.text
    seen, stderr = receiver.stop()
    assert stderr == ""
    assert (seen["payloads"], seen["rejected_payloads"]) == (0, 1)


def _wait_for(condition: object, within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.05)


def _reset(sock: socket.socket) -> None:
    """Closes `sock` with a TCP reset, as a client that crashed or gave up."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_clients_that_reset_or_stall_are_counted_as_disconnects_silently(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(otlp_http, "SOCKET_TIMEOUT_S", 0.5)
    collector = OtlpCollector([Otlp(listen=f"127.0.0.1:{free_port()}", settle=0)])
    collector.start(RUN, 1.0)
    address = ("127.0.0.1", collector.receivers[0].port)  # type: ignore[attr-defined]
    head = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    source = collector.receivers[0]
    try:
        # Reset in the middle of the body.
        cut = socket.create_connection(address)
        cut.sendall(head + b"Content-Length: 1000\r\n\r\n" + b'{"resourceSpans": [')
        time.sleep(0.2)
        _reset(cut)
        # Stalled in the middle of the body, past the socket timeout.
        stalled = socket.create_connection(address)
        stalled.sendall(head + b"Content-Length: 1000\r\n\r\n" + b'{"resourceSpans": [')
        _wait_for(lambda: source.disconnects >= 2)
        stalled.close()
        assert (source.disconnects, source.payloads) == (2, 0)
        # Reset before reading the answer: while the body is read (a disconnect), or
        # while the answer is written (a payload, and a disconnect when the write fails).
        whole = b'{"resourceSpans": []}'
        for _ in range(20):
            gone = socket.create_connection(address)
            gone.sendall(head + f"Content-Length: {len(whole)}\r\n\r\n".encode() + whole)
            _reset(gone)
        _wait_for(lambda: source.disconnects + source.payloads >= 22)
    finally:
        collector.stop()
        collector.collect_logs(lambda rows: None)
        collector.close()
    seen = collector.report()["otlp"][collector.configs[0].source]
    assert seen["disconnects"] >= 22 - seen["payloads"] and seen["payloads"] <= 20
    assert seen["rejected_payloads"] == 0
    _out, err = capfd.readouterr()
    assert "Traceback" not in err and "Error" not in err and err == ""


def _json_bomb(size: int) -> bytes:
    """An export request of empty objects: a few bytes each, far more once decoded."""
    head, tail = b'{"resourceSpans": [', b"{}]}"
    return head + b"{}," * ((size - len(head) - len(tail)) // 3) + tail


def _json_worst(size: int) -> bytes:
    """An export request just under the decoder's limits, the costliest way: as many
    values as it takes, as nested lists, and one long string filling the rest."""
    from pinchpoint.collect.traces.otlp_json import MAX_VALUES

    nest = b"[[[[]]]]," * ((MAX_VALUES - 10) // 5)
    head, tail = b'{"x": [' + nest + b'[]], "y": "', b'", "resourceSpans": []}'
    return head + b"a" * (size - len(head) - len(tail)) + tail


def _protobuf_bomb(size: int) -> bytes:
    """An export request of empty resource spans: two bytes each (field 1, length 0)."""
    return b"\x0a\x00" * (size // 2)


@pytest.mark.parametrize(
    ("bomb", "headers"),
    [(_json_bomb, JSON), (_json_worst, JSON), (_protobuf_bomb, PROTOBUF)],
    ids=["json", "json-worst", "protobuf"],
)
def test_four_32_mib_bodies_at_once_stay_under_the_stated_memory(
    receiver: ReceiverProcess, bomb: object, headers: dict[str, str]
) -> None:
    body = bomb(32 * MIB)  # type: ignore[operator]
    assert len(body) <= otlp_http.MAX_BODY

    def post(_: int) -> int:
        return httpx.post(receiver.url, content=body, headers=headers, timeout=120).status_code

    started = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(post, range(4)))
    took = time.monotonic() - started
    seen, stderr = receiver.stop()
    assert stderr == ""
    # Answered: 200 (decoded within the limits), 400 (refused as built to blow up), or 503
    # (busy: retry) when waiting for room for its body would have taken long.
    assert all(status in (200, 400, 503) for status in statuses), statuses
    assert statuses.count(503) < 4, statuses
    assert seen["payloads"] + seen["rejected_payloads"] == 4
    print(f"{len(body) >> 20} MiB x4: {statuses}, peak RSS {seen['peak_rss_mb']} MB, {took:.1f}s")
    assert seen["peak_rss_mb"] < PEAK_RSS_MB, seen["peak_rss_mb"]
    assert took < 60, took


def _spans_body(count: int, attribute_chars: int, start: int = 1) -> bytes:
    base = 1_800_000_000_000_000_000
    long = "x" * attribute_chars
    spans = [
        {
            "traceId": trace_id(RUN, req),
            "spanId": f"{req:016x}",
            "name": f"GET /{long}",
            "kind": 2,
            "startTimeUnixNano": str(base),
            "endTimeUnixNano": str(base + 1000),
            "attributes": [
                {"key": key, "value": {"stringValue": f"/{long}?pp_run={RUN}&pp_users=1&pp_req={req}"}}
                for key in sorted(otlp_kept_keys())
            ],
        }
        for req in range(start, start + count)
    ]  # fmt: skip
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "app"}}]}
    payload = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}
    return json.dumps(payload).encode()


def otlp_kept_keys() -> frozenset[str]:
    from pinchpoint.collect.traces.spans import KEPT

    return KEPT


def test_spans_with_long_attributes_keep_a_few_kilobytes_each() -> None:
    body = _spans_body(1000, 1500)  # under the 32 MiB a JSON body may take, with every kept key
    kept = Received(Otlp(listen="127.0.0.1:4318"))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept.accept(decode_json(body))
        per_span = (tracemalloc.get_traced_memory()[0] - before) / len(kept.spans)
    finally:
        tracemalloc.stop()
    assert len(kept.spans) == 1000
    print(f"kept per span: {per_span:.0f} bytes")
    assert per_span < 4096, per_span
    # The tag still reads from a URL whose value was shortened.
    from pinchpoint.collect.traces.tiers import tiers_of

    assert {row.users for row in tiers_of(kept.spans, RUN).rows} == {1}


def test_spans_past_the_memory_budget_are_dropped_and_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(otlp, "KEPT_BYTES", 1 * MIB)
    collector = OtlpCollector([Otlp(listen=f"127.0.0.1:{free_port()}", settle=0)])
    collector.start(RUN, 1.0)
    url = f"http://127.0.0.1:{collector.receivers[0].port}/v1/traces"  # type: ignore[attr-defined]
    try:
        for batch in range(4):
            body = _spans_body(500, 500, start=1 + batch * 500)
            assert httpx.post(url, content=body, headers=JSON, timeout=30).status_code == 200
    finally:
        collector.stop()
        collector.collect_logs(lambda rows: None)
        collector.close()
    seen = collector.report()["otlp"][collector.configs[0].source]
    assert seen["spans"] + seen["dropped_spans"] == 2000
    assert 100 < seen["spans"] < 2000 and seen["kept_bytes"] <= 1 * MIB
    assert any("memory" in problem for problem in collector.problems)


def test_the_listen_backlog_holds_as_many_connections_as_are_served() -> None:
    source = Receiver(Otlp(listen=f"127.0.0.1:{free_port()}", settle=0))  # not accepting yet
    clients = []
    try:
        for _ in range(otlp_http.MAX_CONNECTIONS):
            client = socket.socket()
            client.setblocking(False)
            client.connect_ex(("127.0.0.1", source.port))
            clients.append(client)
        time.sleep(0.5)
        _, writable, _ = select.select([], clients, [], 0)
        connected = [c for c in writable if c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0]
        assert len(connected) == otlp_http.MAX_CONNECTIONS
    finally:
        for client in clients:
            client.close()
        source.close()


def _unblock(fifo: Path) -> None:
    """Lets a reader blocked opening `fifo` go on (a writer opens it and closes it)."""
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


@pytest.mark.parametrize("becomes", ["fifo", "device"])
def test_a_file_source_that_became_a_fifo_or_a_device_is_refused_not_read(
    tmp_path: Path, becomes: str
) -> None:
    path = tmp_path / "spans.json"
    path.write_text("")
    source = FileSource(Otlp(file=str(path), settle=0))
    source.start()
    path.unlink()
    if becomes == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    reader = threading.Thread(target=source.read, daemon=True)
    reader.start()
    reader.join(5)
    if becomes == "fifo":
        _unblock(path)
    assert not reader.is_alive(), "reading the file source did not end"
    assert source.payloads == 0 and source.rejected_payloads == 1
    assert source.first_error is not None and "not a regular file" in source.first_error
