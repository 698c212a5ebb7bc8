"""The pieces of the diagnosis stacks: the hot-row and slow-scan endpoints, nginx's
uwsgi_pass and limit_conn config, a throwaway PostgreSQL cluster whose statements carry the
run's tag."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pinchpoint.collect.logs.reader import FileCounts, Position, TierRow, collect_component, mark
from pinchpoint.demo import NginxNotFound, find_nginx
from pinchpoint.demo.app import create_app
from pinchpoint.demo.database import sql_comment
from pinchpoint.demo.hot import COUNTERS_SQL
from pinchpoint.demo.nginx import NginxPaths, ProxyOptions, check_config, render_config
from pinchpoint.demo.scan import SCAN_SQL, rows_for
from pinchpoint.logformats import get_parser
from pinchpoint.logformats.tag import Tag
from pinchpoint_lab.postgres import LOG_PREFIX, PostgresCluster, find_postgres, with_database


def test_sql_comment_of_a_tag() -> None:
    assert sql_comment(Tag("r1", 4, 17)) == "/*pp_run='r1',pp_users='4',pp_req='17'*/"
    assert sql_comment(Tag("r1", 4, None)) == "/*pp_run='r1',pp_users='4'*/"
    assert sql_comment(Tag("r1", 0, 3, rate=7.5)) == "/*pp_run='r1',pp_rate='7.5',pp_req='3'*/"
    assert sql_comment(None) == ""


def test_hot_endpoint_without_a_database_is_503_and_checks_hold(tmp_path: Path) -> None:
    client = create_app(tmp_path / "demo.sqlite3", tmp_path / "probe.log").test_client()
    assert client.post("/api/hot").status_code == 503
    assert client.post("/api/hot?hold=x").status_code == 400
    assert client.post("/api/hot?hold=1001").status_code == 400
    assert client.get("/api/hot").status_code == 405
    assert client.get("/api/scan").status_code == 503
    assert client.get("/api/scan?rows=0").status_code == 400
    assert client.get("/api/scan?rows=1000001").status_code == 400
    assert client.get("/api/scan?rows=ten").status_code == 400


@pytest.mark.parametrize(
    ("options", "expected", "absent"),
    [
        (ProxyOptions(), ["proxy_pass http://127.0.0.1:9"], ["limit_conn", "uwsgi_pass"]),
        (
            ProxyOptions(protocol="uwsgi", limit_conn=3),
            [
                "uwsgi_pass 127.0.0.1:9;",
                "uwsgi_param QUERY_STRING",
                "limit_conn pinchpoint_conn 3;",
            ],
            ["proxy_pass"],
        ),
    ],
)
def test_nginx_config_passes_and_limits_as_asked(
    tmp_path: Path, options: ProxyOptions, expected: list[str], absent: list[str]
) -> None:
    paths = NginxPaths(tmp_path)
    text = render_config(paths, 8, 9, run_as_root=False, options=options)
    for line in expected:
        assert line in text
    for word in absent:
        assert word not in text
    try:
        nginx = find_nginx()
    except NginxNotFound:
        return
    paths.temp_dir.mkdir()
    paths.conf.write_text(text)
    check_config(nginx, paths)  # nginx itself accepts it


def test_proxy_options_are_checked() -> None:
    with pytest.raises(ValueError, match="protocol"):
        ProxyOptions(protocol="fastcgi")
    with pytest.raises(ValueError, match="limit_conn"):
        ProxyOptions(limit_conn=0)


def _collected(
    log: Path, run_id: str, position: Position, done: Callable[[list[TierRow]], bool]
) -> tuple[list[TierRow], FileCounts]:
    """The run's rows in PostgreSQL's log, read again until `done` holds of them (its
    logging collector writes a moment after the statement) or 10 s have passed."""
    parser = get_parser("postgresql", LOG_PREFIX)
    deadline = time.monotonic() + 10
    while True:
        rows, counts = collect_component("postgres", log, parser, run_id, position)
        if done(rows) or time.monotonic() > deadline:
            return rows, counts
        time.sleep(0.05)


def _needs_postgres() -> None:
    if find_postgres() is None:
        pytest.skip("PostgreSQL is not installed (apt: postgresql)")
    if importlib.util.find_spec("psycopg") is None:
        pytest.skip("psycopg is not installed (pip install 'psycopg[binary]')")


def test_a_scan_counts_its_rows_in_postgres_which_logs_its_time_with_the_tag(
    tmp_path: Path,
) -> None:
    _needs_postgres()
    with PostgresCluster() as pg:
        pg.execute(SCAN_SQL)
        position = mark(pg.log)
        client = create_app(tmp_path / "d.sqlite3", tmp_path / "p.log", pg.dsn).test_client()
        small = client.get("/api/scan?rows=1000&pp_run=r2&pp_users=1&pp_req=1").get_json()
        large = client.get("/api/scan?rows=400000&pp_run=r2&pp_users=1&pp_req=2").get_json()
        rows = rows_for(pg.dsn, 5.0)
        logged, _ = _collected(pg.log, "r2", position, lambda r: {x.req_id for x in r} >= {1, 2})
    # A tenth of the values fall in the band the scan counts.
    assert small == {"rows": 1000, "matched": 100}
    assert large == {"rows": 400000, "matched": 40000}
    by_req = {row.req_id: row for row in logged}
    assert set(by_req) == {1, 2}
    # The database's own time grows with the rows it scans.
    assert by_req[2].duration_s > 20 * by_req[1].duration_s
    assert 1000 <= rows <= 1_000_000


def test_hot_row_statements_carry_the_tag_into_postgres_log(tmp_path: Path) -> None:
    _needs_postgres()
    with PostgresCluster() as pg:
        pg.execute(COUNTERS_SQL)
        assert pg.folder is not None
        folder = pg.folder
        position = mark(pg.log)
        client = create_app(tmp_path / "d.sqlite3", tmp_path / "p.log", pg.dsn).test_client()
        for req in (1, 2):
            answer = client.post(f"/api/hot?hold=1&pp_run=r1&pp_users=2&pp_req={req}")
            assert answer.get_json() == {"n": req}
        # BEGIN, UPDATE and COMMIT of each request, written by the logging collector
        rows, counts = _collected(
            pg.log, "r1", position, lambda r: {x.req_id for x in r} >= {1, 2} and len(r) >= 6
        )
        component = pg.component()
    assert not folder.exists()  # the cluster's folder is removed on exit
    assert sorted({row.req_id for row in rows}) == [1, 2]
    assert counts.matched == len(rows) >= 6  # BEGIN, UPDATE, COMMIT of each request
    assert component["log"]["log_format"] == LOG_PREFIX
    stack = [{"name": "app", "calls": []}, {"name": "nginx", "calls": ["app"]}]
    assert with_database(stack, component)[0]["calls"] == ["postgres"]
