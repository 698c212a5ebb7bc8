"""The engine's memory does not grow with the requests it sends: records stream to disk,
and only fixed-size histograms stay in memory. Measured on a run against real nginx, in a
process of its own so that nothing else counts in its resident memory."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pinchpoint.demo import NginxNotFound, find_nginx
from pinchpoint_lab.ports import free_port

# Measures time, rates or CPU: runs alone, after the parallel part of the suite.
pytestmark = [pytest.mark.serial, pytest.mark.timeout(90)]

NGINX_CONF = """\
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
{user}
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {dir}; proxy_temp_path {dir}; fastcgi_temp_path {dir};
  uwsgi_temp_path {dir}; scgi_temp_path {dir};
  server {{
    listen 127.0.0.1:{port};
    keepalive_requests 100000000;
    location / {{ return 200 "ok"; }}
  }}
}}
"""

# Runs the load in a child and prints (requests so far, resident bytes) once a second.
LOAD = """
import json, sys, tempfile
from pathlib import Path
import psutil
from pinchpoint.load.engine import run_steps
from pinchpoint.plan.model import parse_plan

port, seconds = int(sys.argv[1]), float(sys.argv[2])
plan = parse_plan(
    f'[target]\\nurl = "http://127.0.0.1:{port}"\\n[load]\\nusers = 20\\n'
    f'duration = {seconds}\\nwarmup = 0\\n[[request]]\\npath = "/"\\n',
    "memory test",
)
me = psutil.Process()
seen = []
with tempfile.TemporaryDirectory() as tmp:
    run_steps(plan, "memory", Path(tmp), on_tick=lambda s: seen.append((s["requests"], me.memory_info().rss)))
print(json.dumps(seen))
"""


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[int]:
    try:
        binary = find_nginx()
    except NginxNotFound as e:
        pytest.skip(str(e))
    port = free_port()
    user = "user root;" if os.geteuid() == 0 else ""
    conf = tmp_path / "nginx.conf"
    conf.write_text(NGINX_CONF.format(dir=tmp_path, port=port, user=user))
    proc = subprocess.Popen([str(binary), "-p", str(tmp_path), "-c", str(conf)])
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def test_resident_memory_stays_flat_while_requests_pile_up(nginx: int) -> None:
    done = subprocess.run(
        [sys.executable, "-c", LOAD, str(nginx), "6"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert len(seen) >= 4
    # From the second second on (buffers and histograms are allocated by then).
    (first_requests, first_rss), (last_requests, last_rss) = seen[1], seen[-1]
    sent = last_requests - first_requests
    grown = last_rss - first_rss
    print(f"{sent} requests, resident memory {first_rss >> 20} → {last_rss >> 20} MiB")
    assert sent >= 20_000, "too few requests to measure growth"
    # Keeping a record of each request (~80 bytes) would grow by sent × 80; allow a tenth
    # of that and a fixed 4 MiB for allocator noise.
    assert grown < 4 * 2**20 + sent * 8, f"{grown} bytes more after {sent} requests"
