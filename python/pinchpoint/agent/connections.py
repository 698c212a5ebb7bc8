"""The agent's connections: one selector thread reads every request, a bounded pool answers.

A connection costs no thread while it is idle or while its request is still arriving. The
selector thread does the TLS handshake and reads the request head, and its body up to
MAX_BODY_BYTES; only a whole request is handed to one of a fixed number of threads. So
idle connections and half-sent requests (slowloris) hold a socket and a small buffer,
never a thread, and a real request finds a free thread at once:

- a request (TLS handshake, head and body) must arrive within HEAD_TIMEOUT_S of its first
  byte; a connection idle between requests is closed after IDLE_TIMEOUT_S;
- at most `max_connections` are open: a new one makes room by closing the connection
  closing already, else the one idle the longest, else the oldest half-sent request;
- a client that does not read its answer is given up after WRITE_TIMEOUT_S;
- every close for these reasons, or for a reset or a broken request, is quiet.

A subclass answers a request in `answer` (in a pool thread) and says whether the
connection stays open for the next one.
"""

from __future__ import annotations

import errno
import queue
import selectors
import socket
import ssl
import threading
import time
import traceback
from collections import OrderedDict, deque
from collections.abc import Callable
from contextlib import suppress

from pinchpoint.agent.transport import (
    BUSY,
    CLOSED,
    DRAINING,
    IDLE,
    MAX_BODY_BYTES,
    MAX_HEAD_BYTES,
    READING,
    ClientGone,
    Connection,
    body_size,
    family,
    head_end,
    raise_fd_limit,
)

HEAD_TIMEOUT_S = 10.0
IDLE_TIMEOUT_S = 60.0
WRITE_TIMEOUT_S = 30.0
LINGER_S = 2.0  # after the last answer, unread input is drained this long before closing
READ_BYTES = 64 * 1024
BACKLOG = 1024
ACCEPT_BATCH = 256
FD_RESERVE = 256  # descriptors kept for log files, /proc, the pool and the sampler
PAUSE_ACCEPT_S = 0.1  # when the process is out of descriptors with nothing to close

_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_HEAD_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"Connection: close\r\nContent-Length: 0\r\n\r\n"
)
_OUT_OF_FDS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
_WOULD_BLOCK = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)


class ConnectionServer:
    """Listens on `address`; `serve_forever` runs the selector loop, `shutdown` stops it
    from another thread and `server_close` closes every connection."""

    def __init__(
        self,
        address: tuple[str, int],
        tls: ssl.SSLContext | None = None,
        max_connections: int = 4096,
        workers: int = 16,
    ) -> None:
        self.socket = socket.socket(family(address[0]), socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socket.bind(address)
            self.socket.listen(BACKLOG)
            self.socket.setblocking(False)
        except OSError:
            self.socket.close()
            raise
        self.server_address = self.socket.getsockname()
        limit = raise_fd_limit(max_connections + FD_RESERVE)
        self.max_connections = max(16, min(max_connections, limit - FD_RESERVE))
        self._tls = tls
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.socket, selectors.EVENT_READ, None)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, self._wake_r)
        # Each ordered by the start of its state, so the first to expire comes first.
        self._states: dict[str, OrderedDict[Connection, None]] = {
            IDLE: OrderedDict(),
            READING: OrderedDict(),
            DRAINING: OrderedDict(),
        }
        self._busy = 0
        self._done: deque[Connection] = deque()  # answered, back from the pool
        self._jobs: queue.SimpleQueue[Connection | None] = queue.SimpleQueue()
        self._accept_paused_until: float | None = None
        self._stop = False
        self._stopped = threading.Event()
        self._closed = False
        self._workers = [
            threading.Thread(target=self._work, name=f"agent-worker-{n}", daemon=True)
            for n in range(workers)
        ]
        for thread in self._workers:
            thread.start()

    # -- to override ---------------------------------------------------------------------

    def answer(self, conn: Connection) -> bool:
        """Answers `conn.request` on `conn.sock` (blocking, WRITE_TIMEOUT_S); True to keep
        the connection open for another request."""
        raise NotImplementedError

    # -- life cycle ----------------------------------------------------------------------

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self._stopped.clear()
        try:
            while not self._stop:
                timeout = self._expire(time.monotonic(), poll_interval)
                for key, _ in self._selector.select(timeout):
                    if key.data is None:
                        self._accept()
                    elif key.data is self._wake_r:
                        with suppress(OSError):
                            self._wake_r.recv(4096)
                    else:
                        self._guarded(self._ready, key.data)
                while self._done:
                    self._busy -= 1
                    self._guarded(self._take_back, self._done.popleft())
        finally:
            self._stop = False
            self._stopped.set()

    def shutdown(self) -> None:
        """Stops serve_forever (running in another thread) and waits until it has."""
        self._stop = True
        self._wake()
        self._stopped.wait()

    def server_close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for table in self._states.values():
            for conn in list(table):
                self._close(conn)
        while self._done:
            self._close(self._done.popleft())
        for _ in self._workers:
            self._jobs.put(None)
        with suppress(KeyError, ValueError):
            self._selector.unregister(self.socket)
        self._selector.close()
        for sock in (self.socket, self._wake_r, self._wake_w):
            sock.close()

    def open_connections(self) -> int:
        return sum(len(table) for table in self._states.values()) + self._busy

    # -- the selector thread -------------------------------------------------------------

    def _accept(self) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                sock, address = self.socket.accept()
            except _WOULD_BLOCK:
                return
            except OSError as e:
                if e.errno in _OUT_OF_FDS and not self._evict():
                    self._pause_accept()
                return
            if self.open_connections() >= self.max_connections and not self._evict():
                sock.close()
                continue
            self._add(sock, address)

    def _add(self, sock: socket.socket, address: tuple) -> None:
        try:
            sock.setblocking(False)
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        except (OSError, ValueError):
            sock.close()
            return
        conn = Connection(sock, address, time.monotonic())
        self._selector.register(sock, selectors.EVENT_READ, conn)
        self._enter(conn, READING if conn.handshaking else IDLE)

    def _ready(self, conn: Connection) -> None:
        if conn.state == DRAINING:
            self._drain(conn)
        elif conn.handshaking:
            self._handshake(conn)
        else:
            self._read(conn)

    def _handshake(self, conn: Connection) -> None:
        assert isinstance(conn.sock, ssl.SSLSocket)
        try:
            conn.sock.do_handshake()
        except ssl.SSLWantReadError:
            self._watch(conn, selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self._watch(conn, selectors.EVENT_WRITE)
            return
        except (OSError, ValueError):
            self._close(conn)
            return
        conn.handshaking = False
        self._watch(conn, selectors.EVENT_READ)
        self._enter(conn, IDLE)
        self._read(conn)  # the request may have come with the end of the handshake

    def _read(self, conn: Connection) -> None:
        limit = MAX_HEAD_BYTES + MAX_BODY_BYTES
        while True:
            try:
                data = conn.sock.recv(READ_BYTES)
            except _WOULD_BLOCK:
                break
            except (OSError, ValueError):
                self._close(conn)
                return
            if not data:
                self._close(conn)  # closed by the client, with or without half a request
                return
            conn.buffer += data
            # TLS may hold decrypted bytes the selector does not see: read until it has none.
            if not isinstance(conn.sock, ssl.SSLSocket) or len(conn.buffer) > limit:
                break
        self._advance(conn)

    def _advance(self, conn: Connection) -> None:
        """Hands the connection to the pool if its buffer holds a whole request."""
        if not conn.buffer:
            return
        if conn.state == IDLE:
            self._enter(conn, READING)
        if conn.need is None and not self._read_head(conn):
            return
        assert conn.need is not None
        if len(conn.buffer) >= conn.need:
            self._dispatch(conn)
        elif not conn.continued:
            conn.continued = True
            if b"100-continue" in bytes(conn.buffer[: conn.need]).lower():
                with suppress(OSError, ValueError):
                    conn.sock.send(_CONTINUE)

    def _read_head(self, conn: Connection) -> bool:
        """Sets conn.need once the head is in; False while it is not (or was refused)."""
        end = head_end(conn.buffer, max(0, conn.scanned - 3))
        if end is None:
            conn.scanned = len(conn.buffer)
            if conn.scanned > MAX_HEAD_BYTES:
                with suppress(OSError, ValueError):
                    conn.sock.send(_HEAD_TOO_LARGE)
                self._linger(conn)
            return False
        length = body_size(bytes(conn.buffer[:end]))
        if length is None:
            # Answered (with an error) from the head alone; what follows is not read.
            conn.need, conn.must_close = end, True
        else:
            conn.need = end + length
        return True

    def _dispatch(self, conn: Connection) -> None:
        assert conn.need is not None
        conn.request = bytes(conn.buffer[: conn.need])
        del conn.buffer[: conn.need]
        conn.need, conn.scanned, conn.continued = None, 0, False
        self._leave(conn)
        self._selector.unregister(conn.sock)
        conn.state = BUSY
        self._busy += 1
        self._jobs.put(conn)

    def _guarded(self, step: Callable[[Connection], None], conn: Connection) -> None:
        """One step of a connection; a socket error it did not expect closes only it."""
        try:
            step(conn)
        except (OSError, ValueError):
            self._close(conn)

    def _take_back(self, conn: Connection) -> None:
        """A connection back from the pool: kept for its next request, or closed."""
        conn.request = b""
        if not conn.keep:
            self._linger(conn)
        else:
            conn.must_close = False
            conn.events = selectors.EVENT_READ
            self._selector.register(conn.sock, selectors.EVENT_READ, conn)
            self._enter(conn, IDLE)
            self._advance(conn)  # a request sent right behind the last one

    def _linger(self, conn: Connection) -> None:
        """Closes the connection once the client has seen the answer: its unread input is
        drained for LINGER_S, so the close does not reset the connection under the answer."""
        try:
            conn.sock.shutdown(socket.SHUT_WR)
        except (OSError, ValueError):
            self._close(conn)
            return
        conn.buffer = bytearray()
        if conn.state == BUSY:
            conn.events = selectors.EVENT_READ
            self._selector.register(conn.sock, selectors.EVENT_READ, conn)
        else:
            self._watch(conn, selectors.EVENT_READ)
        self._enter(conn, DRAINING)

    def _drain(self, conn: Connection) -> None:
        try:
            while conn.sock.recv(READ_BYTES):
                pass
        except _WOULD_BLOCK:
            return
        except (OSError, ValueError):
            pass
        self._close(conn)

    def _expire(self, now: float, poll_interval: float) -> float:
        """Closes the connections past their deadline; the time until the next one."""
        timeout = poll_interval
        if self._accept_paused_until is not None and now >= self._accept_paused_until:
            self._accept_paused_until = None
            self._selector.register(self.socket, selectors.EVENT_READ, None)
        limits = {IDLE: IDLE_TIMEOUT_S, READING: HEAD_TIMEOUT_S, DRAINING: LINGER_S}
        for state, limit in limits.items():
            table = self._states[state]
            while table:
                conn = next(iter(table))
                if conn.since + limit > now:
                    timeout = min(timeout, conn.since + limit - now)
                    break
                self._close(conn)
        return max(timeout, 0.0)

    def _evict(self) -> bool:
        """Closes one connection to make room for a new one: one closing already, else the
        one idle the longest, else the oldest request still arriving."""
        for state in (DRAINING, IDLE, READING):
            table = self._states[state]
            if table:
                self._close(next(iter(table)))
                return True
        return False

    def _pause_accept(self) -> None:
        with suppress(KeyError, ValueError):
            self._selector.unregister(self.socket)
        self._accept_paused_until = time.monotonic() + PAUSE_ACCEPT_S

    def _enter(self, conn: Connection, state: str) -> None:
        self._leave(conn)
        conn.state = state
        conn.since = time.monotonic()
        self._states[state][conn] = None

    def _leave(self, conn: Connection) -> None:
        table = self._states.get(conn.state)
        if table is not None:
            table.pop(conn, None)

    def _watch(self, conn: Connection, events: int) -> None:
        if conn.events != events:
            conn.events = events
            self._selector.modify(conn.sock, events, conn)

    def _close(self, conn: Connection) -> None:
        if conn.state == CLOSED:
            return
        self._leave(conn)
        if conn.state != BUSY:
            with suppress(KeyError, ValueError):
                self._selector.unregister(conn.sock)
        conn.state = CLOSED
        with suppress(OSError):
            conn.sock.close()

    def _wake(self) -> None:
        with suppress(OSError):
            self._wake_w.send(b"\0")

    # -- the pool ------------------------------------------------------------------------

    def _work(self) -> None:
        while (conn := self._jobs.get()) is not None:
            conn.keep = False
            try:
                conn.sock.settimeout(WRITE_TIMEOUT_S)
                conn.keep = self.answer(conn) and not conn.must_close
                conn.sock.setblocking(False)
            except (ClientGone, OSError, ValueError):
                conn.keep = False
            except Exception:
                traceback.print_exc()  # a defect of the agent, not the client: show it
                conn.keep = False
            if self._closed:
                with suppress(OSError):
                    conn.sock.close()
                continue
            self._done.append(conn)
            self._wake()
