"""ASGI servers' pools: uvicorn, hypercorn and daphne (and gunicorn's UvicornWorker) are an
event loop in each process, never a pool of slots; their process count read as each
server settles it, and a running uvicorn read so by the resource sampler."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil

from pinchpoint.collect.resources.sampler import ProcessSelector, ResourceSampler
from pinchpoint.collect.servers import pool_of
from pinchpoint.collect.servers.pool import ASYNC, Pool, ServerProcess
from pinchpoint.collect.servers.uvicorn import settings
from pinchpoint_lab.ports import free_port

UVICORN = [sys.executable, "-m", "uvicorn"]


def _pool(argv: list[str], env: dict[str, str] | None = None, children: int = 0) -> Pool:
    pool = pool_of(ServerProcess(1, argv, None, env or {}, children), 4)
    assert pool is not None
    return pool


def test_uvicorn_settles_web_concurrency_then_its_variables_then_its_command_line() -> None:
    app = ["app:app"]
    assert _pool([*UVICORN, *app]) == Pool(
        "uvicorn", ASYNC, 1, 1, "uvicorn's default of one process"
    )
    assert _pool([*UVICORN, *app], {"WEB_CONCURRENCY": "3"}).processes == 3
    both = {"WEB_CONCURRENCY": "3", "UVICORN_WORKERS": "5"}
    assert (_pool([*UVICORN, *app], both).processes, _pool([*UVICORN, *app], both).source) == (
        5, "UVICORN_WORKERS",
    )  # fmt: skip
    given = _pool([*UVICORN, "--workers=4", *app], both)
    assert (given.kind, given.processes, given.slots, given.source) == (
        ASYNC, 4, None, "command line",
    )  # fmt: skip
    # Its script, as pip installs it, is uvicorn's too.
    assert _pool(["/venv/bin/python", "/venv/bin/uvicorn", "--workers", "2", *app]).processes == 2


def test_uvicorn_says_where_it_listens() -> None:
    process = ServerProcess(
        1, [*UVICORN, "--uds", "/run/app.sock", "app:app"], None, {"UVICORN_PORT": "9000"}
    )
    assert settings(process) == {
        "uds": ("/run/app.sock", "command line"),
        "port": ("9000", "UVICORN_PORT"),
    }


def test_hypercorn_daphne_and_gunicorns_uvicorn_workers_are_event_loops() -> None:
    hypercorn = _pool(["/venv/bin/hypercorn", "-w", "3", "app:app"])
    assert (hypercorn.server, hypercorn.kind, hypercorn.processes, hypercorn.slots) == (
        "hypercorn", ASYNC, 3, None,
    )  # fmt: skip
    assert _pool([sys.executable, "-m", "hypercorn", "app:app"], children=2).processes == 2
    daphne = _pool(["/usr/bin/daphne", "-b", "127.0.0.1", "-p", "8001", "proj.asgi:app"])
    assert (daphne.kind, daphne.processes, daphne.slots) == (ASYNC, 1, None)
    worker = "uvicorn.workers.UvicornWorker"
    gunicorn = _pool([sys.executable, "-m", "gunicorn", "-w", "2", "-k", worker, "app:app"])
    assert (gunicorn.server, gunicorn.kind, gunicorn.processes, gunicorn.slots) == (
        "gunicorn", ASYNC, 2, None,
    )  # fmt: skip


def test_a_running_uvicorn_is_sampled_as_an_event_loop_per_worker(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("async def app(scope, receive, send):\n    pass\n")
    argv = [*UVICORN, "--workers", "2", "--port", str(free_port()), "app:app"]
    server = subprocess.Popen(
        argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 20
        while len(psutil.Process(server.pid).children()) < 3:  # 2 workers, the tracker
            assert time.monotonic() < deadline and server.poll() is None
            time.sleep(0.05)
        selector = ProcessSelector(pids=[server.pid])
        with ResourceSampler({"uvicorn": selector}, interval_s=0.2) as sampler:
            time.sleep(0.5)
    finally:
        server.terminate()
        server.wait(timeout=30)
    row = [r for r in sampler.rows() if r["component"] == "uvicorn"][-1]
    assert (row["pool_slots"], row["pool_kind"], row["pool_source"]) == (
        None, ASYNC, "command line",
    )  # fmt: skip
