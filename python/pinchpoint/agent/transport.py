"""One connection of the agent and the bytes of its requests: what the selector thread
keeps for each client, how it tells that a request has arrived whole, and how a pool
thread writes the answer."""

from __future__ import annotations

import re
import resource
import selectors
import socket
import ssl
from contextlib import suppress
from email.message import Message
from http.client import HTTPException, parse_headers
from io import BytesIO

MAX_BODY_BYTES = 64 * 1024
MAX_HEAD_BYTES = 64 * 1024

IDLE, READING, BUSY, DRAINING, CLOSED = "idle", "reading", "busy", "draining", "closed"

_HEAD_END = re.compile(rb"\r?\n\r?\n")
_DIGITS = re.compile(r"[0-9]{1,18}")


class ClientGone(Exception):
    """The client closed, reset or stopped reading: its connection is closed quietly."""


class SocketWriter:
    """A connection's output: each write is sent whole, within the socket's timeout."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def write(self, data: bytes) -> int:
        try:
            self._sock.sendall(data)
        except (OSError, ValueError) as e:  # reset, timeout, TLS error, closed
            raise ClientGone(str(e)) from None
        return len(data)

    def flush(self) -> None:
        pass


class Connection:
    """One client connection and what it has sent that is not answered yet."""

    __slots__ = (
        "address",
        "buffer",
        "continued",
        "events",
        "handshaking",
        "keep",
        "must_close",
        "need",
        "request",
        "scanned",
        "since",
        "sock",
        "state",
    )

    def __init__(self, sock: socket.socket, address: tuple, now: float) -> None:
        self.sock = sock
        self.address = address
        self.buffer = bytearray()
        self.since = now  # start of the current state: its deadline counts from here
        self.state = IDLE
        self.events = selectors.EVENT_READ
        self.handshaking = isinstance(sock, ssl.SSLSocket)
        self.scanned = 0  # bytes of the buffer searched for the end of the head
        self.need: int | None = None  # bytes of the whole request, once its head is read
        self.continued = False  # "100 Continue" sent for this request
        self.must_close = False  # the request's body is not read whole: close after it
        self.request = b""  # the request handed to the pool: head and body
        self.keep = False  # the answer left the connection open


def body_length(headers: Message) -> int | None:
    """The body's length its Content-Length gives (0 without one); None when invalid."""
    values = {v.strip() for v in headers.get_all("Content-Length") or []}
    if not values:
        return 0
    if len(values) > 1:
        return None
    (value,) = values
    return int(value) if _DIGITS.fullmatch(value) else None


def raise_fd_limit(wanted: int) -> int:
    """Raises this process's soft limit on open files towards `wanted` (at most to the hard
    limit) when it is lower; returns the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    if soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        with suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    return soft


def family(host: str) -> socket.AddressFamily:
    try:
        return socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][0]
    except (OSError, IndexError):
        return socket.AF_INET


def head_end(buffer: bytearray, start: int) -> int | None:
    """Where the request head in `buffer` ends (after its blank line), searched from
    `start`; None while it has not arrived."""
    found = _HEAD_END.search(buffer, start)
    return None if found is None else found.end()


def body_size(head: bytes) -> int | None:
    """The length of the body that follows this head, to be read before the request is
    answered; None when the request is answered from its head alone (a broken head, a
    bad Content-Length, a chunked body or one over MAX_BODY_BYTES: each an error)."""
    try:
        headers = parse_headers(BytesIO(head[head.find(b"\n") + 1 :]))
    except (HTTPException, ValueError):
        return None  # the handler parses it again and answers the error
    length = body_length(headers)
    if length is None or length > MAX_BODY_BYTES or headers.get("Transfer-Encoding"):
        return None
    return length
