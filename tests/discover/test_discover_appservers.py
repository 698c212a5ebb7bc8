"""gunicorn and uWSGI, started here and found from their port: their pool, access log and its
format, pid file, each from where the server was told it; what is missing, with the flag to
add; and the plan written from them parses."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from discover_helpers import HOST, running

from pinchpoint.discover.init import init_plan
from pinchpoint.discover.readers import READERS
from pinchpoint.discover.tier import Tier
from pinchpoint.discover.walk import walk
from pinchpoint.logformats.gunicorn import GUNICORN_FORMAT
from pinchpoint.plan.model import parse_plan
from pinchpoint_lab.ports import free_port

pytestmark = pytest.mark.timeout(90)

GUNICORN = [sys.executable, "-m", "gunicorn", "--no-control-socket"]
APP = "def app(environ, start_response):\n    start_response('200 OK', [])\n    return [b'ok']\n"
UWSGI = shutil.which("uwsgi")


def _only_tier(url: str) -> Tier:
    found = walk(url, READERS)
    assert [t.name for t in found.tiers] == [found.tiers[0].name], found.problems
    return found.tiers[0]


def _plan_parses(url: str) -> str:
    text, _ = init_plan(url)
    parse_plan(text, "plan.toml")
    return text


def test_gunicorn_sync_workers_from_flags(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    port = free_port()
    argv = [
        *GUNICORN, "-w", "3", "--bind", f"{HOST}:{port}",
        "--access-logfile", "access.log", "--access-logformat", GUNICORN_FORMAT,
        "--pid", str(tmp_path / "g.pid"), "app:app",
    ]  # fmt: skip
    with running(argv, tmp_path, port, workers=3) as pid:
        tier = _only_tier(f"http://{HOST}:{port}/")
        text = _plan_parses(f"http://{HOST}:{port}/x?y=1")
    assert (tier.name, tier.role, tier.pid) == ("gunicorn", "app_server", pid)
    assert tier.slots == 3
    assert "slots: 3 = 3 processes (command line)" in tier.notes
    assert tier.log_path == tmp_path / "access.log"  # relative to the server's folder
    assert (tier.log_format, tier.log_format_string) == ("gunicorn", GUNICORN_FORMAT)
    assert tier.pid_file == tmp_path / "g.pid"
    assert tier.warnings == []
    assert f'pid_file = "{tmp_path / "g.pid"}"' in text
    assert 'path = "/x?y=1"' in text


def test_gunicorn_gthread_pool_and_log_from_its_config_file(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    port = free_port()
    (tmp_path / "conf.py").write_text(
        "workers = 2\n"
        "worker_class = 'gthread'\n"
        "threads = 3\n"
        f"bind = ['{HOST}:{port}']\n"
        "accesslog = 'logs/' + 'access.log'\n"
        "access_log_format = '%(h)s %(t)s \"%(r)s\" %(s)s %(L)s'\n"
        "pidfile = 'gunicorn.pid'\n"
    )
    (tmp_path / "logs").mkdir()
    with running([*GUNICORN, "-c", "conf.py", "app:app"], tmp_path, port, workers=2):
        tier = _only_tier(f"http://{HOST}:{port}/")
        _plan_parses(f"http://{HOST}:{port}/")
    conf = tmp_path / "conf.py"
    assert tier.slots == 6
    assert f"slots: 6 = 2 processes × 3 threads (config file {conf})" in tier.notes
    assert tier.log_path == tmp_path / "logs" / "access.log"
    assert tier.log_format_string == '%(h)s %(t)s "%(r)s" %(s)s %(L)s'
    assert f"access_log_format from config file {conf}" in tier.notes
    assert f"accesslog logs/access.log from config file {conf}" in tier.notes
    assert tier.pid_file == tmp_path / "gunicorn.pid"
    assert tier.warnings == []


def test_gunicorn_from_its_environment_says_what_its_log_and_pid_file_lack(
    tmp_path: Path,
) -> None:
    (tmp_path / "app.py").write_text(APP)
    port = free_port()
    env = {"GUNICORN_CMD_ARGS": f"--workers 2 --bind {HOST}:{port} --access-logfile a.log"}
    with running([*GUNICORN, "app:app"], tmp_path, port, workers=2, env=env) as pid:
        tier = _only_tier(f"http://{HOST}:{port}/")
        text = _plan_parses(f"http://{HOST}:{port}/")
    assert tier.slots == 2
    assert "slots: 2 = 2 processes (GUNICORN_CMD_ARGS)" in tier.notes
    # gunicorn's default format logs no duration: no log in the plan, and the flag to add.
    assert tier.log_path is None
    no_duration, no_pid_file = tier.warnings
    assert no_duration.startswith(
        "its access log format (gunicorn's default access_log_format) gives no duration"
    )
    assert (
        """--access-logformat '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s" %(D)s'"""
        in no_duration
    )
    assert f"`--pid {tmp_path / 'gunicorn.pid'}`" in no_pid_file
    assert f"pids = [{pid}]" in text
    assert "[component.log]" not in text


def test_gunicorn_without_an_access_log_is_told_the_flags_to_add(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    port = free_port()
    argv = [*GUNICORN, "-b", f"{HOST}:{port}", "-p", "g.pid", "app:app"]
    with running(argv, tmp_path, port, workers=1):
        tier = _only_tier(f"http://{HOST}:{port}/")
    assert tier.slots == 1  # gunicorn's one worker, counted
    assert tier.warnings == [
        f"gunicorn writes no access log: add `--access-logfile {tmp_path / 'gunicorn-access.log'} "
        f"--access-logformat '{GUNICORN_FORMAT}'` (accesslog and access_log_format in a config file)"
    ]


@pytest.mark.skipif(UWSGI is None, reason="apt: uwsgi-core")
def test_uwsgi_from_its_ini_file(tmp_path: Path) -> None:
    assert UWSGI is not None
    port = free_port()
    (tmp_path / "app.ini").write_text(
        "[uwsgi]\n"
        "plugins = logfile\n"
        "master = true\n"
        "processes = 2\n"
        "threads = 2\n"
        f"http-socket = {HOST}:{port}\n"
        "pidfile = %duwsgi.pid\n"
        "req-logger = file:%drequests.log\n"
        "die-on-term = true\n"
    )
    with running([UWSGI, "--ini", "app.ini"], tmp_path, port, workers=2) as pid:
        tier = _only_tier(f"http://{HOST}:{port}/")
        _plan_parses(f"http://{HOST}:{port}/")
    ini = tmp_path / "app.ini"
    assert (tier.name, tier.role, tier.pid) == ("uwsgi", "app_server", pid)
    assert tier.slots == 4
    assert f"slots: 4 = 2 processes × 2 threads (config file {ini})" in tier.notes
    assert tier.log_path == tmp_path / "requests.log"
    assert (tier.log_format, tier.log_format_string) == ("uwsgi", None)
    assert f"req-logger file:{tmp_path}/requests.log from config file {ini}" in tier.notes
    assert tier.pid_file == tmp_path / "uwsgi.pid"
    assert tier.warnings == []


@pytest.mark.skipif(UWSGI is None, reason="apt: uwsgi-core")
def test_uwsgi_without_a_logger_logs_to_its_stderr_file_or_is_told_to_add_one(
    tmp_path: Path,
) -> None:
    assert UWSGI is not None
    port = free_port()
    argv = [UWSGI, "--master", "-p", "2", "--http-socket", f"{HOST}:{port}", "--die-on-term"]
    output = tmp_path / "uwsgi.out"
    with running(argv, tmp_path, port, workers=2, output=output):
        tier = _only_tier(f"http://{HOST}:{port}/")
    assert tier.log_path == output
    assert f"no logger set: its stderr, {output}" in tier.notes
    assert tier.warnings == [
        f"no pid file: the plan names its pids, valid until it restarts; add "
        f"`--pidfile {tmp_path / 'uwsgi.pid'}`"
    ]
    disabled = [*argv, "--disable-logging"]
    port = free_port()
    disabled[5] = f"{HOST}:{port}"
    with running(disabled, tmp_path, port, workers=2, output=output):
        tier = _only_tier(f"http://{HOST}:{port}/")
    assert tier.log_path is None
    assert tier.warnings[0] == "uWSGI logs no requests (disable-logging, command line): remove it"


ASGI_APP = """async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})
"""


def test_gunicorn_with_uvicorn_workers_is_an_event_loop_without_slots(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(ASGI_APP)
    port = free_port()
    argv = [
        *GUNICORN, "-w", "2", "-k", "uvicorn.workers.UvicornWorker", "--bind", f"{HOST}:{port}",
        "--access-logfile", "access.log", "--pid", str(tmp_path / "g.pid"), "app:app",
    ]  # fmt: skip
    with running(argv, tmp_path, port, workers=2):
        tier = _only_tier(f"http://{HOST}:{port}/")
        text = _plan_parses(f"http://{HOST}:{port}/")
    # Each worker holds any number of waiting requests: no pool of slots to fill.
    assert tier.slots is None
    assert any(n.startswith("an event loop") for n in tier.notes), tier.notes
    assert "\nworkers =" not in text
    assert tier.pid_file == tmp_path / "g.pid"
