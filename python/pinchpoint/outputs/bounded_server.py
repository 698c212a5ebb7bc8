"""The HTTP server the live outputs (`--serve`, `--metrics`) answer with, bounded so that
clients that connect and stall cost neither the run nor the page for a real client.

One selector thread accepts every connection and reads its request head; only a whole
head is handed to one of a fixed number of threads, which answers it and closes the
connection (HTTP/1.0, one request a connection). So an idle connection or a half-sent
head holds a socket and a small buffer, never a thread:

- a head must arrive whole within `head_timeout_s` of the connection's accept (a byte
  now and then does not push that back): else the connection is closed, with a 408 when
  it had sent part of a head, silently when it had sent nothing;
- at most `max_connections` are open, those being answered included: a new one makes
  room by closing the one waiting the longest for its head (silently when it had sent
  nothing, so that a browser's spare connection is retried; else with a 503); when every
  one is being answered, the new one is answered 503 and closed;
- a head over MAX_HEAD_BYTES is answered 431;
- an answer must be written within `write_timeout_s` (a client that does not read it is
  given up); long answers (event streams) take at most `streams` of the threads, so that
  the others stay free for short ones;
- none of these closes prints anything; a defect of a handler prints its traceback.
"""

from __future__ import annotations

import errno
import queue
import select
import selectors
import socket
import threading
import time
import traceback
from collections import OrderedDict
from contextlib import suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from io import BufferedIOBase, BytesIO

MAX_HEAD_BYTES = 16 * 1024
READ_BYTES = 16 * 1024
DRAIN_READS = 4
BACKLOG = 1024  # connections the kernel holds before accept: they cost no descriptor
ACCEPT_BATCH = 64
PAUSE_ACCEPT_S = 0.1  # when the process is out of descriptors with nothing to close
_HEAD_END = b"\r\n\r\n"
_OUT_OF_FDS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


@dataclass(frozen=True)
class Limits:
    """What one server may hold at once, and how long a client may take."""

    max_connections: int = 64
    workers: int = 4
    streams: int = 0  # of the workers, how many may serve a long answer at once
    head_timeout_s: float = 5.0
    write_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if not 0 <= self.streams < self.workers:
            raise ValueError(f"streams {self.streams}: from 0 to workers - 1 ({self.workers - 1})")


@dataclass
class Counts:
    """Connections closed without an answer of the handler, by why (for tests and logs)."""

    timed_out: int = 0  # no whole head within head_timeout_s
    evicted: int = 0  # closed to make room for a new one
    refused: int = 0  # answered 503: every connection was being answered
    too_large: int = 0  # a head over MAX_HEAD_BYTES


def _answer(status: str, text: str) -> bytes:
    body = f"{text}\n".encode()
    head = (
        f"HTTP/1.0 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


BUSY = _answer("503 Service Unavailable", "too many connections: try again in a few seconds")
TIMEOUT = _answer("408 Request Timeout", "the request did not arrive in time")
TOO_LARGE = _answer("431 Request Header Fields Too Large", "the request's head is too large")


class _Waiting:
    """A connection whose request head has not arrived whole yet."""

    __slots__ = ("address", "buffer", "since", "sock")

    def __init__(self, sock: socket.socket, address: tuple[str, int], since: float) -> None:
        self.sock = sock
        self.address = address
        self.since = since
        self.buffer = bytearray()


class _SocketWriter(BufferedIOBase):
    """A connection's output: each write is sent whole (within the socket's timeout)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        self._sock.sendall(data)
        return memoryview(data).nbytes


class BoundedHandler(BaseHTTPRequestHandler):
    """A handler given a head already read: it answers on the socket, in a pool thread."""

    server: BoundedServer  # type: ignore[assignment]

    def __init__(
        self, sock: socket.socket, address: tuple[str, int], head: bytes, server: BoundedServer
    ) -> None:
        # Not BaseHTTPRequestHandler's: it would read the socket; the head is read.
        self.server = server
        self.request = self.connection = sock
        self.client_address = address
        self.rfile = BytesIO(head)
        self.wfile = _SocketWriter(sock)
        self.close_connection = True

    def client_gone(self) -> bool:
        """Whether the client has closed or reset its end, checked without waiting."""
        poll = select.poll()
        poll.register(self.connection, select.POLLIN)
        if not poll.poll(0):
            return False
        try:
            return not self.connection.recv(1, socket.MSG_PEEK)
        except OSError:
            return True

    def log_message(self, format: str, *args: object) -> None:
        return


class BoundedServer:
    """Listens on `address`; `serve_forever` runs the selector loop, `shutdown` stops it
    from another thread and `server_close` closes every connection."""

    def __init__(
        self, address: tuple[str, int], handler: type[BoundedHandler], limits: Limits
    ) -> None:
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socket.bind(address)
            self.socket.listen(BACKLOG)
            self.socket.setblocking(False)
        except OSError:
            self.socket.close()
            raise
        self.server_address: tuple[str, int] = self.socket.getsockname()[:2]
        self.handler = handler
        self.limits = limits
        self.counts = Counts()
        self.streams = threading.BoundedSemaphore(limits.streams)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.socket, selectors.EVENT_READ, None)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, self._wake_r)
        self._waiting: OrderedDict[socket.socket, _Waiting] = OrderedDict()  # by accept
        self._busy = 0
        self._busy_lock = threading.Lock()
        self._jobs: queue.SimpleQueue[tuple[socket.socket, tuple[str, int], bytes] | None]
        self._jobs = queue.SimpleQueue()
        self._accept_paused_until: float | None = None
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._closed = False
        self.workers = [
            threading.Thread(target=self._work, name=f"pinchpoint-http-{n}", daemon=True)
            for n in range(limits.workers)
        ]
        for thread in self.workers:
            thread.start()

    def open_connections(self) -> int:
        with self._busy_lock:
            return len(self._waiting) + self._busy

    # -- life cycle ----------------------------------------------------------------------

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self._stopped.clear()
        try:
            while not self._stop.is_set():
                timeout = self._expire(time.monotonic(), poll_interval)
                for key, _ in self._selector.select(timeout):
                    if key.data is None:
                        self._accept()
                    elif key.data is self._wake_r:
                        with suppress(OSError):
                            self._wake_r.recv(4096)
                    else:
                        self._read(key.data)
        finally:
            self._stop.clear()
            self._stopped.set()

    def shutdown(self) -> None:
        """Stops serve_forever (running in another thread) and waits until it has."""
        self._stop.set()
        with suppress(OSError):
            self._wake_w.send(b"\0")
        self._stopped.wait()

    def server_close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for waiting in list(self._waiting.values()):
            self._close(waiting)
        for _ in self.workers:
            self._jobs.put(None)
        self._selector.close()
        for sock in (self.socket, self._wake_r, self._wake_w):
            sock.close()

    # -- the selector thread -------------------------------------------------------------

    def _accept(self) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                sock, address = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in _OUT_OF_FDS and not self._evict():
                    self._pause_accept()
                return
            if self.open_connections() >= self.limits.max_connections and not self._evict():
                self.counts.refused += 1
                _close_with(sock, BUSY)
                continue
            sock.setblocking(False)
            waiting = _Waiting(sock, address[:2], time.monotonic())
            self._selector.register(sock, selectors.EVENT_READ, waiting)
            self._waiting[sock] = waiting

    def _read(self, waiting: _Waiting) -> None:
        try:
            data = waiting.sock.recv(READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # closed by the client, with or without half a head
            self._close(waiting)
            return
        start = max(0, len(waiting.buffer) - len(_HEAD_END) + 1)
        waiting.buffer += data
        end = waiting.buffer.find(_HEAD_END, start)
        if end < 0:
            if len(waiting.buffer) > MAX_HEAD_BYTES:
                self.counts.too_large += 1
                self._close(waiting, TOO_LARGE)
            return
        self._forget(waiting)
        with self._busy_lock:
            self._busy += 1
        self._jobs.put((waiting.sock, waiting.address, bytes(waiting.buffer[: end + 4])))

    def _expire(self, now: float, poll_interval: float) -> float:
        """Closes the connections past their deadline; the time until the next one."""
        timeout = poll_interval
        if self._accept_paused_until is not None and now >= self._accept_paused_until:
            self._accept_paused_until = None
            self._selector.register(self.socket, selectors.EVENT_READ, None)
        while self._waiting:
            waiting = next(iter(self._waiting.values()))
            deadline = waiting.since + self.limits.head_timeout_s
            if deadline > now:
                timeout = min(timeout, deadline - now)
                break
            self.counts.timed_out += 1
            self._close(waiting, TIMEOUT if waiting.buffer else b"")
        return max(timeout, 0.0)

    def _evict(self) -> bool:
        """Closes the connection waiting the longest for its head, to make room."""
        if not self._waiting:
            return False
        waiting = next(iter(self._waiting.values()))
        self.counts.evicted += 1
        self._close(waiting, BUSY if waiting.buffer or _has_input(waiting.sock) else b"")
        return True

    def _pause_accept(self) -> None:
        with suppress(KeyError, ValueError):
            self._selector.unregister(self.socket)
        self._accept_paused_until = time.monotonic() + PAUSE_ACCEPT_S

    def _forget(self, waiting: _Waiting) -> None:
        self._waiting.pop(waiting.sock, None)
        with suppress(KeyError, ValueError):
            self._selector.unregister(waiting.sock)

    def _close(self, waiting: _Waiting, answer: bytes = b"") -> None:
        self._forget(waiting)
        _close_with(waiting.sock, answer)

    # -- the pool ------------------------------------------------------------------------

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            sock, address, head = job
            try:
                sock.settimeout(self.limits.write_timeout_s)
                self.handler(sock, address, head, self).handle_one_request()
            except OSError:  # reset, closed, or not read within write_timeout_s
                pass
            except Exception:
                traceback.print_exc()  # a defect of the server, not the client: show it
            finally:
                _close_with(sock, b"")
                with self._busy_lock:
                    self._busy -= 1


def _has_input(sock: socket.socket) -> bool:
    """Whether the client has sent something not read yet (the socket is non-blocking)."""
    try:
        return bool(sock.recv(1, socket.MSG_PEEK))
    except OSError:
        return False


def _close_with(sock: socket.socket, answer: bytes) -> None:
    """Sends `answer` if the socket takes it at once, then closes the connection. Input
    not read yet is read first (a little of it): a socket closed with unread input is reset,
    and the reset can discard the answer before the client reads it."""
    with suppress(OSError):
        sock.setblocking(False)
        for _ in range(DRAIN_READS):
            if not sock.recv(READ_BYTES):
                break
    with suppress(OSError):
        if answer:
            sock.send(answer)
        sock.shutdown(socket.SHUT_WR)
    sock.close()


def start_server(
    host: str, port: int, handler: type[BoundedHandler], limits: Limits
) -> tuple[BoundedServer, threading.Thread]:
    """A server listening on (host, port), served from a daemon thread already started."""
    httpd = BoundedServer((host, port), handler, limits)
    thread = threading.Thread(
        target=httpd.serve_forever,
        kwargs={"poll_interval": 0.1},
        name="pinchpoint-http",
        daemon=True,
    )
    thread.start()
    return httpd, thread


def stop_server(httpd: BoundedServer, thread: threading.Thread, within_s: float = 5.0) -> None:
    """Stops the server and waits, `within_s` at most, for its threads to end."""
    deadline = time.monotonic() + within_s
    httpd.shutdown()
    httpd.server_close()
    for one in (thread, *httpd.workers):
        one.join(timeout=max(0.0, deadline - time.monotonic()))
