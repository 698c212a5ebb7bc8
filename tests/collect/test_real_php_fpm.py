"""A real PHP-FPM behind nginx (fastcgi_pass): its access log read by the php-fpm format and
matched by tag, and its pool read from its config as the resource sampler runs."""

from __future__ import annotations

import glob
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from collect.served import get, sampled_pool, wait_lines, wait_listening
from pinchpoint.collect.logs.reader import FileCounts, collect_component, mark
from pinchpoint.collect.servers.pool import SYNC
from pinchpoint.logformats import get_parser
from pinchpoint_lab.needs import nginx_missing
from pinchpoint_lab.ports import end, free_port
from pinchpoint_lab.waits import until

FPM = next(iter(sorted(glob.glob("/usr/sbin/php-fpm*"))), "/usr/sbin/php-fpm")
NGINX = "/usr/sbin/nginx"
FORMAT = '%R - %u %t "%m %r%Q%q" %s %{mili}d %{HTTP_X_PINCHPOINT}e'
CHILDREN = 3
# ?ms=N sleeps N ms (10 s at most), ?code=C answers status C.
SCRIPT = """<?php
usleep(min((int)($_GET['ms'] ?? 0), 10000) * 1000);
http_response_code((int)($_GET['code'] ?? 200));
echo "ok\\n";
"""

pytestmark = pytest.mark.skipif(
    not os.access(FPM, os.X_OK) or bool(nginx_missing()),
    reason="PHP-FPM and nginx are not installed (apt: php8.2-fpm nginx-light)",
)


@dataclass(frozen=True)
class Fpm:
    master: subprocess.Popen[bytes]
    port: int
    access_log: Path


def _fpm_conf(tmp: Path) -> None:
    (tmp / "pool.d").mkdir()
    (tmp / "php-fpm.conf").write_text(
        f"[global]\npid = {tmp / 'fpm.pid'}\nerror_log = {tmp / 'fpm-error.log'}\n"
        f"daemonize = no\ninclude = {tmp / 'pool.d'}/*.conf\n"
    )
    escaped = FORMAT.replace('"', '\\"')
    (tmp / "pool.d" / "app.conf").write_text(
        f"[app]\nlisten = {tmp / 'fpm.sock'}\npm = static\npm.max_children = {CHILDREN}\n"
        f"listen.backlog = 64\naccess.log = {tmp / 'access.log'}\n"
        f'access.format = "{escaped}"\n'
    )


def _nginx_conf(tmp: Path, port: int) -> None:
    temp_paths = "\n".join(f"{kind}_temp_path {tmp / kind};" for kind in ("client_body", "fastcgi"))
    (tmp / "nginx.conf").write_text(
        f"""{"user root;" if os.geteuid() == 0 else ""}
daemon off; worker_processes 1; pid {tmp / "nginx.pid"}; error_log {tmp / "nginx.log"};
events {{ worker_connections 64; }}
http {{
    access_log off;
    {temp_paths}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME {tmp / "app.php"};
            fastcgi_pass unix:{tmp / "fpm.sock"};
        }}
    }}
}}
"""
    )


def _text(path: Path) -> str:
    return path.read_text(errors="replace")[-2000:] if path.exists() else ""


@pytest.fixture
def fpm(tmp_path: Path) -> Iterator[Fpm]:
    (tmp_path / "app.php").write_text(SCRIPT)
    _fpm_conf(tmp_path)
    port = free_port()
    _nginx_conf(tmp_path, port)
    # As root, PHP-FPM's workers run as root only when told they may (-R).
    root = ["-R"] if os.geteuid() == 0 else []
    master = subprocess.Popen(
        [FPM, "-y", str(tmp_path / "php-fpm.conf"), "-F", *root],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    nginx = subprocess.Popen(
        [NGINX, "-c", str(tmp_path / "nginx.conf")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        wait_listening(nginx, port, tmp_path / "nginx.log", 10)
        if not until(lambda: (tmp_path / "fpm.sock").exists()):
            pytest.fail(f"PHP-FPM made no socket: {_text(tmp_path / 'fpm-error.log')}")
        yield Fpm(master, port, tmp_path / "access.log")
    finally:
        end(nginx)
        end(master)


def test_real_php_fpm_access_log_is_matched_by_tag(fpm: Fpm) -> None:
    assert get(fpm.port, "/warm?pp_run=r1&pp_users=2&pp_req=100") == 200  # before the mark
    wait_lines(fpm.access_log, 1)
    position = mark(fpm.access_log)
    started = time.time()
    assert get(fpm.port, "/slow?ms=150&pp_run=r1&pp_users=2&pp_req=1") == 200
    assert get(fpm.port, "/a/b?code=503&pp_run=r1&pp_users=4&pp_req=2") == 503
    assert get(fpm.port, "/h?code=404", {"X-Pinchpoint": "run=r1; users=4; req=3"}) == 404
    assert get(fpm.port, "/x?pp_run=r0&pp_users=2&pp_req=1") == 200
    assert get(fpm.port, "/plain") == 200
    finished = time.time()
    wait_lines(fpm.access_log, 6)

    rows, counts = collect_component(
        "php", fpm.access_log, get_parser("php-fpm", FORMAT), "r1", position
    )

    assert counts == FileCounts(
        component="php", path=str(fpm.access_log), lines=5, matched=3, other_run=1,
        untagged=1, unparseable=0,
    )  # fmt: skip
    rows.sort(key=lambda row: row.req_id or 0)
    assert [(row.users, row.req_id, row.status) for row in rows] == [
        (2, 1, 200),
        (4, 2, 503),
        (4, 3, 404),
    ]
    assert 0.15 <= rows[0].duration_s < 2  # the script slept 150 ms
    for row in rows:
        assert 0 < row.duration_s < 2
        # %t is whole seconds: the request's start, plus its duration.
        assert row.ts is not None and int(started) <= row.ts <= finished + 1


def test_real_php_fpm_pool_is_read_from_its_included_pool_file(fpm: Fpm) -> None:
    row = sampled_pool(fpm.master.pid, workers=CHILDREN)
    assert (row["pool_slots"], row["pool_kind"]) == (CHILDREN, SYNC)
    assert "pool app: pm = static" in row["pool_source"]
    assert "listen.backlog = 64" in row["pool_source"]
