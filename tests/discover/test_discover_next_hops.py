"""Every hop init meets is in the plan: node, and a server it has no reader for (a plain python3),
as a component with its processes and its caller's calls, uvicorn with its workers on a unix
socket as an event loop per process, an app's OTEL_* exporter as an [[otlp]] receiver, the
PostgreSQL it holds connections to with [component.database], and a URL answering 404 said.
Each plan is parsed by the plan loader."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from discover_helpers import HOST, running

from pinchpoint.collect.resources.sampler import ProcessSelector
from pinchpoint.collect.servers import pool_of, read_process
from pinchpoint.collect.servers.pool import ASYNC
from pinchpoint.demo.nginx import NginxNotFound, find_nginx
from pinchpoint.discover.init import init_plan
from pinchpoint.discover.listeners import tree_of
from pinchpoint.plan.model import Plan, parse_plan
from pinchpoint_lab.ports import free_port

pytestmark = pytest.mark.timeout(90)

try:
    NGINX: Path | None = find_nginx()
except NginxNotFound:
    NGINX = None
needs_nginx = pytest.mark.skipif(NGINX is None, reason="nginx is not installed")
NODE = Path("/usr/bin/node")
TIMED = (
    '\'$remote_addr [$time_local] "$request" $status $body_bytes_sent '
    "rt=$request_time urt=$upstream_response_time msec=$msec'"
)
ASGI_APP = """async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    status = 200 if scope["path"] == "/" else 404
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})
"""


@contextlib.contextmanager
def nginx_to(root: Path, upstream: str) -> Iterator[int]:
    """nginx on a free port passing every request to `upstream`, logging with durations;
    its port."""
    assert NGINX is not None
    (root / "temp").mkdir(parents=True, exist_ok=True)
    temp = "\n".join(
        f"  {kind}_temp_path {root}/temp/{kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    port = free_port()
    (root / "nginx.conf").write_text(
        f"pid {root}/nginx.pid;\nerror_log {root}/error.log;\ndaemon off;\n"
        f"events {{ worker_connections 64; }}\nhttp {{\n{temp}\n"
        f"  log_format timed {TIMED};\n"
        f"  server {{ listen {HOST}:{port}; access_log {root}/access.log timed;\n"
        f"    location / {{ proxy_pass {upstream}; }} }}\n}}\n"
    )
    argv = [str(NGINX), "-c", str(root / "nginx.conf"), "-p", str(root)]
    with running(argv, root, port, workers=1, output=root / "nginx.out"):
        yield port


def _plan(url: str) -> tuple[str, Plan]:
    text, _ = init_plan(url)
    return text, parse_plan(text, "plan.toml")


def _selects(plan: Plan, name: str) -> set[int]:
    """The pids the plan's process selector for the component finds now."""
    [component] = [c for c in plan.component if c.name == name]
    assert component.process is not None
    spec = component.process.model_dump(exclude_defaults=True)
    return set(ProcessSelector.from_dict(spec).select())


@needs_nginx
@pytest.mark.skipif(not NODE.exists(), reason="node is not installed")
def test_a_node_server_behind_nginx_is_an_app_server_with_its_processes(tmp_path: Path) -> None:
    port = free_port()
    code = f"require('http').createServer((q, s) => s.end('ok')).listen({port}, '{HOST}')"
    with (
        running([str(NODE), "-e", code], tmp_path, port, workers=0) as pid,
        nginx_to(tmp_path, f"http://{HOST}:{port}") as front,
    ):
        text, plan = _plan(f"http://{HOST}:{front}/")
        tree = tree_of(pid)
        selected = _selects(plan, "node")
    by_name = {c.name: c for c in plan.component}
    assert list(by_name) == ["nginx", "node"]
    assert by_name["nginx"].calls == ["node"]
    assert by_name["node"].role == "app_server"
    assert by_name["node"].log is None
    # Its selector finds its process tree and nothing else.
    assert selected == tree
    assert "# warning: Node.js logs no requests of its own: with Express, add" in text


@needs_nginx
def test_uvicorn_workers_on_a_unix_socket_are_an_event_loop_each(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(ASGI_APP)
    socket = tmp_path / "uvicorn.sock"
    argv = [sys.executable, "-m", "uvicorn", "--workers", "2", "--uds", str(socket), "app:app"]
    with (
        _uvicorn(argv, tmp_path, socket) as pid,
        nginx_to(tmp_path, f"http://unix:{socket}:") as front,
    ):
        text, found = init_plan(f"http://{HOST}:{front}/")
        process = read_process(pid, len(psutil.Process(pid).children()), environ=True)
        tree = tree_of(pid)
        plan = parse_plan(text, "plan.toml")
        selected = _selects(plan, "uvicorn")
    assert [t.name for t in found.tiers] == ["nginx", "uvicorn"], found.problems
    nginx, uvicorn = found.tiers
    assert nginx.next_hops[0].unix == socket
    # The supervisor, not the worker ss names first, is the tier.
    assert (uvicorn.pid, uvicorn.role, uvicorn.slots) == (pid, "app_server", None)
    assert "an event loop in each of 2 processes (command line): no fixed pool of slots" in (
        uvicorn.notes
    )
    assert process is not None
    pool = pool_of(process, 2)
    assert pool is not None
    assert (pool.server, pool.kind, pool.processes, pool.slots) == ("uvicorn", ASYNC, 2, None)
    assert selected == tree and len(tree) >= 3  # its supervisor and two workers
    assert "\nworkers =" not in text
    assert [c.calls for c in plan.component] == [["uvicorn"], []]


@contextlib.contextmanager
def _uvicorn(argv: list[str], cwd: Path, socket: Path) -> Iterator[int]:
    """uvicorn until both its workers serve on the socket; its supervisor's pid."""
    out = (cwd / "uvicorn.out").open("ab")
    server = subprocess.Popen(
        argv, cwd=cwd, stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 30
        while (cwd / "uvicorn.out").read_text().count("Application startup complete") < 2:
            assert server.poll() is None and time.monotonic() < deadline, (
                cwd / "uvicorn.out"
            ).read_text()
            time.sleep(0.05)
        assert socket.exists()
        yield server.pid
    finally:
        out.close()
        server.terminate()
        server.wait(timeout=20)


@needs_nginx
def test_a_path_answering_404_is_a_warning_in_the_plan_and_on_the_terminal(
    tmp_path: Path,
) -> None:
    (tmp_path / "app.py").write_text(ASGI_APP)
    port = free_port()
    argv = [sys.executable, "-m", "uvicorn", "--host", HOST, "--port", str(port), "app:app"]
    with (
        running(argv, tmp_path, port, workers=0),
        nginx_to(tmp_path, f"http://{HOST}:{port}") as front,
    ):
        url = f"http://{HOST}:{front}/missing"
        text, found = init_plan(url)
        done = subprocess.run(
            [sys.executable, "-m", "pinchpoint", "init", url, "-o", str(tmp_path / "plan.toml")],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    parse_plan(text, "plan.toml")
    assert found.status == 404
    said = "the URL answered GET with status 404"
    assert f"# warning: {said}" in text
    assert done.returncode == 0, done.stderr
    assert said in done.stderr + done.stdout
    assert [t.name for t in found.tiers] == ["nginx", "uvicorn"]
