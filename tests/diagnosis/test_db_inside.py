"""PostgreSQL from inside, on real stacks: the hot row's verdict names the table, the lock
and both statements; the slow query's names the statement with the most active time."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from diagnosis_helpers import check_schema, finding, need_module, need_nginx

from pinchpoint.analyze.database.samples import onset_windows
from pinchpoint.analyze.database.statements import by_samples
from pinchpoint.pipeline import execute
from pinchpoint.plan.model import parse_plan
from pinchpoint.rundir import files
from pinchpoint.rundir.steady import steady_windows
from pinchpoint.rundir.view import RunView
from pinchpoint_lab import scenarios
from pinchpoint_lab.postgres import find_postgres

# A hot row's lock waits go with the timed tests, beside the parallel ones at low
# priority; a scan loads the host's cores and runs alone, after them.
WAITING, LOADING = pytest.mark.timed, pytest.mark.serial

UPDATE = "UPDATE counters SET n = n + $1 WHERE id = $2 RETURNING n"
SCAN = (
    "SELECT count(*) FROM (SELECT value FROM readings LIMIT $1) AS r "
    "WHERE value >= $2 AND value < $3"
)
# Steps of 1, 4 and 7 users, 1.5 s each.
USERS = (1, 7, 3)
STEP_S = 1.5


def _needs_postgres() -> None:
    need_nginx()
    need_module("psycopg", "pip install 'psycopg[binary]'")
    if find_postgres() is None:
        pytest.skip("PostgreSQL is not installed (apt: postgresql)")


def _run(scenario: scenarios.Scenario, runs: Path) -> tuple[dict, RunView]:
    text = scenario.plan(users=USERS, duration_s=STEP_S)
    assert "[component.database]" in text
    outcome = execute(parse_plan(text), text, runs)
    assert not outcome.interrupted
    assert outcome.warnings == []
    check_schema(outcome.run_dir / files.VERDICT)
    return outcome.verdict, RunView(outcome.run_dir)


@WAITING
def test_hot_row_verdict_names_the_table_the_lock_and_both_statements(tmp_path: Path) -> None:
    _needs_postgres()
    with scenarios.hot_row(tmp_path / "stack", hold_ms=5) as scenario:
        verdict, view = _run(scenario, tmp_path / "runs")
    assert finding(verdict) == ("postgres", "db_lock"), verdict["headline"]
    inside = verdict["bottleneck"]["database"]
    top = inside["locks"][0]
    # The first waiter waits for the holder's transaction, the next ones for the row.
    assert (top["relation"], top["lock_type"], top["mode"]) == (
        "counters",
        "transactionid",
        "ShareLock",
    )
    assert top["waiting"] == UPDATE
    # The holder's last statement: its UPDATE done, it works before it commits.
    assert top["holding"] == UPDATE
    assert top["holder_state"] == "idle in transaction"
    assert top["share"] >= 0.3
    assert inside["waiting_share"] >= 0.5
    others = {(lock["lock_type"], lock["mode"]) for lock in inside["locks"][1:]}
    assert others <= {("tuple", "ExclusiveLock"), ("transactionid", "ShareLock")}
    assert inside["samples"] >= 5
    evidence = "\n".join(verdict["bottleneck"]["evidence"])
    assert (
        f"ShareLock on a transaction id (the row another transaction updated) in table counters: `{UPDATE}` waits"
        in evidence
    )
    # The samples hold no literal and no tag: statements are normalized.
    sampled = view.table(files.DB_ACTIVITY)
    statements = set(sampled["statement"].drop_nulls().to_list())
    assert UPDATE in statements and not any("pp_run" in s or "= 1" in s for s in statements)
    assert sampled["tag_run"].drop_nulls().unique().to_list() == [verdict["run_id"]]
    assert "counters" in (view.path / files.REPORT).read_text()


@LOADING
def test_database_cpu_verdict_names_the_scan_first(tmp_path: Path) -> None:
    _needs_postgres()
    with scenarios.db_scan(tmp_path / "stack", scan_ms=6.0) as scenario:
        verdict, view = _run(scenario, tmp_path / "runs")
    assert finding(verdict) in {("postgres", "cpu"), ("postgres", "cpu_quota")}, verdict["headline"]
    inside = verdict["bottleneck"]["database"]
    assert inside["source"] == "pg_stat_statements"
    top = inside["statements"][0]
    assert top["statement"] == SCAN
    assert top["share"] >= 0.9
    # Each call scans ~6 ms: the time gained is about the calls' count times that.
    assert 0.5 * 6.0 <= 1000 * top["active_s"] / top["calls"] <= 4 * 6.0
    # Without pg_stat_statements, the samples name the same statement first.
    windows = onset_windows(steady_windows(view.run), verdict["bottleneck"])
    activity = view.table(files.DB_ACTIVITY).filter(pl.col("component") == "postgres")
    sampled = by_samples(activity, windows)
    assert sampled[0]["statement"] == SCAN and sampled[0]["share"] >= 0.9
