"""The demo app as ASGI (Starlette), for gunicorn's uvicorn workers, with the probe mounted.

The same endpoints and database as the Flask app (`app.py`) but `/api/hot`, and the
WebSockets of `ws_app.py` (`/ws/echo`, `/ws/chat`). The probe
(`ProbeASGI`) burns its CPU on the event loop and awaits its wait, so one process holds
any number of waiting probe requests. The other endpoints are plain functions, which
Starlette runs in anyio's thread pool (40 threads a process): `/api/fsync` blocks a
thread there, not the loop.

Run as ``gunicorn -k pinchpoint.demo.asgi_app.AccessLogUvicornWorker
'pinchpoint.demo.asgi_app:asgi()'`` with ``PINCHPOINT_DEMO_DB`` and ``PINCHPOINT_PROBE_LOG``.
"""

from __future__ import annotations

import os
import time
import warnings
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute

from pinchpoint.demo import ws_app
from pinchpoint.demo.app import (
    FSYNC_FILE,
    MAX_FSYNC_KB,
    MAX_FSYNC_N,
    MAX_LIMIT,
    _connect,
    append_and_sync,
    init_db,
)
from pinchpoint.demo.env import DB_ENV, PROBE_LOG_ENV
from pinchpoint.probe.asgi import ASGIApp, Message, ProbeASGI, Receive, Scope, Send

with warnings.catch_warnings():
    # uvicorn deprecates the module for the separate uvicorn-worker package; it still works.
    warnings.simplefilter("ignore", DeprecationWarning)
    from uvicorn.workers import UvicornWorker


def create_asgi_app(db_path: Path | str, probe_log: Path | str) -> ASGIApp:
    """The demo app as ASGI, its database created and seeded if new, the probe logging."""
    db_path = Path(db_path)
    init_db(db_path)

    def healthz(request: Request) -> Response:
        return PlainTextResponse("ok\n")

    def list_items(request: Request) -> Response:
        limit = _int_arg(request, "limit", 20)
        offset = _int_arg(request, "offset", 0)
        if limit is None or not 1 <= limit <= MAX_LIMIT or offset is None or offset < 0:
            return _error(400, f"limit must be an integer 1..{MAX_LIMIT}, offset one >= 0")
        with closing(_connect(db_path)) as conn:
            rows = conn.execute(
                "SELECT id, name, price FROM items ORDER BY id LIMIT ? OFFSET ?", (limit, offset)
            ).fetchall()
        return JSONResponse({"items": [dict(row) for row in rows]})

    def get_item(request: Request) -> Response:
        item_id = request.path_params["item_id"]
        with closing(_connect(db_path)) as conn:
            row = conn.execute(
                "SELECT id, name, price FROM items WHERE id = ?", (item_id,)
            ).fetchone()
        if row is None:
            return _error(404, f"no item {item_id}")
        return JSONResponse(dict(row))

    async def add_item(request: Request) -> Response:
        try:
            body: Any = await request.json()
        except ValueError:
            body = None
        name = body.get("name") if isinstance(body, dict) else None
        price = body.get("price") if isinstance(body, dict) else None
        if not isinstance(name, str) or not name or not isinstance(price, int | float):
            return _error(400, 'expected JSON {"name": <non-empty string>, "price": <number>}')
        with closing(_connect(db_path)) as conn:
            cur = conn.execute("INSERT INTO items (name, price) VALUES (?, ?)", (name, price))
        return JSONResponse({"id": cur.lastrowid, "name": name, "price": price}, status_code=201)

    def fsync(request: Request) -> Response:
        kb, n = _int_arg(request, "kb", 64), _int_arg(request, "n", 1)
        if kb is None or n is None or not 1 <= kb <= MAX_FSYNC_KB or not 1 <= n <= MAX_FSYNC_N:
            return _error(400, f"kb must be an integer 1..{MAX_FSYNC_KB}, n one 1..{MAX_FSYNC_N}")
        spent = append_and_sync(db_path.with_name(FSYNC_FILE), kb, n)
        return JSONResponse({"kb": kb, "n": n, "fsync_s": spent})

    app = Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/api/items", list_items, methods=["GET"]),
            Route("/api/items", add_item, methods=["POST"]),
            Route("/api/items/{item_id:int}", get_item),
            Route("/api/fsync", fsync, methods=["GET", "POST"]),
            WebSocketRoute("/ws/echo", ws_app.echo),
            WebSocketRoute("/ws/chat", ws_app.chat),
        ]
    )
    return ProbeASGI(app, log_path=str(probe_log))


def asgi() -> ASGIApp:
    """The app configured from the environment, for gunicorn's ``module:asgi()`` syntax."""
    missing = [name for name in (DB_ENV, PROBE_LOG_ENV) if not os.environ.get(name)]
    if missing:
        raise RuntimeError(f"pinchpoint demo app: set {' and '.join(missing)}")
    return create_asgi_app(os.environ[DB_ENV], os.environ[PROBE_LOG_ENV])


class AccessLogUvicornWorker(UvicornWorker):
    """uvicorn's gunicorn worker, logging each request through gunicorn's access log in
    `--access-logformat` (uvicorn's own access lines have no duration)."""

    # uvicorn declares it without ClassVar, though it is read from the class.
    CONFIG_KWARGS: ClassVar[dict[str, Any]] = {**UvicornWorker.CONFIG_KWARGS, "access_log": False}  # type: ignore[misc]

    def load_wsgi(self) -> None:
        super().load_wsgi()
        self.wsgi: Any = GunicornAccessLog(self.wsgi, self.log)


class GunicornAccessLog:
    """ASGI middleware handing each HTTP request to a gunicorn logger's `access`."""

    def __init__(self, app: ASGIApp, log: Any) -> None:
        self.app = app
        self.log = log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        response = SimpleNamespace(status=500, sent=0, headers=[])

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                response.status = message["status"]
                response.headers = _decoded(message.get("headers", []))
            elif message["type"] == "http.response.body":
                response.sent += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            elapsed = timedelta(seconds=time.perf_counter() - started)
            self.log.access(response, _decoded(scope.get("headers", [])), _environ(scope), elapsed)


def _environ(scope: Scope) -> dict[str, str]:
    """The WSGI environ keys gunicorn's access log atoms read."""
    query = scope.get("query_string", b"").decode("latin-1")
    path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
    client = scope.get("client") or ("-", 0)
    return {
        "REQUEST_METHOD": scope["method"],
        "RAW_URI": f"{path}?{query}" if query else path,
        "PATH_INFO": scope["path"],
        "QUERY_STRING": query,
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "REMOTE_ADDR": str(client[0]),
    }


def _decoded(headers: list[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [(name.decode("latin-1"), value.decode("latin-1")) for name, value in headers]


def _int_arg(request: Request, name: str, default: int) -> int | None:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        return None


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status)
