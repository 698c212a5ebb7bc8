"""Sampling MySQL from inside: a statement as the verdict names it, the plan's `kind`, and
a real MariaDB sampled while two sessions fight over one row and a scan takes its time."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pinchpoint.analyze.database.evidence import lock_sentence
from pinchpoint.analyze.database.locks import lock_waits
from pinchpoint.analyze.database.statements import by_stat_statements
from pinchpoint.collect.database.mysql_sampler import MysqlSampler, parse_dsn
from pinchpoint.collect.database.mysql_text import normalize_mysql
from pinchpoint.collect.database.sampling import DatabaseSampling
from pinchpoint.plan.database import Database
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import parse_plan
from pinchpoint.rundir import files
from pinchpoint.rundir.schemas import DB_ACTIVITY_SCHEMA, DB_STATEMENTS_SCHEMA
from pinchpoint.rundir.steady import Window

UPDATE = "UPDATE counters SET n = n + $1 WHERE id = $2"
TAG = "/*pp_run='r1',pp_users='4',pp_req='17'*/"


@pytest.mark.parametrize(
    ("sql", "normalized"),
    [
        ("UPDATE `counters` SET n = n + 1 WHERE id = 1 /*pp_run='r1',pp_req='7'*/", UPDATE),
        # performance_schema's digest text of the same statement
        ("UPDATE `counters` SET `n` = `n` + ? WHERE id = ? ", UPDATE),
        ("REPLACE INTO `shop` . `counters` VALUES (...) ", "REPLACE INTO shop.counters VALUES (...)"),
        # Double-quoted strings and backslash escapes are literals; # and `-- ` comments.
        ('SELECT * FROM t WHERE a = "se\\"cret" AND b=0x1F # note\n AND c IN (1, 2.5e3) -- x',
         "SELECT * FROM t WHERE a = $1 AND b=$2 AND c IN ($3, $4)"),
        ("SELECT `odd name`, _utf8mb4'x', N'y', t1.x2 FROM t1--no comment",
         "SELECT `odd name`, $1, $2, t1.x2 FROM t1--no comment"),
        ("SELECT '# not a comment', 'it''s' /* gone */", "SELECT $1, $2"),
    ],
)  # fmt: skip
def test_mysql_statements_lose_comments_literals_and_placeholders(
    sql: str, normalized: str
) -> None:
    assert normalize_mysql(sql) == normalized


PLAN = """
[target]
url = "http://127.0.0.1:8080"
[load]
users = 1
duration = "1s"
[[request]]
path = "/"
[[component]]
name = "db"
role = "database"
[component.database]
dsn_env = "DB_DSN"
"""


def test_the_plan_s_kind_is_postgresql_unless_it_says_mysql() -> None:
    assert parse_plan(PLAN).component[0].database == Database(dsn_env="DB_DSN")
    assert parse_plan(PLAN + 'kind = "mysql"\n').component[0].database == Database(
        dsn_env="DB_DSN", kind="mysql"
    )
    with pytest.raises(PlanError) as caught:
        parse_plan(PLAN + 'kind = "oracle"\n')
    assert str(caught.value) == (
        "<plan>:14: component[0].database.kind: Input should be 'postgresql' or 'mysql'"
    )


def test_a_mysql_dsn_is_a_url_and_its_faults_quote_no_password() -> None:
    address = parse_dsn("mysql://app:p%40ss@127.0.0.1:3307/shop")
    assert (address.host, address.port, address.user, address.password, address.database) == (
        "127.0.0.1", 3307, "app", "p@ss", "shop",
    )  # fmt: skip
    assert parse_dsn("mysql://root@/shop?unix_socket=/run/mysqld/mysqld.sock").unix_socket == (
        "/run/mysqld/mysqld.sock"
    )
    for dsn, fault in [
        ("host=db user=app password=hunter2", "must be a mysql://"),
        ("mysql://app:hunter2@db:99999/shop", "port is not a number"),
        ("mysql://app:hunter2@/shop", "names no host"),
    ]:
        with pytest.raises(ValueError, match=fault) as caught:
            parse_dsn(dsn)
        assert "hunter2" not in str(caught.value)


def test_a_bad_mysql_dsn_is_a_warning_naming_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PP_TEST_MYSQL", "postgresql://app:hunter2@db/shop")
    sampler = MysqlSampler("mariadb", Database(dsn_env="PP_TEST_MYSQL", kind="mysql"))
    sampler.start()
    deadline = time.monotonic() + 5
    while not sampler.problems and time.monotonic() < deadline:
        time.sleep(0.01)
    sampler.stop()
    assert sampler.problems[0] == (
        "database mariadb: PP_TEST_MYSQL: the DSN must be a "
        "mysql://user:password@host:port/database URL"
    )


@pytest.fixture(scope="module")
def mariadb() -> Iterator[Any]:
    from pinchpoint_lab.mariadb import MariadbServer, find_mariadb

    if find_mariadb() is None:
        pytest.skip("apt: mariadb-server")
    with MariadbServer() as db:
        yield db


def _sampled(db: Any, rate: int = 20) -> MysqlSampler:
    sampler = MysqlSampler("mariadb", Database(dsn_env=db.dsn_env, kind="mysql", rate=rate))
    sampler.start()
    return sampler


def _wait_for(predicate: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)


# Its sampler must see the waits within InnoDB's lock timeout: at idle priority beside the
# timed lane it saw none in 10 s (a fresh-clone run), so it runs with the timed tests.
@pytest.mark.timed
def test_a_hot_row_s_waiting_update_and_its_idle_holder_are_named(
    mariadb: Any, tmp_path: Path
) -> None:
    mariadb.execute("CREATE TABLE shop.counters (id INT PRIMARY KEY, n INT) ENGINE=InnoDB")
    mariadb.execute("INSERT INTO shop.counters VALUES (1, 0), (2, 0)")
    holder, waiter = mariadb.connect(), mariadb.connect()
    sampler = _sampled(mariadb)
    try:
        with holder.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute(f"UPDATE counters SET n = n + 1 WHERE id = 1 {TAG}")
        with waiter.cursor() as cursor:
            cursor.execute("SET SESSION innodb_lock_wait_timeout = 10")
            cursor.execute("BEGIN")
        blocked = threading.Thread(
            target=lambda: waiter.cursor().execute("UPDATE counters SET n = n + 1 WHERE id = 1")
        )
        blocked.start()
        _wait_for(lambda: sum(r.get("blocker_pid") is not None for r in sampler.rows) >= 5)
        holder.cursor().execute("ROLLBACK")
        blocked.join(10)
        waiter.cursor().execute("ROLLBACK")
    finally:
        sampler.stop()
        holder.close()
        waiter.close()
    assert sampler.problems == []
    waits = [r for r in sampler.rows if r.get("blocker_pid") is not None]
    assert len(waits) >= 5
    wait = waits[0]
    assert wait["blocker_pid"] == holder.thread_id()
    assert wait["pid"] == waiter.thread_id()
    assert (wait["wait_event_type"], wait["state"], wait["statement"]) == ("Lock", "active", UPDATE)
    assert (wait["lock_type"], wait["lock_mode"], wait["lock_relation"]) == ("RECORD", "X", "shop.counters")  # fmt: skip
    # The holder sleeps in its transaction, its UPDATE done: its last statement names it.
    assert (wait["blocker_statement"], wait["blocker_state"]) == (UPDATE, "idle in transaction")
    held = [r for r in sampler.rows if r["pid"] == holder.thread_id() and r["ts"] >= wait["ts"]]
    assert {(r["tag_run"], r["tag_users"], r["tag_req"]) for r in held} == {("r1", 4, 17)}
    # Written and read back as PostgreSQL's are, the analysis names both statements.
    DatabaseSampling([sampler]).write(files.RunFolder(tmp_path))
    activity = pl.read_parquet(tmp_path / files.DB_ACTIVITY)
    assert activity.schema == pl.Schema(DB_ACTIVITY_SCHEMA)
    first, last = waits[0]["ts"], waits[-1]["ts"]
    found = lock_waits(activity.filter(pl.col("ts").is_between(first, last)))
    top = found["locks"][0]
    assert (top["relation"], top["lock_type"], top["mode"]) == ("shop.counters", "RECORD", "X")
    assert (top["waiting"], top["holding"], top["holder_state"]) == (UPDATE, UPDATE, "idle in transaction")  # fmt: skip
    # Two sessions in a transaction while the row was held: one of them waited.
    assert found["waiting_share"] == 0.5
    assert lock_sentence({"database": found}) == (
        f"Most waits are for X on a row in table shop.counters: `{UPDATE}` waits while "
        f"`{UPDATE}` holds it."
    )


SCAN = "SELECT COUNT(*) FROM big WHERE pad LIKE '%zz%'"
POINT = "SELECT pad FROM big WHERE id = 7"


def test_a_scan_leads_the_statements_by_time(mariadb: Any, tmp_path: Path) -> None:
    mariadb.execute("CREATE TABLE shop.big (id INT PRIMARY KEY, pad VARCHAR(200)) ENGINE=InnoDB")
    mariadb.execute("INSERT INTO shop.big SELECT seq, REPEAT('x', 150) FROM shop.seq_1_to_30000")
    sampler = _sampled(mariadb, rate=5)
    _wait_for(lambda: len(sampler.statements) > 0)
    began = time.time()
    conn = mariadb.connect()
    try:
        with conn.cursor() as cursor:
            for i in range(200):
                cursor.execute(SCAN if i % 20 == 0 else POINT)
                cursor.fetchall()
    finally:
        conn.close()
        ended = time.time()
        sampler.stop()
    assert sampler.problems == []
    assert sampler.statements_source == "performance_schema"
    DatabaseSampling([sampler]).write(files.RunFolder(tmp_path))
    statements = pl.read_parquet(tmp_path / files.DB_STATEMENTS)
    assert statements.schema == pl.Schema(DB_STATEMENTS_SCHEMA)
    found = by_stat_statements(statements, [Window(0, 1, began, ended)])
    assert found is not None
    scan, point = found[0], next(s for s in found if s["statement"].startswith("SELECT pad"))
    # The digest spaces every token: a call's parenthesis stays one space from its name.
    assert (scan["statement"], scan["calls"]) == ("SELECT COUNT (*) FROM big WHERE pad LIKE $1", 10)
    # MariaDB's digest writes the name `id` as its keyword ID.
    assert (point["statement"], point["calls"]) == ("SELECT pad FROM big WHERE ID = $1", 190)
    # Ten scans of 30 000 rows take longer than 190 reads of one row by its key.
    assert scan["active_s"] > 2 * point["active_s"] > 0
    # The sampler's own statements are left out.
    assert not any("performance_schema" in str(s) for s in statements["statement"].to_list())
