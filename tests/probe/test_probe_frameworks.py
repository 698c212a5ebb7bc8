"""The one-line mounts from the package docstring, in Flask, Django and Starlette."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from probe_helpers import call_wsgi, read_log, wsgi_environ

from pinchpoint.probe import ProbeASGI, ProbeWSGI

TAG_QUERY = "pp_run=r1&pp_users=2&pp_req=9"


def test_flask_mount_in_one_line(tmp_path: Path) -> None:
    from flask import Flask

    app = Flask(__name__)

    @app.get("/hello")
    def hello() -> str:
        return "hello from flask"

    log = tmp_path / "timing.log"
    app.wsgi_app = ProbeWSGI(app.wsgi_app, log_path=log)
    client = app.test_client()

    probe = client.get("/sys_perf_check?cpu=5&wait=5&bytes=300")
    assert probe.status_code == 200
    assert len(probe.data) == 300
    assert probe.get_json()["cpu_ms"] == 5.0
    assert client.get("/sys_perf_check?cpu=x").status_code == 400
    assert client.post("/sys_perf_check").status_code == 405

    # buffered=True makes the test client close the response, which is when it is logged.
    hello_response = client.get(f"/hello?{TAG_QUERY}", buffered=True)
    assert hello_response.status_code == 200
    assert hello_response.data == b"hello from flask"
    assert client.get(f"/missing?{TAG_QUERY}", buffered=True).status_code == 404
    assert client.get("/hello").data == b"hello from flask"

    records = read_log(log)
    assert [(r["uri"], r["status"]) for r in records] == [
        (f"/hello?{TAG_QUERY}", 200),
        (f"/missing?{TAG_QUERY}", 404),
    ]


def test_django_mount_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("django")
    from django.conf import settings
    from django.core.wsgi import get_wsgi_application
    from django.http import HttpResponse
    from django.urls import path

    def hello(request: Any) -> HttpResponse:
        return HttpResponse(b"hello from django")

    urls = ModuleType("probe_test_django_urls")
    urls.urlpatterns = [path("hello", hello)]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, urls.__name__, urls)
    if not settings.configured:
        settings.configure(
            DEBUG=False,
            SECRET_KEY="probe-tests",
            ALLOWED_HOSTS=["127.0.0.1"],
            ROOT_URLCONF=urls.__name__,
            MIDDLEWARE=[],
            INSTALLED_APPS=[],
        )
    log = tmp_path / "timing.log"
    application = ProbeWSGI(get_wsgi_application(), log_path=log)

    probe = call_wsgi(application, wsgi_environ("/sys_perf_check", "cpu=3&bytes=200"))
    assert probe.status == 200
    assert len(probe.body) == 200
    hello_response = call_wsgi(application, wsgi_environ("/hello", TAG_QUERY))
    assert hello_response.status == 200
    assert hello_response.body == b"hello from django"
    [record] = read_log(log)
    assert (record["uri"], record["status"]) == (f"/hello?{TAG_QUERY}", 200)


# Starlette 1.x prefers httpx2 for its TestClient; httpx still works.
@pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
def test_starlette_add_middleware_in_one_line(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    started: list[str] = []

    async def hello(request: Any) -> PlainTextResponse:
        return PlainTextResponse("hello from starlette")

    def lifespan(app: Any) -> Any:
        from contextlib import asynccontextmanager

        @asynccontextmanager
        async def span(app: Any) -> Any:
            started.append("up")
            yield

        return span(app)

    app = Starlette(routes=[Route("/hello", hello)], lifespan=lifespan)
    log = tmp_path / "timing.log"
    app.add_middleware(ProbeASGI, log_path=log)

    with TestClient(app) as client:
        probe = client.get("/sys_perf_check", params={"cpu": "4", "bytes": "250"})
        assert probe.status_code == 200
        assert len(probe.content) == 250
        assert probe.json()["cpu_ms"] == 4.0
        assert client.get("/sys_perf_check?wait=-1").status_code == 400
        head = client.head("/sys_perf_check?cpu=1&bytes=123")
        assert (head.status_code, head.headers["content-length"], head.content) == (
            200,
            "123",
            b"",
        )
        tagged = client.get("/hello", headers={"X-Pinchpoint": "run=r1; users=2; req=9"})
        assert tagged.text == "hello from starlette"
        assert client.get("/hello").text == "hello from starlette"

    assert started == ["up"]
    [record] = read_log(log)
    assert (record["method"], record["uri"], record["status"]) == ("GET", "/hello", 200)
