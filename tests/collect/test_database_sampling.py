"""Sampling a database from inside: the statement as the verdict names it, the chain of
blockers to its head, the plan's key, and failures that are warnings, not crashes."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import polars as pl
import pytest

from pinchpoint.analyze.database.locks import lock_waits
from pinchpoint.collect.database.normalize import normalize
from pinchpoint.collect.database.queries import Backend
from pinchpoint.collect.database.rows import head_of_chain, needs_tables, sample_rows
from pinchpoint.collect.database.sampler import DatabaseSampler
from pinchpoint.collect.database.sampling import DatabaseSampling
from pinchpoint.plan.database import Database
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import parse_plan
from pinchpoint.rundir import files
from pinchpoint.rundir.schemas import DB_ACTIVITY_SCHEMA

UPDATE = "UPDATE counters SET n = n + 1 WHERE id = 1 RETURNING n"
TAG = "/*pp_run='r1',pp_users='4',pp_req='17'*/"


@pytest.mark.parametrize(
    ("sql", "normalized"),
    [
        (f"{UPDATE} {TAG}", "UPDATE counters SET n = n + $1 WHERE id = $2 RETURNING n"),
        ("SELECT * FROM t1 WHERE name = 'O''Brien' AND x2 > 3.5e2", "SELECT * FROM t1 WHERE name = $1 AND x2 > $2"),
        ("SELECT \"Col1\", E'a\\'b', $$body$$ -- note\nFROM t", 'SELECT "Col1", $1, $2 FROM t'),
        ("SELECT $1, $2  /* a /* nested */ comment */ ,\n 7", "SELECT $1, $2 , $3"),
        ("SELECT x FROM t WHERE a IN (1, 2, 3)", "SELECT x FROM t WHERE a IN ($1, $2, $3)"),
    ],
)  # fmt: skip
def test_statements_lose_comments_literals_and_parameters(sql: str, normalized: str) -> None:
    assert normalize(sql) == normalized


def _backend(
    pid: int, state: str, query: str, blockers: tuple[int, ...] = (), **lock: str
) -> Backend:
    waits = "Lock" if blockers else None
    return Backend(pid, state, waits, lock.get("type") if blockers else None, query, blockers,
                   lock.get("type"), lock.get("mode"), lock.get("relation"))  # fmt: skip


def _hot_row() -> list[Backend]:
    """1 holds the row; 2 waits for its transaction; 3 and 4 wait for the row behind 2."""
    return [
        _backend(1, "idle in transaction", f"{UPDATE} {TAG}"),
        _backend(2, "active", UPDATE, (1,), type="transactionid", mode="ShareLock"),
        _backend(3, "active", UPDATE, (2,), type="tuple", mode="ExclusiveLock", relation="counters"),
        _backend(4, "active", UPDATE, (2, 3), type="tuple", mode="ExclusiveLock", relation="counters"),
        _backend(5, "idle", "COMMIT"),
    ]  # fmt: skip


def test_every_waiter_is_blocked_by_the_head_of_its_chain() -> None:
    backends = {b.pid: b for b in _hot_row()}
    assert [head_of_chain(pid, backends) for pid in (1, 2, 3, 4, 5)] == [None, 1, 1, 1, None]
    # A deadlock's cycle ends the walk.
    cycle = {1: _backend(1, "active", "x", (2,)), 2: _backend(2, "active", "y", (1,))}
    assert head_of_chain(1, cycle) == 2


def test_a_wait_for_a_transaction_names_the_table_both_backends_write() -> None:
    backends = _hot_row()
    assert needs_tables(backends) == [1, 2]
    held = {1: {"counters", "audit"}, 2: {"counters"}}
    rows = sample_rows(100.0, "postgres", backends, held)
    by_pid = {r["pid"]: r for r in rows}
    assert by_pid[2]["lock_relation"] == "counters"
    assert by_pid[4]["blocker_pid"] == 1
    assert by_pid[4]["blocker_statement"] == normalize(UPDATE)
    assert by_pid[4]["blocker_state"] == "idle in transaction"
    assert (by_pid[1]["tag_run"], by_pid[1]["tag_users"], by_pid[1]["tag_req"]) == ("r1", 4, 17)
    assert "lock_type" not in by_pid[5]
    # Three of the four backends in a transaction wait: one for the transaction, two for the row.
    activity = pl.DataFrame(rows * 2, schema=pl.Schema(DB_ACTIVITY_SCHEMA))
    found = lock_waits(activity)
    assert (found["backends"], found["waiting_share"]) == (8, 0.75)
    top, second = found["locks"]
    assert (top["relation"], top["lock_type"], top["mode"], top["share"]) == ("counters", "tuple", "ExclusiveLock", 0.5)  # fmt: skip
    assert (second["lock_type"], second["mode"], second["share"]) == ("transactionid", "ShareLock", 0.25)  # fmt: skip
    assert top["waiting"] == top["holding"] == normalize(UPDATE)


def test_a_wait_whose_lock_was_gone_when_read_takes_its_type_s_usual_table_and_mode() -> None:
    # A backend seen waiting for a transaction whose pg_locks row was gone a moment later:
    # no table, no mode. It counts with the waits of its type it most looks like.
    rows = sample_rows(100.0, "postgres", _hot_row(), {1: {"counters"}, 2: {"counters"}})
    waiting = next(r for r in rows if r.get("lock_type") == "transactionid")
    vanished = {**waiting, "lock_relation": None, "lock_mode": None}
    activity = pl.DataFrame([*rows, vanished], schema=pl.Schema(DB_ACTIVITY_SCHEMA))
    locks = lock_waits(activity)["locks"]
    assert {(lock["relation"], lock["lock_type"], lock["mode"]) for lock in locks} == {
        ("counters", "tuple", "ExclusiveLock"),
        ("counters", "transactionid", "ShareLock"),
    }
    assert sum(lock["samples"] for lock in locks) == 4


PLAN = """
[target]
url = "http://127.0.0.1:8080"
[load]
users = 1
duration = "1s"
[[request]]
path = "/"
[[component]]
name = "postgres"
role = "database"
[component.database]
"""


def test_the_plan_names_the_variable_never_the_dsn() -> None:
    plan = parse_plan(PLAN + 'dsn_env = "PGDSN"\nrate = 10\n')
    assert plan.component[0].database == Database(dsn_env="PGDSN", rate=10)
    with pytest.raises(PlanError, match="holds no secret"):
        parse_plan(PLAN + 'dsn = "host=db password=hunter2"\n')
    with pytest.raises(PlanError, match="rate"):
        parse_plan(PLAN + 'dsn_env = "PGDSN"\nrate = 100\n')


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_server_that_cannot_be_reached_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("psycopg")
    monkeypatch.setenv("PP_TEST_DSN", f"host=127.0.0.1 port={_closed_port()} user=x dbname=x")
    unreachable = DatabaseSampler("postgres", Database(dsn_env="PP_TEST_DSN"))
    unset = DatabaseSampler("other", Database(dsn_env="PP_TEST_DSN_UNSET"))
    sampling = DatabaseSampling([unreachable, unset])
    started = time.monotonic()
    sampling.start()
    took = time.monotonic() - started
    # The refused connection is recorded (at once, unless this process is paused).
    deadline = time.monotonic() + 10
    while not unreachable.problems and time.monotonic() < deadline:
        time.sleep(0.02)
    started = time.monotonic()
    sampling.stop()
    # Neither start nor stop waits for a connection (CONNECT_TIMEOUT_S = 3).
    assert took + time.monotonic() - started < 3.0
    # Last: the unreachable one may have failed again (every RETRY_S) before the stop.
    assert (
        sampling.problems[-1]
        == "database other: PP_TEST_DSN_UNSET is not set: the database was not sampled"
    )
    assert sampling.problems[0].startswith("database postgres: cannot connect: ")
    # and nothing else (no "did not stop in time")
    assert all(p.startswith("database postgres: cannot connect: ") for p in sampling.problems[:-1])
    sampling.write(files.RunFolder(tmp_path))
    assert pl.read_parquet(tmp_path / files.DB_ACTIVITY).height == 0
    assert not (tmp_path / files.DB_STATEMENTS).exists()


def test_the_dsn_is_a_secret_of_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    from pinchpoint.redact import secret_values

    monkeypatch.setenv("PGDSN", "host=db user=ro password=hunter2")
    plan = parse_plan(PLAN + 'dsn_env = "PGDSN"\n')
    assert "host=db user=ro password=hunter2" in secret_values(plan)
