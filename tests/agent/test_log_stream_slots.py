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


def _send_queue(local: tuple[str, int], remote: tuple[str, int]) -> int | None:
    """Bytes queued to send on the IPv4 TCP socket from `local` to `remote` (the kernel's
    tx_queue in /proc/net/tcp); None when there is no such socket."""

    def hex_address(address: tuple[str, int]) -> str:
        return f"{socket.inet_aton(address[0])[::-1].hex().upper()}:{address[1]:04X}"

    pair = [hex_address(local), hex_address(remote)]
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1:3] == pair:
            return int(fields[4].split(":")[0], 16)
    return None


def _stalled(local: tuple[str, int], remote: tuple[str, int], seconds: float = 10.0) -> bool:
    """Waits until the socket's send queue holds bytes and stops growing: its writer is
    held by a peer that does not read. Whether it did within `seconds`."""
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        queued = _send_queue(local, remote)
        if queued and queued == last:
            return True
        last = queued
        time.sleep(0.1)
    return False


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
        # The stream writing into full buffers, rather than a fixed time for it to get there.
        _stalled(server.server_address[:2], stalled.getsockname()[:2])

        refused = http.get("/v1/runs/r1/logs/app")
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        # A pause of this process can slow one try; calls held by the stalled stream are
        # never answered (the client's 10 s timeout), and a stop is idempotent.
        for _ in range(3):
            started = time.perf_counter()
            assert http.get("/v1/components").status_code == 200
            assert http.post("/v1/runs/r1/stop").status_code == 200
            if (seconds := time.perf_counter() - started) < 1.0:
                break
        assert seconds < 1.0

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
