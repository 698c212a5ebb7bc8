"""Drivers for the probe tests: call a WSGI or ASGI app in-process and read the timing log."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from wsgiref.util import setup_testing_defaults

from pinchpoint.probe import ProbeASGI, ProbeWSGI

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"
INNER_BODY = b"inner app body"


@dataclass
class Result:
    status: int
    headers: dict[str, str]
    body: bytes
    messages: list[dict[str, Any]] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode()


def wsgi_environ(
    path: str = "/sys_perf_check",
    query: str = "",
    method: str = "GET",
    headers: Iterable[tuple[str, str]] = (),
) -> dict[str, Any]:
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": query,
    }
    setup_testing_defaults(environ)
    for name, value in headers:
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    return environ


def call_wsgi(app: Any, environ: dict[str, Any]) -> Result:
    seen: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        seen["status"] = int(status.split()[0])
        seen["headers"] = dict(headers)
        return lambda data: None

    iterable = app(environ, start_response)
    try:
        body = b"".join(iterable)
    finally:
        if hasattr(iterable, "close"):
            iterable.close()
    return Result(seen["status"], seen["headers"], body)


def inner_wsgi(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain"), ("X-Inner", "yes")])
    return [INNER_BODY]


async def inner_asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/plain"), (b"x-inner", b"yes")],
        }
    )
    await send({"type": "http.response.body", "body": INNER_BODY})


def asgi_scope(
    path: str = "/sys_perf_check",
    query: str = "",
    method: str = "GET",
    headers: Iterable[tuple[str, str]] = (),
) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


async def call_asgi_async(app: Any, scope: dict[str, Any]) -> Result:
    messages: list[dict[str, Any]] = []
    requested = False

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    await app(scope, receive, send)
    start = next(m for m in messages if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    headers = {k.decode(): v.decode() for k, v in start.get("headers", [])}
    return Result(start["status"], headers, body, messages)


def call_asgi(app: Any, scope: dict[str, Any]) -> Result:
    return asyncio.run(call_asgi_async(app, scope))


def probe_call(
    kind: str,
    query: str = "",
    *,
    request_path: str = "/sys_perf_check",
    method: str = "GET",
    headers: Iterable[tuple[str, str]] = (),
    **options: Any,
) -> Result:
    """One request through ProbeWSGI (kind "wsgi") or ProbeASGI (kind "asgi") around a
    trivial inner app; ``options`` go to the middleware."""
    if kind == "wsgi":
        return call_wsgi(
            ProbeWSGI(inner_wsgi, **options), wsgi_environ(request_path, query, method, headers)
        )
    return call_asgi(
        ProbeASGI(inner_asgi, **options), asgi_scope(request_path, query, method, headers)
    )


def read_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]
