"""`--serve HOST:PORT`: the run's page while it goes, then its report at the same address.

`/` is the live page (live_page.html) until the report is written, then the report;
`/events` streams server-sent events: `state` on connecting (all so far), `second` each
second (the row, its step so far, the verdict so far), `stage` when the load ends and the
tiers' records are collected and analyzed, `final` once the report is written.
`/plotly.js` is the charts' library, the same the report inlines.

Off loopback every path needs the token the command prints: `?token=` once (the page
then holds it as a cookie) or `Authorization: Bearer`. `POST /control` changes the run's
users (outputs/live_control.py) and needs that token on loopback too: a page always has
one, printed with its address.

Served within LIMITS (pinchpoint.outputs.bounded_server): clients that connect and stall
hold no thread, and at most LIMITS.streams pages follow the run at once (one more is
answered 503)."""

from __future__ import annotations

import ipaddress
import json
import queue
import secrets
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pinchpoint.load.control import LiveControl
from pinchpoint.outputs import live_control
from pinchpoint.outputs.addresses import reachable_hosts
from pinchpoint.outputs.bounded_server import BoundedHandler, Limits, start_server, stop_server
from pinchpoint.outputs.live_state import LiveRun

PAGE = Path(__file__).with_name("live_page.html")
COOKIE = live_control.COOKIE
# Events a page may fall behind by before it is dropped (it reconnects and gets `state`).
BACKLOG = 120
KEEPALIVE_S = 15.0
# How soon a stream's thread sees that its page went away while no event comes.
GONE_CHECK_S = 1.0
LIMITS = Limits(max_connections=64, workers=8, streams=6)


class LivePage:
    """An HTTP server in daemon threads (a bounded pool), fed by `__call__` with each
    snapshot."""

    def __init__(
        self,
        host: str,
        port: int,
        run_id: str,
        token: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        limits: Limits = LIMITS,
        control: LiveControl | None = None,
    ) -> None:
        self.run = LiveRun(run_id)
        self.control = control
        self.host = host
        self.clock = clock
        self.started = clock()
        self.lock = threading.Lock()
        self.listeners: list[queue.Queue[tuple[str, Any] | None]] = []
        self.report: Path | None = None
        self.closed = False
        self.token = token_for(host, token)
        # The read token when there is one; on loopback, one made for the control alone.
        self.key = self.token if self.token is not None else secrets.token_urlsafe(24)
        self.httpd, self.thread = start_server(host, port, _handler(self), limits)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def url(self) -> str:
        """The page's address, with its token when it has one (listening on a wildcard:
        the first of this host's addresses)."""
        return self.urls[0]

    @property
    def urls(self) -> list[str]:
        """Each address the page can be browsed at, with its token (on loopback, the
        control's: reading needs none there)."""
        query = f"?token={self.key}"
        return [f"http://{host}:{self.port}/{query}" for host in reachable_hosts(self.host)]

    def __call__(self, snapshot: dict[str, Any]) -> None:
        with self.lock:
            event = self.run.add(snapshot, self.clock() - self.started)
        self._publish("second", event)

    def stage(self, name: str) -> None:
        with self.lock:
            self.run.stage = name
        self._publish("stage", {"stage": name})

    def finish(self, report: Path, headline: str) -> None:
        """The report is written: `/` serves it from now on, and open pages load it."""
        with self.lock:
            self.report = report
            self.run.stage = "done"
        self._publish("final", {"headline": headline})

    def state(self) -> dict[str, Any]:
        with self.lock:
            return self._state()

    def _state(self) -> dict[str, Any]:
        control = self.control.about() if self.control is not None else {"available": False}
        return self.run.state() | {"control": control}

    def subscribe(self) -> queue.Queue[tuple[str, Any] | None]:
        listener: queue.Queue[tuple[str, Any] | None] = queue.Queue(BACKLOG)
        with self.lock:
            listener.put(("state", self._state()))
            if self.report is not None:
                listener.put(("final", {"headline": ""}))
            if self.closed:  # a stream begun as the page closes ends at once
                listener.put(None)
            self.listeners.append(listener)
        return listener

    def unsubscribe(self, listener: queue.Queue[tuple[str, Any] | None]) -> None:
        with self.lock:
            if listener in self.listeners:
                self.listeners.remove(listener)

    def _publish(self, name: str, data: Any) -> None:
        with self.lock:
            for listener in list(self.listeners):
                try:
                    listener.put_nowait((name, data))
                except queue.Full:  # a page that stopped reading: it is let go
                    self.listeners.remove(listener)
                    _close(listener)

    def authorized(self, path: str, headers: Any) -> tuple[bool, bool]:
        """Whether a request may be answered, and whether to set the token cookie (given
        in the query: on loopback too, for the page's control)."""
        given = parse_qs(urlsplit(path).query).get("token", [""])[0]
        if live_control.same_token(given, self.key):
            return True, True
        if self.token is None:
            return True, False
        return live_control.same_token(live_control.held_token(headers), self.key), False

    def __enter__(self) -> LivePage:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        with self.lock:
            for listener in self.listeners:
                _close(listener)
            self.listeners.clear()
            self.closed = True
        stop_server(self.httpd, self.thread)


def _close(listener: queue.Queue[tuple[str, Any] | None]) -> None:
    with suppress(queue.Full):  # its reader is stalled: the socket's close ends it
        listener.put_nowait(None)


def token_for(host: str, token: str | None) -> str | None:
    """`token`, or off loopback one made now (a page that anyone on the network could
    read must not be), or None."""
    if token is not None or _is_loopback(host):
        return token
    return secrets.token_urlsafe(24)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


@cache
def _plotly_js() -> bytes:
    from pinchpoint.report.plotly_files import plotly_js

    return plotly_js().encode()


def _handler(page: LivePage) -> type[BoundedHandler]:
    class Handler(BoundedHandler):
        def do_GET(self) -> None:
            allowed, set_cookie = page.authorized(self.path, self.headers)
            if not allowed:
                self._send(401, b"the live page needs its token: ?token=...\n", "text/plain")
                return
            path = urlsplit(self.path).path
            cookie = (
                f"{COOKIE}={page.key}; HttpOnly; SameSite=Strict; Path=/" if set_cookie else None
            )
            if path == "/":
                report = page.report
                body = report.read_bytes() if report is not None else PAGE.read_bytes()
                self._send(200, body, "text/html; charset=utf-8", cookie)
            elif path == "/plotly.js":
                self._send(200, _plotly_js(), "text/javascript; charset=utf-8", cookie)
            elif path == "/state":
                self._send(200, json.dumps(page.state()).encode(), "application/json", cookie)
            elif path == "/events":
                if not self.server.streams.acquire(blocking=False):
                    self._send(503, b"too many pages follow this run\n", "text/plain")
                    return
                try:
                    self._stream()
                finally:
                    self.server.streams.release()
            elif path == "/favicon.ico":
                self._send(204, b"", "image/x-icon")
            else:
                self._send(404, b"not found\n", "text/plain")

        def do_POST(self) -> None:
            if urlsplit(self.path).path != "/control":
                self._send(404, b"not found\n", "text/plain")
                return
            status, data = live_control.answer(page.control, page.key, self.path, self.headers)
            self._send(status, live_control.body(data), "application/json")

        def _send(self, status: int, body: bytes, kind: str, cookie: str | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            if cookie is not None:
                self.send_header("Set-Cookie", cookie)
            self.end_headers()
            self.wfile.write(body)

        def _stream(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            listener = page.subscribe()
            written = time.monotonic()
            try:
                while True:
                    try:
                        item = listener.get(timeout=GONE_CHECK_S)
                    except queue.Empty:
                        if self.client_gone():  # its thread is for another page now
                            return
                        if time.monotonic() - written >= KEEPALIVE_S:
                            self.wfile.write(b": still running\n\n")
                            written = time.monotonic()
                        continue
                    if item is None:
                        return
                    name, data = item
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                    written = time.monotonic()
            except OSError:  # the page went away
                return
            finally:
                page.unsubscribe(listener)

    return Handler
