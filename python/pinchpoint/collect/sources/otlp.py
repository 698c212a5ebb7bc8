"""Spans received over OTLP/HTTP during a run, as a collector of tier records.

`pinchpoint run` listens where each `[[otlp]]` table says, from the load's start to
`settle` after its end (SDKs export in batches), for `POST /v1/traces` in protobuf
(`application/x-protobuf`) or JSON (`application/json`), gzip or not. A body that is not
an export request is answered 400 and counted, never raised; a span without what a record
needs is counted as unparseable. The spans of the run's traces become tier records
(`collect/traces/tiers.py`) written into tiers.parquet with the logs' records, and the
calls they show between tiers go into collection.json (`calls`).
"""

from __future__ import annotations

import gzip
import os
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow as pa
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from pinchpoint.collect.logs.reader import FileCounts, TierRow
from pinchpoint.collect.traces.spans import (
    Decoded,
    PayloadError,
    Span,
    decode_json,
    decode_protobuf,
)
from pinchpoint.collect.traces.tiers import tiers_of
from pinchpoint.plan.otlp import Otlp
from pinchpoint.rundir.schemas import RESOURCES_SCHEMA

PATH = "/v1/traces"
MAX_BODY = 32 << 20  # bytes of a request body, after decompression too
SOCKET_TIMEOUT_S = 10.0
# Connections served at once; one past it is closed unanswered (and counted), so that a
# flood of exporters cannot hold a thread and up to MAX_BODY each without bound.
MAX_CONNECTIONS = 64


class Received:
    """The spans a source gave for the run, and what it refused."""

    def __init__(self, config: Otlp) -> None:
        self.config = config
        self.spans: list[Span] = []
        self.payloads = 0
        self.rejected_payloads = 0
        self.rejected_spans = 0
        self.dropped_spans = 0  # past max_spans
        self.first_error: str | None = None
        self._lock = threading.Lock()

    def accept(self, decoded: Decoded) -> None:
        with self._lock:
            self.payloads += 1
            self.rejected_spans += decoded.rejected
            room = max(self.config.max_spans - len(self.spans), 0)
            self.spans.extend(decoded.spans[:room])
            self.dropped_spans += max(len(decoded.spans) - room, 0)

    def refuse(self, why: str) -> None:
        with self._lock:
            self.rejected_payloads += 1
            self.first_error = self.first_error or why

    def report(self) -> dict[str, Any]:
        return {
            "payloads": self.payloads,
            "rejected_payloads": self.rejected_payloads,
            "spans": len(self.spans),
            "rejected_spans": self.rejected_spans,
            "dropped_spans": self.dropped_spans,
            **({"first_error": self.first_error} if self.first_error else {}),
        }

    def start(self) -> None:
        """Begins taking spans for the run."""

    def read(self) -> None:
        """Ends taking spans: what the source holds is in `spans`."""

    def close(self) -> None:
        """Frees what the source holds open; idempotent."""


class _BoundedServer(ThreadingHTTPServer):
    """A threading HTTP server that serves at most `limit` connections at once."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        limit: int,
        on_refused: Callable[[], None],
    ) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(limit)
        self._limit = limit
        self._on_refused = on_refused

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._on_refused()
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


class Receiver(Received):
    """One `[[otlp]]` listener, serving from start() to read() or close()."""

    def __init__(self, config: Otlp) -> None:
        super().__init__(config)
        self._server = _BoundedServer(
            config.address,
            _handler_for(self),
            MAX_CONNECTIONS,
            lambda: self.refuse(f"a connection past {MAX_CONNECTIONS} at once, closed"),
        )
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


class FileSource(Received):
    """One `[[otlp]]` file: the lines its writer added during the run, read after it."""

    def __init__(self, config: Otlp) -> None:
        super().__init__(config)
        self.path = Path(config.file or "")
        self._mark: tuple[int, int] | None = None  # (inode, size) when the run started

    def start(self) -> None:
        try:
            stat = self.path.stat()
        except OSError:
            return  # not written yet: all of it will be the run's
        self._mark = (stat.st_ino, stat.st_size)

    def read(self) -> None:
        try:
            handle = self.path.open("rb")
        except OSError as exc:
            self.refuse(f"cannot read {self.path}: {exc.strerror or exc}")
            return
        with handle:
            stat = os.fstat(handle.fileno())
            mark = self._mark
            if mark is not None and mark[0] == stat.st_ino and stat.st_size >= mark[1]:
                handle.seek(mark[1])
            number = 0
            while line := handle.readline(MAX_BODY + 1):
                number += 1
                if len(line) > MAX_BODY:
                    self.refuse(f"{self.path}: line {number} is over {MAX_BODY} bytes")
                    while line and not line.endswith(b"\n"):
                        line = handle.readline(MAX_BODY)
                    continue
                if not line.strip():
                    continue
                try:
                    self.accept(decode_json(line))
                except PayloadError as exc:
                    self.refuse(f"{self.path}: line {number}: {exc}")


def _handler_for(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = SOCKET_TIMEOUT_S

        def do_POST(self) -> None:
            if self.path.split("?", 1)[0] != PATH:
                self._answer(404, "text/plain", b"OTLP traces go to /v1/traces\n")
                return
            kind = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if kind not in ("application/x-protobuf", "application/json"):
                receiver.refuse(f"content type {kind or 'none'!r}")
                self._answer(415, "text/plain", b"application/x-protobuf or application/json\n")
                return
            try:
                body = self._body()
                decoded = decode_json(body) if kind == "application/json" else decode_protobuf(body)
            except PayloadError as exc:
                receiver.refuse(str(exc))
                self._answer(400, "text/plain", f"{exc}\n".encode()[:1000])
                return
            receiver.accept(decoded)
            if kind == "application/json":
                self._answer(200, kind, b"{}")
            else:
                self._answer(200, kind, ExportTraceServiceResponse().SerializeToString())

        def _body(self) -> bytes:
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit():
                raise PayloadError("a body needs a Content-Length")
            if int(length) > MAX_BODY:
                self.close_connection = True
                raise PayloadError(f"a body of {length} bytes is over {MAX_BODY}")
            body = self.rfile.read(int(length))
            encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
            if encoding == "gzip":
                return _gunzip(body)
            if encoding != "identity":
                raise PayloadError(f"content encoding {encoding!r}: use gzip or none")
            return body

        def _answer(self, status: int, kind: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


def _gunzip(body: bytes) -> bytes:
    inflate = zlib.decompressobj(wbits=31)
    try:
        out = inflate.decompress(body, MAX_BODY + 1)
    except (zlib.error, gzip.BadGzipFile) as exc:
        raise PayloadError(f"not gzip: {exc}") from None
    if len(out) > MAX_BODY or inflate.unconsumed_tail:
        raise PayloadError(f"a body over {MAX_BODY} bytes once decompressed")
    return out


class OtlpCollector:
    """The plan's `[[otlp]]` sources as a collector of this host (no resources)."""

    name: str | None = None

    def __init__(self, configs: Sequence[Otlp]) -> None:
        self.configs = list(configs)
        self.problems: list[str] = []
        self.receivers: list[Received] = []
        self.run_id: str | None = None
        self._stopped_at: float | None = None
        self._calls: dict[str, list[str]] = {}

    def start(self, run_id: str, interval_s: float) -> None:
        self.run_id = run_id
        for config in self.configs:
            try:
                source = FileSource(config) if config.file is not None else Receiver(config)
            except OSError as exc:
                self.close()
                why = exc.strerror or exc
                raise OSError(f"otlp: cannot listen on {config.listen}: {why}") from None
            source.start()
            self.receivers.append(source)

    def stop(self) -> None:
        self._stopped_at = time.monotonic()

    def resources(self) -> pa.Table:
        return RESOURCES_SCHEMA.empty_table()

    def collect_logs(self, sink: Callable[[list[TierRow]], None]) -> list[FileCounts]:
        if self.run_id is None:
            return []
        settle = max((c.settle for c in self.configs), default=0.0)
        if self._stopped_at is not None:
            time.sleep(max(self._stopped_at + settle - time.monotonic(), 0.0))
        counts: list[FileCounts] = []
        calls: dict[str, set[str]] = {}
        for source in self.receivers:
            source.read()
            found = tiers_of(source.spans, self.run_id)
            sink(found.rows)
            counts += [
                FileCounts(
                    component=component,
                    path=source.config.source,
                    lines=c.spans,
                    matched=c.matched,
                    other_run=c.other_run,
                    untagged=c.untagged,
                    unparseable=c.unparseable,
                )
                for component, c in sorted(found.counts.items())
            ]
            for caller, callees in found.calls.items():
                calls.setdefault(caller, set()).update(callees)
            if source.rejected_spans or source.dropped_spans or source.rejected_payloads:
                self.problems.append(_refusals(source))
            if source.payloads == 0:
                self.problems.append(f"{source.config.source}: no spans received")
        self._calls = {caller: sorted(callees) for caller, callees in sorted(calls.items())}
        return counts

    def report(self) -> dict[str, Any]:
        if not self.receivers:
            return {}
        return {
            "otlp": {r.config.source: r.report() for r in self.receivers},
            "calls": self._calls,
        }

    def log_marks(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        for source in self.receivers:
            source.close()


def _refusals(source: Received) -> str:
    parts = []
    if source.rejected_payloads:
        parts.append(f"{source.rejected_payloads} payload(s) refused ({source.first_error})")
    if source.rejected_spans:
        parts.append(f"{source.rejected_spans} span(s) without ids or times")
    if source.dropped_spans:
        parts.append(f"{source.dropped_spans} span(s) past max_spans dropped")
    return f"{source.config.source}: " + "; ".join(parts)
