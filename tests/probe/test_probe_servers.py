"""Round trips through real servers on 127.0.0.1: wsgiref, gunicorn sync and gunicorn asgi."""

from __future__ import annotations

import http.client
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest
from probe_helpers import PYTHON_DIR, inner_wsgi, read_log

from pinchpoint.probe import ProbeWSGI

HOST = "127.0.0.1"


def request(
    port: int, target: str, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection(HOST, port, timeout=10)
    try:
        connection.request(method, target, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_wsgiref_round_trip(tmp_path: Path) -> None:
    log = tmp_path / "timing.log"
    server = make_server(HOST, 0, ProbeWSGI(inner_wsgi, log_path=log), handler_class=QuietHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        port = server.server_address[1]
        started = time.perf_counter()
        status, headers, body = request(port, "/sys_perf_check?cpu=5&wait=20&bytes=5000&pp_run=r1")
        assert time.perf_counter() - started >= 0.025
        assert status == 200
        assert headers["Content-Type"] == "application/json"
        assert len(body) == 5000
        assert request(port, "/hello?pp_run=r1&pp_req=2")[2] == b"inner app body"
        assert request(port, "/sys_perf_check", method="DELETE")[0] == 405
        assert request(port, "/sys_perf_check?bytes=x")[0] == 400
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    records = read_log(log)
    assert [(r["method"], r["status"]) for r in records] == [("GET", 200), ("GET", 200)]
    assert records[0]["duration_s"] >= 0.025
    assert records[1]["uri"] == "/hello?pp_run=r1&pp_req=2"


@contextmanager
def gunicorn(tmp_path: Path, app_source: str, *args: str) -> Iterator[int]:
    """Run gunicorn on 127.0.0.1 with a free port; yields the port."""
    (tmp_path / "probe_app.py").write_text(textwrap.dedent(app_source))
    errors = tmp_path / "gunicorn.err"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PYTHON_DIR), str(tmp_path)])}
    command = [
        *(sys.executable, "-m", "gunicorn", "--no-control-socket", "--bind", f"{HOST}:0"),
        *("--chdir", str(tmp_path), "--error-logfile", str(errors), *args, "probe_app:app"),
    ]
    process = subprocess.Popen(
        command,
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port = None
        for _ in range(200):
            found = re.search(rf"Listening at: http://{HOST}:(\d+)", _read(errors))
            if found:
                port = int(found.group(1))
                break
            if process.poll() is not None:
                break
            time.sleep(0.05)
        assert port is not None, f"gunicorn did not start:\n{_read(errors)}"
        yield port
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_gunicorn_workers_share_one_timing_log(tmp_path: Path) -> None:
    pytest.importorskip("gunicorn")
    log = tmp_path / "timing.log"
    app_source = f"""
        from pinchpoint.probe import ProbeWSGI

        def hello(environ, start_response):
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"hello"]

        app = ProbeWSGI(hello, log_path={str(log)!r})
    """
    with gunicorn(tmp_path, app_source, "--workers", "3", "--worker-class", "sync") as port:

        def tagged(req: int) -> int:
            target = "/sys_perf_check?cpu=2&wait=3" if req % 2 else "/hello?"
            return request(port, f"{target}&pp_run=g1&pp_users=6&pp_req={req}")[0]

        with ThreadPoolExecutor(max_workers=6) as pool:
            statuses = list(pool.map(tagged, range(60)))
        status, headers, body = request(port, "/sys_perf_check?cpu=1&bytes=777", method="HEAD")
        untagged = request(port, "/sys_perf_check?cpu=1&bytes=777")

    assert statuses == [200] * 60
    assert (status, headers["Content-Length"], body) == (200, "777", b"")
    assert len(untagged[2]) == 777
    records = read_log(log)
    assert len(records) == 60
    req_ids = sorted(int(r["uri"].rsplit("pp_req=", 1)[1]) for r in records)
    assert req_ids == list(range(60))
    probe_records = [r for r in records if r["uri"].startswith("/sys_perf_check")]
    assert len(probe_records) == 30
    assert min(r["duration_s"] for r in probe_records) >= 0.005


def test_gunicorn_asgi_worker_round_trip(tmp_path: Path) -> None:
    pytest.importorskip("gunicorn")
    log = tmp_path / "timing.log"
    app_source = f"""
        from pinchpoint.probe import ProbeASGI

        async def hello(scope, receive, send):
            if scope["type"] == "lifespan":
                for _ in range(2):
                    message = await receive()
                    kind = message["type"].rsplit(".", 1)[1]
                    await send({{"type": f"lifespan.{{kind}}.complete"}})
                    if kind == "shutdown":
                        return
                return
            await send({{"type": "http.response.start", "status": 200, "headers": []}})
            await send({{"type": "http.response.body", "body": b"hello"}})

        app = ProbeASGI(hello, log_path={str(log)!r})
    """
    with gunicorn(tmp_path, app_source, "--workers", "1", "--worker-class", "asgi") as port:
        assert request(port, "/hello")[2] == b"hello"
        status, _, body = request(port, "/sys_perf_check?cpu=3&bytes=4096")
        assert (status, len(body)) == (200, 4096)
        head = request(port, "/sys_perf_check?cpu=1&bytes=99", method="HEAD")
        assert (head[0], head[1].get("content-length"), head[2]) == (200, "99", b"")
        assert request(port, "/sys_perf_check?cpu=1&pp_run=r2", method="POST")[0] == 405

        # One worker, one event loop: concurrent waits overlap instead of queueing.
        def wait(req: int) -> int:
            return request(port, f"/sys_perf_check?cpu=0&wait=300&pp_run=r2&pp_req={req}")[0]

        # A pause of this process can slow one try; four waits queued take 1.2 s every time.
        tries = 0
        while tries < 3:
            tries += 1
            started = time.perf_counter()
            with ThreadPoolExecutor(max_workers=4) as pool:
                statuses = list(pool.map(wait, range(4)))
            elapsed = time.perf_counter() - started
            assert statuses == [200] * 4
            assert elapsed >= 0.3
            if elapsed < 1.0:
                break

    assert statuses == [200] * 4
    assert 0.3 <= elapsed < 1.0
    records = read_log(log)
    assert [r["status"] for r in records] == [405] + [200] * (4 * tries)
    assert all(r["duration_s"] >= 0.3 for r in records[1:])
    assert records[0]["method"] == "POST"
