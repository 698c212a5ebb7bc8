"""A log stream owns a pool thread while it runs, but streams may take only some of them:
short calls are answered while a client that stopped reading holds its stream, one stream
too many is a 503, and the slot comes back, quietly, when that client goes."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

import pytest
from agent_helpers import TOKEN, agent_thread, append, client, config_text, probe_line

from pinchpoint.agent import server as agent_server


def test_a_stalled_stream_holds_its_slot_not_the_short_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(agent_server, "MAX_STREAMS", 1)
    log = tmp_path / "probe.log"
    text = config_text([{"name": "app", "log": {"path": str(log), "format": "probe"}}])
    with agent_thread(text) as server, client(server) as http:
        assert http.post("/v1/runs/r1/start", json={"interval_s": 1}).status_code == 200
        append(log, "".join(probe_line("r1", 1, n) for n in range(50_000)))  # ~5 MB of rows
        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # and never read
        stalled.connect(server.server_address[:2])
        request = f"GET /v1/runs/r1/logs/app HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
        stalled.sendall(request.encode())
        assert stalled.recv(15) == b"HTTP/1.1 200 OK"
        time.sleep(0.5)

        refused = http.get("/v1/runs/r1/logs/app")
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        started = time.perf_counter()
        assert http.get("/v1/components").status_code == 200
        assert http.post("/v1/runs/r1/stop").status_code == 200
        assert time.perf_counter() - started < 1.0

        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        stalled.close()  # reset under the stream
        deadline = time.monotonic() + 10
        while not server.streams.acquire(blocking=False):  # the stream ends at its next write
            assert time.monotonic() < deadline
            time.sleep(0.05)
        server.streams.release()
        with http.stream("GET", "/v1/runs/r1/logs/app") as again:
            assert again.status_code == 200
            rows = sum(1 for line in again.iter_lines() if line.strip())
    assert rows == 50_001  # every record, then the end line
    assert "Traceback" not in capfd.readouterr().err
