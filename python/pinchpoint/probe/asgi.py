"""The probe as ASGI middleware."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import quote

from .timing import TAG_HEADER, TimingLog, query_has_tag
from .work import (
    DEFAULT_MAX_MS,
    PROBE_PATH,
    Response,
    Work,
    burn_cpu,
    check_options,
    log_path_of,
    plan,
    report,
    without_body,
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_TAG_HEADER = TAG_HEADER.lower().encode("latin-1")
_PATH_SAFE = "/:@!$&'()*+,;="


class ProbeASGI:
    """Answers ``path`` with bounded work and passes every other request to ``app``.

    ``app.add_middleware(ProbeASGI)`` (Starlette / FastAPI) or ``app = ProbeASGI(app)``.
    Lifespan and websocket scopes pass through.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        path: str = PROBE_PATH,
        max_ms: float = DEFAULT_MAX_MS,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        check_options(path, max_ms)
        self.app = app
        self.path = path
        self.max_ms = max_ms
        log_path = log_path_of(log_path)
        self.log = TimingLog(log_path) if log_path is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        target = self._probe if self._is_probe(scope) else self.app
        if self.log is None or not _tagged(scope):
            await target(scope, receive, send)
            return
        await self._timed(self.log, target, scope, receive, send)

    def _is_probe(self, scope: Scope) -> bool:
        path = scope.get("path", "")
        # Servers differ on whether ``path`` includes ``root_path``; accept both.
        return path == self.path or path == scope.get("root_path", "") + self.path

    async def _probe(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        method = scope.get("method", "GET")
        outcome = plan(method, scope.get("query_string", b"").decode("latin-1"), self.max_ms)
        if isinstance(outcome, Work):
            burn_cpu(outcome.cpu_ms)
            await asyncio.sleep(outcome.wait_ms / 1000)
            outcome = report(outcome, time.perf_counter() - started)
        if method == "HEAD":
            outcome = without_body(outcome)
        await _send_response(send, outcome)

    async def _timed(
        self, log: TimingLog, target: ASGIApp, scope: Scope, receive: Receive, send: Send
    ) -> None:
        started = time.perf_counter()
        method = scope.get("method", "")
        uri = _uri(scope)
        status = 500
        logged = False

        def write() -> None:
            nonlocal logged
            logged = True
            log.write(method, uri, status, time.perf_counter() - started)

        async def timed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)
            if (
                message["type"] == "http.response.body"
                and not message.get("more_body", False)
                and not logged
            ):
                write()

        try:
            await target(scope, receive, timed_send)
        finally:
            if not logged:
                write()


async def _send_response(send: Send, response: Response) -> None:
    headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in response.headers]
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body, "more_body": False})


def _tagged(scope: Scope) -> bool:
    if query_has_tag(scope.get("query_string", b"").decode("latin-1")):
        return True
    return any(name.lower() == _TAG_HEADER for name, _ in scope.get("headers", ()))


def _uri(scope: Scope) -> str:
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if raw else quote(scope.get("path", ""), safe=_PATH_SAFE)
    query = scope.get("query_string", b"").decode("latin-1")
    return f"{path}?{query}" if query else path
