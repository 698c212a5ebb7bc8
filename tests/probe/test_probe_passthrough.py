"""Requests to other paths, and non-HTTP ASGI scopes, reach the wrapped app untouched."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from probe_helpers import INNER_BODY, asgi_scope, call_asgi, probe_call, wsgi_environ

from pinchpoint.probe import PROBE_PATH, ProbeASGI, ProbeWSGI


class RecordingWSGI:
    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, Any], Any]] = []
        self.returned: list[bytes] = [b"from ", b"the app"]

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        self.calls.append((environ, start_response))
        start_response("418 I'm a teapot", [("X-App", "1"), ("Content-Type", "text/x-app")])
        return self.returned


class RecordingASGI:
    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, Any], Any, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.calls.append((scope, receive, send))
        if scope["type"] == "http":
            await send(
                {"type": "http.response.start", "status": 418, "headers": [(b"x-app", b"1")]}
            )
            await send({"type": "http.response.body", "body": b"from the app"})


def test_probe_path_constant() -> None:
    assert PROBE_PATH == "/sys_perf_check"


@pytest.mark.parametrize(
    "path", ["/", "/other", "/sys_perf_check/", "/sys_perf_checkx", "/x/sys_perf_check"]
)
def test_wsgi_other_paths_reach_the_app_untouched(path: str) -> None:
    app = RecordingWSGI()
    environ = wsgi_environ(path, "cpu=abc&anything=1", "POST")
    seen: list[tuple[str, list[tuple[str, str]]]] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        seen.append((status, headers))

    returned = ProbeWSGI(app)(environ, start_response)
    assert returned is app.returned
    assert app.calls == [(environ, start_response)]
    assert seen == [("418 I'm a teapot", [("X-App", "1"), ("Content-Type", "text/x-app")])]


def test_wsgi_untagged_requests_are_untouched_even_with_a_log(tmp_path: Any) -> None:
    app = RecordingWSGI()
    environ = wsgi_environ("/other", "a=1")
    returned = ProbeWSGI(app, log_path=tmp_path / "t.log")(environ, lambda *a: None)
    assert returned is app.returned


@pytest.mark.parametrize("path", ["/", "/other", "/sys_perf_check/", "/sys_perf_checkx"])
def test_asgi_other_paths_reach_the_app_untouched(path: str) -> None:
    app = RecordingASGI()
    scope = asgi_scope(path, "cpu=abc", "POST")
    result = call_asgi(ProbeASGI(app), scope)
    assert result.status == 418
    assert result.body == b"from the app"
    assert result.headers == {"x-app": "1"}
    assert len(app.calls) == 1
    assert app.calls[0][0] is scope


@pytest.mark.parametrize("scope_type", ["lifespan", "websocket"])
def test_asgi_non_http_scopes_pass_through(scope_type: str) -> None:
    app = RecordingASGI()
    scope = {"type": scope_type, "path": PROBE_PATH, "asgi": {"version": "3.0"}}

    async def receive() -> dict[str, Any]:
        return {"type": f"{scope_type}.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        pass

    asyncio.run(ProbeASGI(app)(scope, receive, send))
    assert app.calls == [(scope, receive, send)]


@pytest.mark.parametrize("kind", ["wsgi", "asgi"])
def test_custom_path_moves_the_probe(kind: str) -> None:
    assert probe_call(kind, "cpu=1", request_path="/perf").body == INNER_BODY
    moved = probe_call(kind, "cpu=1", request_path="/perf", path="/perf")
    assert moved.status == 200
    assert moved.json()["cpu_ms"] == 1.0
    assert probe_call(kind, "cpu=1", path="/perf").body == INNER_BODY


def test_asgi_probe_matches_under_a_root_path() -> None:
    scope = asgi_scope("/api/sys_perf_check", "cpu=1")
    scope["root_path"] = "/api"
    result = call_asgi(ProbeASGI(RecordingASGI()), scope)
    assert result.status == 200
    assert result.json()["cpu_ms"] == 1.0
