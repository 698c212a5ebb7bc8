"""Statements tagged by another tool (sqlcommenter's traceparent, a request id) are
untagged lines of a PostgreSQL log, never unparseable: realistic lines, then the lines a
real server writes."""

import time
from collections.abc import Iterator

import pytest

from pinchpoint.collect.logs.reader import FileCounts, collect_component, mark, match_lines
from pinchpoint.demo.errors import StackError
from pinchpoint.logformats import get_parser
from pinchpoint_lab.postgres import LOG_PREFIX, PostgresCluster

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
SQLCOMMENTER = (
    f"/*controller='orders',db_driver='psycopg',framework='django%3A4.2',"
    f"route='%2Forders%2F%3Cint%3Aid%3E',traceparent='{TRACEPARENT}'*/"
)
STATEMENTS = [
    f"SELECT 1 {SQLCOMMENTER}",
    f"SELECT 2 /*traceparent='{TRACEPARENT}',application='x'*/",
    "/* request_id=abc */ SELECT 3",
    "SELECT 4 /* request_id=abc */",
    "SELECT 5 -- request_id=abc",
    f"SELECT\n  6 /*traceparent='{TRACEPARENT}'*/",
]


def _counts(lines: list[str], log_format: str) -> FileCounts:
    counts = FileCounts(component="db", path="postgresql.log")
    assert list(match_lines("db", lines, get_parser("postgresql", log_format), "r1", counts)) == []
    return counts


def test_realistic_lines_of_another_tools_tags_are_untagged() -> None:
    prefix = "2026-11-22 09:15:00.123 UTC [4243] app@shop django "
    lines = [
        f"{prefix}LOG:  duration: 0.150 ms  statement: SELECT 1 {SQLCOMMENTER}",
        f"{prefix}LOG:  duration: 0.210 ms  parse <unnamed>: SELECT $1::int {SQLCOMMENTER}",
        f"{prefix}LOG:  duration: 0.020 ms  bind <unnamed>: SELECT $1::int {SQLCOMMENTER}",
        f"{prefix}DETAIL:  parameters: $1 = '5'",
        f"{prefix}LOG:  duration: 0.003 ms  execute <unnamed>: SELECT $1::int {SQLCOMMENTER}",
        f"{prefix}DETAIL:  parameters: $1 = '5'",
        f"{prefix}LOG:  duration: 0.018 ms  statement: SELECT",
        f"\t  6 /*traceparent='{TRACEPARENT}'*/",
        f"{prefix}LOG:  duration: 0.016 ms  statement: SELECT 7 /* request_id=abc */",
    ]
    counts = _counts(lines, LOG_PREFIX)
    assert (counts.lines, counts.untagged, counts.unparseable) == (9, 9, 0)
    # A line not in the log's format still is unparseable.
    assert _counts(["SELECT 1 /* request_id=abc */"], LOG_PREFIX).unparseable == 1


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    try:
        running = PostgresCluster()
        running.start()
    except StackError as e:
        pytest.skip(str(e))
    yield running
    running.stop()


@pytest.mark.timeout(120)
def test_a_real_servers_lines_of_another_tools_tags_are_untagged(
    cluster: PostgresCluster,
) -> None:
    import psycopg

    time.sleep(0.2)
    since = mark(cluster.log)
    with psycopg.connect(cluster.dsn, application_name="django", autocommit=True) as conn:
        for statement in STATEMENTS:
            conn.execute(statement.encode())
        # The extended protocol: parse, bind and execute lines, DETAIL lines of parameters.
        conn.execute(f"SELECT %s::int {SQLCOMMENTER.replace('%', '%%')}".encode(), (7,))
        conn.execute("SELECT 'done'")
    deadline = time.monotonic() + 10
    while "SELECT 'done'" not in cluster.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    parser = get_parser("postgresql", LOG_PREFIX)
    rows, counts = collect_component("db", cluster.log, parser, "r1", since)
    assert rows == []
    assert counts.lines >= len(STATEMENTS) + 5
    assert (counts.matched, counts.other_run, counts.unparseable) == (0, 0, 0)
    assert counts.untagged == counts.lines
