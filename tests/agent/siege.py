"""Hostile clients of an agent: idle connections, half-sent requests, and a real request
timed among them. Used by the tests and by bench/agent_under_siege.py."""

from __future__ import annotations

import http.client
import resource
import socket
import ssl
import statistics
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from urllib.parse import urlsplit

# Half-sent requests: a head cut short, and a whole head whose body never comes.
HALF_HEAD = b"POST /v1/runs/siege/start HTTP/1.1\r\nHost: agent\r\nContent-Len"
HALF_BODY = (
    b"POST /v1/runs/siege/start HTTP/1.1\r\nHost: agent\r\n"
    b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"interval_s": '
)


def raise_fd_limit(wanted: int) -> bool:
    """Raises this process's open-files limit to `wanted`; False when the hard limit is
    lower."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < wanted:
        return False
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    return True


@dataclass
class Siege:
    """The hostile connections held open, and how many the agent closed since."""

    idle: list[socket.socket] = field(default_factory=list)
    half_sent: list[socket.socket] = field(default_factory=list)

    def closed_by_agent(self, sockets: list[socket.socket]) -> int:
        """How many of these the agent has closed (read as end of file or reset)."""
        closed = 0
        for sock in sockets:
            try:
                data = sock.recv(65536, socket.MSG_DONTWAIT | socket.MSG_PEEK)
            except BlockingIOError:
                continue
            except OSError:
                closed += 1
                continue
            closed += not data or data.startswith(b"HTTP/1.1 4")
        return closed

    def trickle(self) -> None:
        """One more byte of every half-sent request, as a slowloris client does."""
        for sock in self.half_sent:
            with suppress(OSError):
                sock.send(b" ")


@contextmanager
def siege(url: str, idle: int, half_sent: int) -> Iterator[Siege]:
    """Opens `idle` connections that send nothing and `half_sent` that send part of a
    request; on exit every one is reset (RST), the rudest close there is."""
    parts = urlsplit(url)
    address = (parts.hostname or "127.0.0.1", parts.port or 80)
    held = Siege()
    try:
        for _ in range(idle):
            held.idle.append(_connect(address))
        for n in range(half_sent):
            sock = _connect(address)
            held.half_sent.append(sock)
            sock.sendall(HALF_HEAD if n % 2 else HALF_BODY)
        yield held
    finally:
        for sock in held.idle + held.half_sent:
            with suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()


def _connect(address: tuple[str, int]) -> socket.socket:
    sock = socket.create_connection(address, timeout=10)
    sock.settimeout(None)  # blocking, so that MSG_DONTWAIT peeks without waiting
    return sock


def timed_get(
    url: str, path: str, token: str, context: ssl.SSLContext | None = None
) -> tuple[float, int]:
    """Seconds from connecting to the whole answer of one authenticated GET on a new
    connection, and its status."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    started = time.perf_counter()
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(host, port, timeout=30, context=context)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        response.read()
        return time.perf_counter() - started, response.status
    finally:
        conn.close()


def summary(latencies_s: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in latencies_s)
    return {
        "n": len(ms),
        "median_ms": statistics.median(ms),
        "p90_ms": ms[int(0.9 * (len(ms) - 1))],
        "max_ms": ms[-1],
    }
