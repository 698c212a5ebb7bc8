"""The OTLP/HTTP listener of an `[[otlp]]` table: `POST /v1/traces`, protobuf or JSON,
gzip or not, as careful as the agent is with what clients send.

- At most MAX_CONNECTIONS connections are served at once (one more is closed unanswered
  and counted), and the listen backlog holds as many.
- A body is at most MAX_BODY bytes, after decompression too, and must arrive within
  BODY_DEADLINE_S (each read within SOCKET_TIMEOUT_S).
- The bodies held at once, by all the receivers of the process, are at most BODIES_BYTES:
  a request waits up to BUSY_WAIT_S for room, then is answered 503. Payloads are decoded
  one at a time (otlp_received.DECODING), within the decoders' own limits.
- A payload refused is answered 400, 404, 411, 413, 415 or 503 (the connection closed
  when its body was not read) and counted; a client that
  resets, closes or stalls before its answer is counted as a disconnect. Nothing is
  printed.
"""

from __future__ import annotations

import contextlib
import ctypes
import socket
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from pinchpoint.collect.sources.otlp_received import DECODING, KeptBytes, Received
from pinchpoint.collect.traces.otlp_json import decode_json
from pinchpoint.collect.traces.otlp_proto import decode_protobuf
from pinchpoint.collect.traces.spans import Decoded, PayloadError
from pinchpoint.plan.otlp import Otlp

PATH = "/v1/traces"
MAX_BODY = 32 << 20  # bytes of a request body, after decompression too
BODIES_BYTES = 64 << 20  # bytes of the bodies held at once in the process
BUSY_WAIT_S = 10.0
SOCKET_TIMEOUT_S = 10.0
BODY_DEADLINE_S = 30.0
# Connections served at once; one past it is closed unanswered (and counted), so that a
# flood of exporters cannot hold a thread each without bound.
MAX_CONNECTIONS = 64
JSON, PROTOBUF = "application/json", "application/x-protobuf"
_PROTOBUF_ANSWER = ExportTraceServiceResponse().SerializeToString()


class Refused(Exception):
    """A request answered with an error status (and counted as a refused payload)."""

    def __init__(self, status: int, why: str, *, body_read: bool = True) -> None:
        super().__init__(why)
        self.status = status
        self.body_read = body_read  # else the connection is closed: the body is not read


class ByteBudget:
    """Bytes that requests take while they hold a body, and give back."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._room = threading.Condition()

    def take(self, size: int, wait_s: float) -> bool:
        """Takes `size` bytes when there is room within `wait_s`; False if there was not."""
        with self._room:
            if not self._room.wait_for(lambda: self.used + size <= self.limit, wait_s):
                return False
            self.used += size
            return True

    def give(self, size: int) -> None:
        with self._room:
            self.used -= size
            self._room.notify_all()


BODIES = ByteBudget(BODIES_BYTES)
M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter


def _return_large_blocks() -> None:
    """Has the C allocator give a freed body back to the system at once. glibc raises its
    threshold for allocating a block by itself to the size of the last one freed, so
    after one 32 MiB body the next ones come from the arena of the thread that reads
    them, and stay there: four handler threads kept about 200 MB they had freed."""
    with contextlib.suppress(AttributeError, OSError):  # not glibc: nothing to set
        ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, 1 << 20)


class _BoundedServer(ThreadingHTTPServer):
    """A threading HTTP server that serves at most `limit` connections at once and lets
    its source count what goes wrong with a client instead of printing it."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        limit: int,
        source: Received,
    ) -> None:
        self.request_queue_size = limit  # the listen backlog
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(limit)
        self._limit = limit
        self._source = source

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._source.refuse(f"a connection past {self._limit} at once, closed")
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, OSError):
            self._source.disconnected()
        else:
            self._source.refuse(f"a request could not be answered ({type(error).__name__})")


class Receiver(Received):
    """One `[[otlp]]` listener, serving from start() to read() or close()."""

    def __init__(self, config: Otlp, kept: KeptBytes | None = None) -> None:
        super().__init__(config, kept)
        _return_large_blocks()
        self._server = _BoundedServer(config.address, _handler_for(self), MAX_CONNECTIONS, self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def read(self) -> None:
        self.close()

    def close(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()


def _handler_for(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # an answer in two writes, not 40 ms apart
        timeout = SOCKET_TIMEOUT_S

        def do_POST(self) -> None:
            try:
                kind, decoded = self._payload()
            except Refused as refused:
                receiver.refuse(str(refused))
                self.close_connection = self.close_connection or not refused.body_read
                self._answer(refused.status, "text/plain", f"{refused}\n".encode()[:1000])
                return
            except OSError:  # reset, closed or stalled while sending its body
                receiver.disconnected()
                self.close_connection = True
                return
            receiver.accept(decoded)
            self._answer(200, kind, b"{}" if kind == JSON else _PROTOBUF_ANSWER)

        def _payload(self) -> tuple[str, Decoded]:
            if self.path.split("?", 1)[0] != PATH:
                raise Refused(404, f"OTLP traces go to {PATH}", body_read=False)
            kind = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if kind not in (PROTOBUF, JSON):
                raise Refused(
                    415, f"content type {kind or 'none'!r}: {PROTOBUF} or {JSON}", body_read=False
                )
            encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
            if encoding not in ("gzip", "identity"):
                raise Refused(
                    400, f"content encoding {encoding!r}: use gzip or none", body_read=False
                )
            length = self._length()
            if not BODIES.take(length, BUSY_WAIT_S):
                raise Refused(
                    503, f"busy: bodies of {BODIES.limit} bytes held already", body_read=False
                )
            try:
                body = self._read(length)
                with DECODING:
                    return kind, _decoded(kind, _gunzip(body) if encoding == "gzip" else body)
            finally:
                BODIES.give(length)

        def _length(self) -> int:
            length = (self.headers.get("Content-Length") or "").strip()
            if not (length.isascii() and length.isdigit()):
                raise Refused(411, "a body needs a Content-Length", body_read=False)
            if len(length) > 12 or int(length) > MAX_BODY:
                raise Refused(
                    413, f"a body of {length[:20]} bytes is over {MAX_BODY}", body_read=False
                )
            return int(length)

        def _read(self, length: int) -> bytearray:
            """The body, read within BODY_DEADLINE_S; an OSError when the client is gone."""
            body = bytearray(length)
            view = memoryview(body)
            got = 0
            deadline = time.monotonic() + BODY_DEADLINE_S
            while got < length:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"a body not sent within {BODY_DEADLINE_S:g}s")
                read = self.rfile.readinto1(view[got:])
                if not read:
                    raise ConnectionAbortedError("the client closed before its body was sent")
                got += read
            view.release()
            return body

        def _answer(self, status: int, kind: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            if status == 503:
                self.send_header("Retry-After", "1")
            if self.close_connection:
                self.send_header("Connection", "close")
            try:
                self.end_headers()
                self.wfile.write(body)
            except OSError:  # gone before its answer
                receiver.disconnected()
                self.close_connection = True

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


def _decoded(kind: str, body: bytes | bytearray) -> Decoded:
    try:
        return decode_json(body) if kind == JSON else decode_protobuf(body)
    except PayloadError as exc:
        raise Refused(400, str(exc)) from None
    except (MemoryError, RecursionError, Exception) as exc:
        raise Refused(400, f"not an OTLP export request ({type(exc).__name__})") from None


def _gunzip(body: bytes | bytearray) -> bytes:
    inflate = zlib.decompressobj(wbits=31)
    try:
        out = inflate.decompress(body, MAX_BODY + 1)
    except zlib.error as exc:
        raise Refused(400, f"not gzip: {exc}") from None
    if len(out) > MAX_BODY or inflate.unconsumed_tail:
        raise Refused(413, f"a body over {MAX_BODY} bytes once decompressed")
    return out
