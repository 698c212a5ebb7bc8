"""Lines written by a real nginx, configured with pinchpoint's log_format."""

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pinchpoint.collect.logs.reader import FileCounts, collect_component, mark
from pinchpoint.logformats import get_parser
from pinchpoint.logformats.nginx import NGINX_FORMAT
from pinchpoint_lab.ports import free_port

NGINX = "/usr/sbin/nginx"

pytestmark = pytest.mark.skipif(not os.access(NGINX, os.X_OK), reason="nginx is not installed")


@dataclass(frozen=True)
class Nginx:
    process: subprocess.Popen[bytes]
    port: int
    access_log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)  # graceful: workers finish their requests
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def config(tmp: Path, port: int, closed_port: int) -> str:
    kinds = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    temp_paths = "\n".join(f"    {kind}_temp_path {tmp / kind};" for kind in kinds)
    user = "user root;" if os.geteuid() == 0 else ""
    return f"""
{user}
worker_processes 1;
pid {tmp / "nginx.pid"};
error_log {tmp / "error.log"} info;
events {{ worker_connections 64; }}
http {{
{temp_paths}
    log_format pinchpoint '{NGINX_FORMAT}';
    access_log {tmp / "access.log"} pinchpoint;
    server {{
        listen 127.0.0.1:{port};
        location /ok {{ return 200 "ok"; }}
        location /up {{ proxy_pass http://127.0.0.1:{closed_port}; }}
    }}
}}
"""


def wait_listening(process: subprocess.Popen[bytes], port: int, error_log: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log = error_log.read_text() if error_log.exists() else ""
            pytest.fail(f"nginx exited with {process.returncode}: {log}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    pytest.fail("nginx did not start listening within 10 s")


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[Nginx]:
    port = free_port()
    closed_port = free_port()
    while closed_port == port:
        closed_port = free_port()
    conf = tmp_path / "nginx.conf"
    conf.write_text(config(tmp_path, port, closed_port))
    process = subprocess.Popen(
        [
            NGINX,
            "-p",
            str(tmp_path),
            "-e",
            str(tmp_path / "error.log"),
            "-c",
            str(conf),
            "-g",
            "daemon off;",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = Nginx(process, port, tmp_path / "access.log")
    try:
        wait_listening(process, port, tmp_path / "error.log")
        yield server
    finally:
        server.stop()


def wait_lines(path: Path, count: int) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        time.sleep(0.02)
    pytest.fail(f"{path} did not reach {count} lines")


def get(port: int, path: str) -> int:
    # No proxy: requests must go to 127.0.0.1 whatever the environment says.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_real_nginx_access_log_is_matched_by_tag(nginx: Nginx) -> None:
    assert get(nginx.port, "/ok?pp_run=r1&pp_users=2&pp_req=100") == 200  # before the mark
    wait_lines(nginx.access_log, 1)  # nginx logs after it responds
    position = mark(nginx.access_log)

    assert get(nginx.port, "/ok?pp_run=r1&pp_users=2&pp_req=1") == 200
    assert get(nginx.port, "/ok?x=1&pp_run=r1&pp_users=2&pp_req=2") == 200
    assert get(nginx.port, "/ok?pp_run=r1&pp_users=4&pp_req=3") == 200
    assert get(nginx.port, "/up?pp_run=r1&pp_users=4&pp_req=4") == 502
    assert get(nginx.port, "/ok?pp_run=r0&pp_users=2&pp_req=1") == 200
    assert get(nginx.port, "/ok") == 200
    assert get(nginx.port, "/up") == 502
    finished = time.time()
    nginx.stop()

    rows, counts = collect_component(
        "nginx", nginx.access_log, get_parser("nginx", NGINX_FORMAT), "r1", position
    )

    assert counts == FileCounts(
        component="nginx",
        path=str(nginx.access_log),
        lines=7,
        matched=4,
        other_run=1,
        untagged=2,
        unparseable=0,
    )
    assert [(row.users, row.req_id, row.status) for row in rows] == [
        (2, 1, 200),
        (2, 2, 200),
        (4, 3, 200),
        (4, 4, 502),
    ]
    assert [row.upstream_s is None for row in rows] == [True, True, True, False]
    assert rows[3].upstream_s is not None and 0 <= rows[3].upstream_s < 5
    for row in rows:
        assert row.component == "nginx"
        assert 0 <= row.duration_s < 5
        assert row.ts is not None and finished - 60 < row.ts <= finished + 1
