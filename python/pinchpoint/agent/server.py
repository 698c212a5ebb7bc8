"""The agent's HTTP API (JSON; every call needs `Authorization: Bearer <token>`):

    GET  /v1/components                      what the agent watches, its host, its clock
    POST /v1/runs/<run_id>/start             {"interval_s": 1.0, "components": [...]}
    POST /v1/runs/<run_id>/stop
    GET  /v1/runs/<run_id>/resources         {"rows": [...]}, or Arrow IPC when asked
                                             (Accept: application/vnd.apache.arrow.stream)
    GET  /v1/runs/<run_id>/logs/<component>  NDJSON, chunked: one line per tagged record
                                             of the run, then {"end": true, "files": [...]}
    POST /v1/discover                        {"address": {"host", "port"}, "path"}: the
                                             tiers from there on (pinchpoint.agent.discovery)

Component names are looked up in the config; nothing from a request is used as a path.
Connections are read by one selector thread and answered by a bounded pool of threads
(pinchpoint.agent.connections); the access log on stderr redacts query values.
"""

from __future__ import annotations

import hmac
import json
import os
import re
import socket
import ssl
import sys
import threading
import time
import traceback
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from io import BytesIO
from typing import Any, cast
from urllib.parse import parse_qs, unquote, urlsplit

import pyarrow as pa

from pinchpoint.agent.config import AgentConfig
from pinchpoint.agent.connections import ConnectionServer
from pinchpoint.agent.discovery import discover
from pinchpoint.agent.runs import ApiError, Runs, check_interval
from pinchpoint.agent.transport import (
    MAX_BODY_BYTES,
    ClientGone,
    Connection,
    SocketWriter,
    body_length,
)
from pinchpoint.collect.logs.reader import FileCounts, TierRow
from pinchpoint.collect.resources.sampler import GENERATOR
from pinchpoint.collect.sources.local import LocalCollector
from pinchpoint.collect.sources.protocol import AGENT_SELF, API_PREFIX, ARROW_STREAM

CHUNK_BYTES = 64 * 1024
KEEPALIVE_S = 2.0
WORKERS = 16
# Log streams run for long: they may take this many of the pool's threads, so that the
# others are always free for short calls.
MAX_STREAMS = 12
_ROW_FIELDS = ("users", "req_id", "ts", "duration_s", "upstream_s", "status", "queue_s")
_QUERY = re.compile(r"\?(\S*)")
_QUERY_NAMES = frozenset({"format"})  # the query parameters the API reads
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}


class AgentServer(ConnectionServer):
    """The agent: its config, token and runs, served by a bounded pool of threads."""

    def __init__(
        self,
        address: tuple[str, int],
        config: AgentConfig,
        token: str | None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(address, tls, config.agent.max_connections, WORKERS)
        self.tls = tls is not None
        self.config = config
        self.token = token.encode() if token else None
        self.runs = Runs(config.component, config.agent.max_runs, config.agent.max_run)
        self.streams = threading.BoundedSemaphore(MAX_STREAMS)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in str(host) else str(host)
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    def answer(self, conn: Connection) -> bool:
        handler = Handler(conn, self)
        handler.handle_one_request()
        return not handler.close_connection

    def server_close(self) -> None:
        self.runs.close()
        super().server_close()


def redact_query(text: str) -> str:
    """`text` with every query redacted, so that a token sent in one is never logged:
    a parameter the API reads keeps its name (`format=*`), any other part is `*`."""

    def redact(found: re.Match[str]) -> str:
        parts = [part.partition("=") for part in found.group(1).split("&") if part]
        return "?" + "&".join(
            f"{name}=*" if equals and name in _QUERY_NAMES else "*" for name, equals, _ in parts
        )

    return _QUERY.sub(redact, text)


class Handler(BaseHTTPRequestHandler):
    """One request, read whole by the selector thread and answered in a pool thread."""

    server: AgentServer  # type: ignore[assignment]
    protocol_version = "HTTP/1.1"
    server_version = "pinchpoint-agent/1"
    sys_version = ""
    # Not HTTP/0.9, whose answers have no status line and no headers.
    default_request_version = "HTTP/1.0"

    def __init__(self, conn: Connection, server: AgentServer) -> None:
        # Not BaseHTTPRequestHandler's: it would read the socket; the request is read.
        self.server = server
        self.request = self.connection = conn.sock
        self.client_address = conn.address
        self.rfile = BytesIO(conn.request)
        self.wfile = SocketWriter(conn.sock)  # type: ignore[assignment]
        self.close_connection = True

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        # HTTP/0.9 ("GET /path", or named so) is refused.
        if len(self.requestline.split()) != 3 or int(self.request_version[5:].split(".")[0]) < 1:
            self.send_error(HTTPStatus.BAD_REQUEST, "Use HTTP/1.1")
            return False
        return True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # Answered with a status line and headers even to HTTP/0.9, which would have none.
        self.request_version = self.default_request_version
        super().send_error(code, message, explain)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def handle_expect_100(self) -> bool:
        return True  # sent by the selector thread while it waited for the body

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if isinstance(code, HTTPStatus):
            code = code.value
        line = getattr(self, "requestline", "")
        self.log_message('"%s" %s', redact_query(line), code)

    def log_error(self, format: str, *args: Any) -> None:
        pass  # the access line says the status; the rest is the client's

    def log_message(self, format: str, *args: Any) -> None:
        text = (format % args).translate(_CONTROL)
        sys.stderr.write(f"pinchpoint agent: {self.address_string()} {text}\n")

    # -- dispatch ------------------------------------------------------------------------

    def _handle(self, method: str) -> None:
        try:
            self._authenticate()
            action = self._route(method)
            action()
        except ApiError as e:
            self._send_json(e.status, {"error": e.message}, close=True)
        except ClientGone:
            self.close_connection = True
        except Exception as e:
            traceback.print_exc()  # a defect of the agent: shown, and answered with a 500
            self._send_json(500, {"error": f"{type(e).__name__}: {e}"}, close=True)

    def _authenticate(self) -> None:
        expected = self.server.token
        if expected is None:
            return
        given = self.headers.get("Authorization", "")
        scheme, _, credentials = given.partition(" ")
        ok = scheme.lower() == "bearer" and hmac.compare_digest(
            credentials.strip().encode("utf-8", "surrogateescape"), expected
        )
        if not ok:
            raise ApiError(401, "missing or wrong bearer token")

    def _route(self, method: str) -> Callable[[], None]:
        try:
            path = urlsplit(self.path).path
        except ValueError:  # such as "http://[::1/": a bracket not closed
            raise ApiError(400, "the request target is not a URL") from None
        if not path.startswith(API_PREFIX):
            raise ApiError(404, "not found")
        # Decoded per segment: an encoded '/' stays inside its segment.
        try:
            parts = [unquote(p, errors="strict") for p in path[len(API_PREFIX) :].split("/")]
        except UnicodeDecodeError:
            raise ApiError(400, "the URL is not UTF-8") from None
        match parts:
            case ["components"]:
                return self._allow(method, "GET", self._components)
            case ["discover"]:
                return self._allow(method, "POST", self._discover)
            case ["runs", run_id, "start"]:
                return self._allow(method, "POST", lambda: self._start(run_id))
            case ["runs", run_id, "stop"]:
                return self._allow(method, "POST", lambda: self._stop(run_id))
            case ["runs", run_id, "resources"]:
                return self._allow(method, "GET", lambda: self._resources(run_id))
            case ["runs", run_id, "logs", component]:
                return self._allow(method, "GET", lambda: self._logs(run_id, component))
        raise ApiError(404, "not found")

    @staticmethod
    def _allow(method: str, allowed: str, action: Callable[[], None]) -> Callable[[], None]:
        if method != allowed:
            raise ApiError(405, f"use {allowed}")
        return action

    # -- endpoints -----------------------------------------------------------------------

    def _components(self) -> None:
        components = [c.model_dump(exclude_none=True) for c in self.server.config.component]
        agent = {"hostname": socket.gethostname(), "cpu_count": os.cpu_count() or 1}
        self._send_json(200, {"time": time.time(), "agent": agent, "components": components})

    def _discover(self) -> None:
        self._send_json(200, discover(self.server.config.agent.discover, self._body()))

    def _start(self, run_id: str) -> None:
        body = self._body()
        interval = check_interval(body.get("interval_s", 1.0))
        names = body.get("components")
        if names is not None and (
            not isinstance(names, list) or not all(isinstance(n, str) for n in names)
        ):
            raise ApiError(400, "components must be a list of names")
        run = self.server.runs.start(run_id, interval, names)
        marks = {name: mark.as_dict() for name, mark in run.collector.marks.items()}
        self._send_json(
            200,
            {
                "run_id": run.run_id,
                "time": run.started,
                "interval_s": interval,
                "components": list(run.collector.components),
                "marks": marks,
            },
        )

    def _stop(self, run_id: str) -> None:
        self._body()
        run = self.server.runs.stop(run_id)
        self._send_json(
            200,
            {
                "run_id": run.run_id,
                "started": run.started,
                "stopped": run.stopped,
                "problems": list(run.collector.problems),
            },
        )

    def _resources(self, run_id: str) -> None:
        table = self.server.runs.get(run_id).collector.resources()
        names = [AGENT_SELF if c == GENERATOR else c for c in table.column("component").to_pylist()]
        table = table.set_column(1, "component", pa.array(names, pa.string()))
        query = parse_qs(urlsplit(self.path).query)
        if ARROW_STREAM in self.headers.get("Accept", "") or query.get("format") == ["arrow"]:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            self._send(200, ARROW_STREAM, sink.getvalue().to_pybytes())
        else:
            self._send_json(200, {"run_id": run_id, "rows": table.to_pylist()})

    def _logs(self, run_id: str, name: str) -> None:
        run = self.server.runs.get(run_id)
        if name not in run.collector.components:
            raise ApiError(404, f"no component {name!r} in run {run_id}")
        if run.collector.components[name].log is None:
            raise ApiError(404, f"component {name!r} has no log")
        if not self.server.streams.acquire(blocking=False):
            raise ApiError(503, "too many log streams at once; retry when one has ended")
        try:
            self._stream_logs(run.collector, name)
        finally:
            self.server.streams.release()

    def _stream_logs(self, collector: LocalCollector, name: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        out = ChunkWriter(cast(SocketWriter, self.wfile))  # set up as one in setup()
        counts: list[FileCounts] = []
        try:
            for row in collector.component_rows(name, counts, tick=out.keepalive):
                out.line(_row_json(row))
            end = {"end": True, "files": [_counts_json(c) for c in counts]}
            out.line(json.dumps(end))
        except ClientGone:
            raise
        except Exception as e:  # the headers are sent: say so in the stream, and end it
            out.line(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        out.end()

    # -- plumbing ------------------------------------------------------------------------

    def _body(self) -> dict[str, Any]:
        """The request's JSON object ({} without a body); 400 for anything else."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raise ApiError(411, "send a Content-Length")
        length = body_length(self.headers)
        if length is None:
            raise ApiError(400, "bad Content-Length")
        if length > MAX_BODY_BYTES:
            raise ApiError(413, f"the body must be at most {MAX_BODY_BYTES} bytes")
        raw = self.rfile.read(length) if length else b""
        if len(raw) != length:
            raise ApiError(400, "the body is shorter than its Content-Length")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ApiError(400, "the body is not UTF-8") from None
        if not text.strip():
            return {}
        try:
            body = json.loads(text, parse_constant=_not_json)
        except RecursionError:
            raise ApiError(400, "the body is nested too deeply") from None
        except ValueError:
            raise ApiError(400, "the body is not JSON") from None
        if not isinstance(body, dict):
            raise ApiError(400, "the body must be a JSON object")
        return body

    def _send_json(self, status: int, data: Any, close: bool = False) -> None:
        self._send(status, "application/json", json.dumps(data).encode(), close)

    def _send(self, status: int, content_type: str, payload: bytes, close: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-store")
        if status == 401:
            self.send_header("WWW-Authenticate", 'Bearer realm="pinchpoint-agent"')
        if status == 503:
            self.send_header("Retry-After", "1")
        if close:
            # An error may leave an unread body on the connection: do not reuse it.
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(payload)


class ChunkWriter:
    """HTTP/1.1 chunked output of lines, sent every CHUNK_BYTES; `keepalive` sends a blank
    line when nothing was sent for KEEPALIVE_S, so a long read does not look dead."""

    def __init__(self, out: SocketWriter) -> None:
        self._out = out
        self._buffer: list[bytes] = []
        self._size = 0
        self._sent_at = time.monotonic()

    def line(self, text: str) -> None:
        data = text.encode() + b"\n"
        self._buffer.append(data)
        self._size += len(data)
        if self._size >= CHUNK_BYTES:
            self.flush()

    def keepalive(self) -> None:
        if time.monotonic() - self._sent_at >= KEEPALIVE_S:
            if not self._buffer:
                self._buffer.append(b"\n")
                self._size = 1
            self.flush()

    def flush(self) -> None:
        if not self._size:
            return
        data = b"".join(self._buffer)
        self._out.write(b"%x\r\n%s\r\n" % (len(data), data))
        self._out.flush()
        self._buffer, self._size = [], 0
        self._sent_at = time.monotonic()

    def end(self) -> None:
        self.flush()
        self._out.write(b"0\r\n\r\n")
        self._out.flush()


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _row_json(row: TierRow) -> str:
    return json.dumps({name: getattr(row, name) for name in _ROW_FIELDS})


def _counts_json(counts: FileCounts) -> dict[str, Any]:
    return {"path": counts.path, **counts.as_dict()}
