"""PostgreSQL's tier: its settings read as the server reads them (includes, ALTER SYSTEM's
file, the command line), real servers laid out as Debian and as the demo lays them out, and
the demo's app server found calling its database."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from discover_helpers import HOST, at, fetch, listens

from pinchpoint.demo.hot import COUNTERS_SQL
from pinchpoint.demo.nginx import NginxNotFound, find_nginx
from pinchpoint.discover.init import init_plan
from pinchpoint.discover.pg_conf import PgSettings, is_on, milliseconds, settings_of, unquote
from pinchpoint.discover.postgres import read_postgres
from pinchpoint.discover.readers import READERS
from pinchpoint.discover.tier import Address
from pinchpoint.discover.walk import walk
from pinchpoint.plan.model import parse_plan
from pinchpoint_lab.ports import free_port

pytestmark = pytest.mark.timeout(120)


def _found() -> tuple[Path, Path] | None:
    from pinchpoint_lab.postgres import find_postgres

    return find_postgres()


POSTGRES = _found()
needs_postgres = pytest.mark.skipif(POSTGRES is None, reason="apt: postgresql")


def _nginx_reader_missing() -> str:
    if READERS["nginx"].__module__ == "pinchpoint.discover.readers":
        return "the nginx reader (discover/nginx.py) is not registered in READERS yet"
    try:
        find_nginx()
    except NginxNotFound as e:
        return str(e)
    return ""


def _conf(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_settings_follow_includes_then_alter_system_then_the_command_line(
    tmp_path: Path,
) -> None:
    data, etc = tmp_path / "data", tmp_path / "etc"
    main = _conf(
        etc / "postgresql.conf",
        "# Debian keeps it apart from the data\n"
        f"data_directory = '{data}'  # the data\n"
        "log_line_prefix = '%m [%p] it''s '\n"
        "include 'extra.conf'\n"
        "include_if_exists 'missing.conf'\n"
        "include_dir 'conf.d'\n"
        "LOG_DURATION on\n",
    )
    _conf(etc / "extra.conf", "log_destination = 'csvlog'\nlog_directory = 'pg_log'\n")
    _conf(etc / "conf.d" / "b.conf", "logging_collector = on\nlog_min_duration_statement = 5\n")
    _conf(etc / "conf.d" / "a.conf", "logging_collector = off\n")
    _conf(etc / "conf.d" / ".hidden.conf", "log_directory = 'hidden'\n")
    _conf(etc / "conf.d" / "notes.txt", "log_directory = 'txt'\n")
    auto = _conf(data / "postgresql.auto.conf", "log_min_duration_statement = '250ms'\n")
    argv = ["postgres", "-D", str(data), "-c", f"config_file={main}", "--log-destination=stderr"]
    conf = settings_of(argv, cwd=data)
    assert (conf.config_file, conf.data_dir, conf.problems) == (main, data, [])
    assert conf.value("log_line_prefix") == "%m [%p] it's "
    assert conf.value("log_directory") == "pg_log"
    assert conf.source("log_directory") == f"{etc / 'extra.conf'}, line 2"
    # conf.d's files in the order of their names: b's line wins over a's.
    assert conf.value("logging_collector") == "on"
    assert conf.value("log_duration") == "on"
    assert (conf.value("log_min_duration_statement"), conf.file("log_min_duration_statement")) == (
        "250ms",
        auto,
    )
    assert (conf.value("log_destination"), conf.source("log_destination")) == (
        "stderr",
        "command line",
    )
    assert conf.value("log_filename") == "postgresql-%Y-%m-%d_%H%M%S.log"  # the default


def test_without_a_config_file_the_data_directory_holds_it_and_gaps_are_said(
    tmp_path: Path,
) -> None:
    _conf(tmp_path / "postgresql.conf", "include 'gone.conf'\nlog_line_prefix = 'no\n")
    conf = settings_of(["postgres"], cwd=tmp_path)
    assert conf.config_file == tmp_path / "postgresql.conf"
    assert conf.data_dir == tmp_path
    assert conf.problems[0].startswith(f"cannot read {tmp_path / 'gone.conf'}")
    assert conf.problems[1].startswith(f"line 2 of {tmp_path / 'postgresql.conf'} does not parse")
    assert PgSettings().value("log_line_prefix") == "%m [%p] "


def test_values_read_as_postgresql_reads_them() -> None:
    assert unquote(r"'a\'b''c\td'") == "a'b'c\td"
    assert unquote("250ms") == "250ms"
    assert [milliseconds(v) for v in ("0", "-1", "250ms", "1s", "2min", "x")] == [
        0,
        -1,
        250,
        1000,
        120_000,
        None,
    ]
    assert [is_on(v) for v in ("on", "TRUE", "y", "1", "off", "0", "")] == [
        True,
        True,
        True,
        True,
        False,
        False,
        False,
    ]


def _server_user() -> pwd.struct_passwd | None:
    return pwd.getpwnam("postgres") if os.geteuid() == 0 else None


def _as_user(argv: list[str]) -> list[str]:
    if _server_user() is None:
        return argv
    return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--", *argv]


@contextlib.contextmanager
def _cluster() -> Iterator[Path]:
    """A new cluster's folder (its data in `data`), removed after; the server's user owns it."""
    assert POSTGRES is not None
    folder = Path(tempfile.mkdtemp(prefix="pinchpoint-discover-pg-"))
    try:
        user = _server_user()
        if user is not None:
            os.chown(folder, user.pw_uid, user.pw_gid)
        initdb = [str(POSTGRES[0]), "-D", str(folder / "data"), "-U", "postgres"]
        initdb += ["--auth=trust", "--no-sync", "--locale=C"]
        subprocess.run(_as_user(initdb), capture_output=True, check=True, timeout=120, cwd=folder)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _postgres(folder: Path, port: int, *options: str) -> Iterator[tuple[int, list[str]]]:
    """The postmaster started with `options`, its stderr in folder/stderr.log; its pid and
    command line."""
    assert POSTGRES is not None
    argv = [str(POSTGRES[1]), "-D", str(folder / "data"), "-p", str(port), *options]
    argv += ["-c", f"unix_socket_directories={folder}", "-c", f"listen_addresses={HOST}"]
    stderr = folder / "stderr.log"
    with stderr.open("ab") as out:
        server = subprocess.Popen(_as_user(argv), stdout=out, stderr=out, cwd=folder)
    try:
        deadline = time.monotonic() + 60
        while not listens(port):
            assert server.poll() is None and time.monotonic() < deadline, stderr.read_text()
            time.sleep(0.1)
        yield server.pid, argv
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)


@needs_postgres
def test_a_debian_layout_logging_to_stderr_is_read_with_the_lines_to_add(tmp_path: Path) -> None:
    with _cluster() as folder:
        etc = folder / "etc"
        main = _conf(
            etc / "postgresql.conf",
            f"data_directory = '{folder / 'data'}'\ninclude_dir 'conf.d'\n",
        )
        logging = _conf(
            etc / "conf.d" / "logging.conf", "log_line_prefix = '%t %u '\nlc_messages = 'C'\n"
        )
        auto = folder / "data" / "postgresql.auto.conf"
        auto.write_text(auto.read_text() + "log_min_duration_statement = '100ms'\n")
        port = free_port()
        with _postgres(folder, port, "-c", f"config_file={main}") as (pid, argv):
            tier = read_postgres(pid, argv, at(port), "/")
    assert (tier.name, tier.role, tier.pid) == ("postgres", "database", pid)
    assert tier.pid_file == folder / "data" / "postmaster.pid"
    assert tier.log_path == folder / "stderr.log"
    assert f"log {folder / 'stderr.log'}: its stderr (logging_collector off)" in tier.notes
    assert (tier.log_format, tier.log_format_string) == ("postgresql", "%t %u ")
    assert tier.warnings == [
        f"log_line_prefix '%t %u ' ({logging}, line 1) lacks the pid (%p): set "
        f"`log_line_prefix = '%t %u [%p] '` at {logging}, line 1 (then SELECT pg_reload_conf())",
        f"only statements over 100 ms are logged (log_min_duration_statement, {auto}, line 3): "
        "set `ALTER SYSTEM SET log_min_duration_statement = '0'` (then SELECT pg_reload_conf())",
    ]


@needs_postgres
def test_the_logging_collectors_csv_file_is_found_and_its_rotation_said(tmp_path: Path) -> None:
    with _cluster() as folder:
        port = free_port()
        options = ["-c", "logging_collector=on", "-c", "log_destination=csvlog"]
        options += ["-c", "log_min_duration_statement=0"]
        with _postgres(folder, port, *options) as (pid, argv):
            tier = read_postgres(pid, argv, at(port), "/")
    assert tier.log_path is not None
    assert tier.log_path.parent == folder / "data" / "log"
    assert tier.log_path.name.startswith("postgresql-") and tier.log_path.suffix == ".csv"
    assert (tier.log_format, tier.log_format_string) == ("postgresql", "csvlog")
    assert tier.warnings == [
        "log_filename holds a time pattern: the plan names today's file, and a rotation during "
        "a run writes on in another; give it a fixed name, e.g. `log_filename = "
        f"'postgresql.log'` in {folder / 'data' / 'postgresql.conf'} (then SELECT pg_reload_conf())"
    ]


@pytest.fixture(scope="module")
def demo_with_postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    """The demo stack (nginx → gunicorn, 2 workers) with its PostgreSQL, as the matrix's
    db_lock class starts them; its workers have answered a database request each."""
    if POSTGRES is None or _nginx_missing_binary():
        pytest.skip("needs PostgreSQL and nginx")
    from pinchpoint.demo import DemoStack
    from pinchpoint.demo.env import PG_DSN_ENV
    from pinchpoint_lab.postgres import PostgresCluster

    with PostgresCluster() as pg:
        pg.execute(COUNTERS_SQL)
        workdir = tmp_path_factory.mktemp("stack")
        with DemoStack(workdir, workers=2, app_env={PG_DSN_ENV: pg.dsn}) as stack:
            for _ in range(4):
                assert fetch(stack.gunicorn_url + "/api/hot?hold=0", method="POST") == 200
            yield pg, stack


def _nginx_missing_binary() -> bool:
    try:
        find_nginx()
    except NginxNotFound:
        return True
    return False


def test_the_demos_app_server_is_found_calling_its_postgresql(demo_with_postgres: tuple) -> None:
    from pinchpoint_lab.postgres import LOG_PREFIX

    pg, stack = demo_with_postgres
    found = walk(stack.gunicorn_url + "/api/hot", READERS)
    assert [t.name for t in found.tiers] == ["gunicorn", "app", "postgres"], found.problems
    # The app inside gunicorn's workers holds the connections: it calls the database.
    assert found.calls == {"gunicorn": ["app"], "app": ["postgres"], "postgres": []}
    server, _, database = found.tiers
    assert server.next_hops == [at(pg.port)]
    assert (server.slots, server.pid_file) == (2, stack.gunicorn_pid_file)
    assert database.pid == pg.pid
    assert database.pid_file == pg.folder / "data" / "postmaster.pid"
    assert (database.log_path, database.log_format_string) == (pg.log, LOG_PREFIX)
    assert database.warnings == []
    assert "every statement's duration logged (log_min_duration_statement, command line)" in (
        database.notes
    )


@pytest.mark.skipif(bool(_nginx_reader_missing()), reason=_nginx_reader_missing())
def test_the_demo_stack_is_followed_from_its_url_to_its_database(demo_with_postgres: tuple) -> None:
    pg, stack = demo_with_postgres
    text, found = init_plan(stack.url + "/api/hot")
    assert [t.name for t in found.tiers] == ["nginx", "gunicorn", "app", "postgres"], found.problems
    assert found.calls == {
        "nginx": ["gunicorn"], "gunicorn": ["app"], "app": ["postgres"], "postgres": []
    }  # fmt: skip
    plan = parse_plan(text, "plan.toml")
    by_name = {c.name: c for c in plan.component}
    assert by_name["postgres"].log is not None and by_name["postgres"].log.path == str(pg.log)
    assert by_name["app"].calls == ["postgres"]


def test_an_app_reaching_its_postgresql_by_unix_socket_is_followed_to_it(
    demo_with_postgres: tuple, tmp_path: Path
) -> None:
    # As Debian's apps reach it without a host: through the socket in its socket directory.
    from pinchpoint.demo import DemoStack
    from pinchpoint.demo.env import PG_DSN_ENV

    pg, _ = demo_with_postgres
    dsn = f"host={pg.folder} port={pg.port} user=postgres dbname=postgres"
    with DemoStack(tmp_path, workers=1, app_env={PG_DSN_ENV: dsn}) as stack:
        assert fetch(stack.gunicorn_url + "/api/hot?hold=0", method="POST") == 200
        found = walk(stack.gunicorn_url + "/api/hot", READERS)
    assert [t.name for t in found.tiers] == ["gunicorn", "app", "postgres"], found.problems
    server, _, database = found.tiers
    assert server.next_hops == [Address(unix=pg.folder / f".s.PGSQL.{pg.port}")]
    assert database.pid == pg.pid
    assert database.log_path == pg.log
