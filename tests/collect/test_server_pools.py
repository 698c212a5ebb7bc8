"""App servers' pools read from their own command lines, environments and config files."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from pinchpoint.collect.resources.sampler import ProcessSelector, ResourceSampler
from pinchpoint.collect.servers import pool_of
from pinchpoint.collect.servers.pool import ASYNC, SYNC, THREADS, ServerProcess
from pinchpoint_lab.ports import free_port

GUNICORN = [sys.executable, "-m", "gunicorn"]


def _gunicorn(*args: str, children: int = 0, **env: str) -> ServerProcess:
    return ServerProcess(1, [*GUNICORN, *args, "app:app"], None, dict(env), children)


def _read(process: ServerProcess, cores: int = 2) -> tuple[int | None, str, str]:
    pool = pool_of(process, cores)
    assert pool is not None
    return pool.slots, pool.kind, pool.source


def test_gunicorn_flags_in_every_spelling_give_processes_times_threads() -> None:
    assert _read(_gunicorn("-w", "3", "-k", "gthread", "--threads", "4"))[:2] == (12, THREADS)
    assert _read(_gunicorn("--workers=2"))[:2] == (2, SYNC)
    assert _read(_gunicorn("-w5"))[:2] == (5, SYNC)
    # A sync worker given threads is a gthread worker, as gunicorn makes it.
    assert _read(_gunicorn("--workers", "2", "--threads", "3"))[:2] == (6, THREADS)


def test_gunicorn_without_workers_counts_its_running_workers() -> None:
    slots, kind, source = _read(_gunicorn(children=3))
    assert (slots, kind) == (3, SYNC)
    assert "counted" in source
    # A title set by setproctitle hides the options: the workers are counted all the same.
    titled = ServerProcess(1, ["gunicorn: master [app:app]"], None, {}, 4)
    assert _read(titled)[:2] == (4, SYNC)


def test_gunicorn_settles_config_file_then_environment_then_command_line(tmp_path: Path) -> None:
    (tmp_path / "gunicorn.conf.py").write_text(
        "import multiprocessing\n"
        "workers = multiprocessing.cpu_count() * 2 + 1\n"
        "threads = 2\n"
        "worker_class = 'gthread'\n"
    )
    found = ServerProcess(1, [*GUNICORN, "app:app"], tmp_path, {}, 0)
    slots, kind, source = _read(found, cores=4)
    assert (slots, kind) == (18, THREADS)
    assert f"config file {tmp_path / 'gunicorn.conf.py'}" in source
    env = ServerProcess(
        1, [*GUNICORN, "app:app"], tmp_path, {"GUNICORN_CMD_ARGS": "--threads 5"}, 0
    )
    assert _read(env, cores=4)[0] == 9 * 5
    flags = ServerProcess(
        1, [*GUNICORN, "-w", "2", "app:app"], tmp_path, {"GUNICORN_CMD_ARGS": "--threads 5"}, 0
    )
    slots, _, source = _read(flags, cores=4)
    assert slots == 10
    assert "command line" in source and "GUNICORN_CMD_ARGS" in source


def test_gunicorn_config_file_that_runs_code_is_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    conf = tmp_path / "conf.py"
    conf.write_text(f"open({str(marker)!r}, 'w')\nworkers = int('x')\nthreads = 3\n")
    slots, kind, _ = _read(
        ServerProcess(1, [*GUNICORN, "-c", "conf.py", "app:app"], tmp_path, {}, 2)
    )
    assert not marker.exists()
    assert (slots, kind) == (6, THREADS)  # the workers counted, the threads read


def test_an_event_loop_worker_has_no_slots() -> None:
    slots, kind, source = _read(_gunicorn("-w", "2", "-k", "uvicorn.workers.UvicornWorker"))
    assert (slots, kind) == (None, ASYNC)
    assert "UvicornWorker" in source


def _uwsgi(*args: str, cwd: Path | None = None, children: int = 0) -> ServerProcess:
    return ServerProcess(1, ["/usr/bin/uwsgi", *args], cwd, {}, children)


def test_uwsgi_options_and_config_files_of_every_kind(tmp_path: Path) -> None:
    assert _read(_uwsgi("--master", "--processes", "4", "--threads", "2"))[:2] == (8, THREADS)
    assert _read(_uwsgi("-p", "3", "--enable-threads"))[:2] == (3, SYNC)
    (tmp_path / "app.ini").write_text("[uwsgi]\nmaster = true\nprocesses = %k\nthreads = 2\n")
    (tmp_path / "app.yaml").write_text("uwsgi:\n  master: true\n  workers: 5\n")
    (tmp_path / "app.xml").write_text("<uwsgi><processes>6</processes></uwsgi>")
    (tmp_path / "app.json").write_text('{"uwsgi": {"processes": 7, "threads": 1}}')
    assert _read(_uwsgi("--ini", "app.ini", cwd=tmp_path), cores=3)[:2] == (6, THREADS)
    assert _read(_uwsgi("app.ini", cwd=tmp_path), cores=3)[:2] == (6, THREADS)
    assert _read(_uwsgi("--yaml", "app.yaml", cwd=tmp_path))[0] == 5
    assert _read(_uwsgi("-x", "app.xml", cwd=tmp_path))[0] == 6
    assert _read(_uwsgi("--json=app.json", cwd=tmp_path))[0] == 7
    # The command line wins over the file.
    slots, _, source = _read(_uwsgi("--ini", "app.ini", "--processes", "2", cwd=tmp_path), cores=3)
    assert slots == 4
    assert "command line" in source and "config file" in source


def test_uwsgi_without_processes_counts_its_workers() -> None:
    assert _read(_uwsgi("--master", "--socket", ":0", children=3))[0] == 3
    # Without a master the first process is a worker too.
    assert _read(_uwsgi("--socket", ":0", children=2))[0] == 3
    assert _read(_uwsgi("--processes", "2", "--async", "100"))[:2] == (None, ASYNC)


def test_unreadable_config_files_are_left_for_what_else_is_known(tmp_path: Path) -> None:
    (tmp_path / "bad.ini").write_text("processes = 4\n[uwsgi\n")
    assert _read(_uwsgi("--ini", "bad.ini", "--master", cwd=tmp_path, children=2))[0] == 2
    assert _read(_uwsgi("--ini", "missing.ini", "-p", "3", cwd=tmp_path))[0] == 3


def test_config_files_are_not_read_when_not_allowed(tmp_path: Path) -> None:
    (tmp_path / "gunicorn.conf.py").write_text("workers = 3\nthreads = 4\n")
    process = ServerProcess(1, [*GUNICORN, "app:app"], tmp_path, {}, 3)
    pool = pool_of(process, 2, files=False)
    assert pool is not None and (pool.slots, pool.kind) == (3, SYNC)


def test_other_programs_have_no_pool() -> None:
    assert pool_of(ServerProcess(1, ["nginx: master process nginx"], None, {}, 2), 2) is None
    assert pool_of(ServerProcess(1, ["/usr/lib/postgresql/15/bin/postgres", "-D", "x"]), 2) is None


def _sampled(pid_file: Path, workers: int) -> dict:
    deadline = time.monotonic() + 20
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    deadline = time.monotonic() + 20
    while _children(pid_file) < workers and time.monotonic() < deadline:
        time.sleep(0.1)  # the workers forked
    with ResourceSampler({"server": ProcessSelector(pid_file=pid_file)}, interval_s=0.2) as sampler:
        time.sleep(0.5)
    rows = [r for r in sampler.rows() if r["component"] == "server"]
    assert rows
    return rows[-1]


def _children(pid_file: Path) -> int:
    """The processes forked by the one whose pid the file holds (0 while it holds none)."""
    try:
        return len(psutil.Process(int(pid_file.read_text())).children())
    except (ValueError, OSError, psutil.Error):
        return 0


def test_a_running_gunicorn_is_read_from_its_config_file(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("def app(environ, start_response):\n    return []\n")
    (tmp_path / "gunicorn.conf.py").write_text(
        "workers = 2\nworker_class = 'gthread'\nthreads = 3\n"
    )
    argv = [
        *GUNICORN,
        "--bind",
        f"127.0.0.1:{free_port()}",
        "--pid",
        "g.pid",
        "--no-control-socket",
        "app:app",
    ]
    server = subprocess.Popen(
        argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        row = _sampled(tmp_path / "g.pid", workers=2)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert (row["pool_slots"], row["pool_kind"]) == (6, THREADS)
    assert str(tmp_path / "gunicorn.conf.py") in row["pool_source"]


@pytest.mark.skipif(not os.path.exists("/usr/bin/uwsgi"), reason="apt: uwsgi-core")
def test_a_running_uwsgi_is_read_from_its_ini_file(tmp_path: Path) -> None:
    (tmp_path / "app.ini").write_text(
        f"[uwsgi]\nmaster = true\nprocesses = 3\nhttp-socket = 127.0.0.1:{free_port()}\n"
        "pidfile = u.pid\ndie-on-term = true\n"
    )
    server = subprocess.Popen(
        ["/usr/bin/uwsgi", "--ini", "app.ini"], cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        row = _sampled(tmp_path / "u.pid", workers=3)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert (row["pool_slots"], row["pool_kind"]) == (3, SYNC)
    assert "app.ini" in row["pool_source"]
