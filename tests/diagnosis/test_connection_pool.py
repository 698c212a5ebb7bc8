"""An app that shares a few PostgreSQL connections among gunicorn's threads: the verdict
names the app's connections, found by Little's law, with a plan that names no pool."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from diagnosis_helpers import check_schema, need_module, need_nginx

from pinchpoint.pipeline import execute
from pinchpoint.plan.model import parse_plan
from pinchpoint_lab import scenarios
from pinchpoint_lab.neighbour import CpuHog
from pinchpoint_lab.postgres import find_postgres

# Stacks that wait (for a connection, for pg_sleep) more than they compute go with the
# timed tests, beside the parallel ones at low priority; the one beside a busy core runs
# alone, after them.
WAITING, LOADING = pytest.mark.timed, pytest.mark.serial


def _run(tmp_path: Path, connections: int) -> dict:
    need_nginx()
    need_module("psycopg", "pip install 'psycopg[binary]'")
    if find_postgres() is None:
        pytest.skip("PostgreSQL is not installed (apt: postgresql)")
    with scenarios.db_pool(tmp_path / "stack", connections=connections) as scenario:
        # As users write plans: the logs and the pid file, no pool size.
        told = [{k: v for k, v in c.items() if k != "workers"} for c in scenario.components]
        text = replace(scenario, components=told).plan(users=(1, 13, 3), duration_s=2.0)
        outcome = execute(parse_plan(text), text, tmp_path / "runs")
    print(outcome.verdict["headline"])  # shown with pytest -s
    check_schema(outcome.run_dir / "verdict.json")
    return outcome.verdict


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The verdict of 2 connections shared by the 16 threads, on a quiet host."""
    return _run(tmp_path_factory.mktemp("two"), connections=2)


@pytest.fixture(scope="module")
def sixteen(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The verdict of a connection for each of the 16 threads, on a quiet host."""
    return _run(tmp_path_factory.mktemp("sixteen"), connections=16)


def _named_in_the_app(verdict: dict) -> None:
    b = verdict["bottleneck"]
    assert b is not None, verdict["headline"]
    assert (b["component"], b["resource"]) == ("app", "connection_pool"), verdict["headline"]
    assert "about 2 connections" in b["summary"]
    # 2 connections held about 10.8 ms each allow some 185 req/s: reached at 4 users.
    assert b["starts_at_users"] == 4, verdict["headline"]
    top = verdict["steps"][-1]
    assert 1.3 <= top["tiers"]["postgres"]["concurrency"] <= 2.0
    assert top["tiers"]["app"]["concurrency"] >= 8
    # gunicorn's 16 threads were read from its command line, not told, and never filled.
    assert verdict["pools"]["gunicorn"]["slots"] == 16
    assert verdict["pools"]["gunicorn"]["found"] == "server"


@WAITING
def test_two_connections_shared_by_sixteen_threads_are_named_in_the_app(two: dict) -> None:
    _named_in_the_app(two)


@LOADING
def test_two_connections_are_named_beside_a_busy_core(tmp_path: Path) -> None:
    """The app's threads wait for a core a few milliseconds a request, and for a
    connection the rest of it."""
    with CpuHog(cores=1.0, max_seconds=120):
        verdict = _run(tmp_path, connections=2)
    _named_in_the_app(verdict)
    assert any(f["component"] == "neighbours" for f in verdict["findings"])


@WAITING
def test_a_connection_for_every_thread_is_not_the_limit(sixteen: dict) -> None:
    # 16 connections for 16 threads: the requests reach the database as the load sends
    # them, until the one process's interpreter runs out; the connections are never named.
    b = sixteen["bottleneck"]
    assert b is None or b["resource"] != "connection_pool", sixteen["headline"]
    assert not any(f["resource"] == "connection_pool" for f in sixteen["findings"])
    top = sixteen["steps"][-1]
    assert top["tiers"]["postgres"]["concurrency"] >= 3
