"""An app that reaches its database through a few connections: named from Little's law (the
database's concurrency stops at a level while the requests inside the app keep growing, its
own time flat) and from what the app's workers consume (they wait, not compute), on step
tables shaped as a recorded run of gunicorn's 16 threads sharing 2 PostgreSQL connections
(185 req/s from 4 users, PostgreSQL 9.3 ms and 1.7 at once, the app's process 0.45 cores)."""

from __future__ import annotations

import math

import pytest

from pinchpoint.analyze.prediction import predict
from pinchpoint.analyze.verdict import Context, decide

CTX = Context(
    order=["nginx", "gunicorn", "app", "postgres"],
    calls={"nginx": ["gunicorn"], "gunicorn": ["app"], "app": ["postgres"], "postgres": []},
    workers={"gunicorn": 16},
    cpu_count=2,
    generator_threads=2,
)
DB_MS = 9.3


def step(
    users: int,
    throughput: float,
    db_ms: float = DB_MS,
    app_cpu: float = 0.45,
    app_wait: float = 0.33,
    host_cpu: float = 0.63,
) -> dict:
    latency = 1000 * users / throughput
    app = latency - 1.5
    return {
        "users": users,
        "throughput_rps": throughput,
        "latency_ms": {"p50": latency, "p95": latency * 1.2, "p99": latency * 1.4},
        "tiers": {
            "nginx": {"self_p50_ms": 0.1, "p50_ms": latency - 0.2},
            "gunicorn": {
                "self_p50_ms": 0.1,
                "queue_p50_ms": 1.1,
                "p50_ms": app + 0.1,
                "concurrency": throughput * (app + 0.1) / 1000,
            },
            "app": {
                "self_p50_ms": app - db_ms,
                "p50_ms": app,
                "concurrency": throughput * app / 1000,
            },
            "postgres": {
                "self_p50_ms": db_ms,
                "p50_ms": db_ms,
                "concurrency": throughput * db_ms / 1000,
            },
        },
        "resources": {
            "host": {"cpu_cores": host_cpu},
            "gunicorn": {"cpu_cores": app_cpu, "cpu_wait_cores": app_wait, "processes": 2},
            "postgres": {"cpu_cores": 0.1, "processes": 4},
            "generator": {"cpu_cores": 0.05},
        },
    }


def held_steps(**top: float) -> list[dict]:
    """1 user, then 4 to 13 users at the 185 req/s two connections of 10.8 ms allow."""
    return [step(1, 82, app_cpu=0.21, app_wait=0.1)] + [
        step(users, 185, **top) for users in (4, 7, 10, 13)
    ]


def test_a_few_connections_to_a_database_with_room_are_named_in_the_app() -> None:
    b = decide(held_steps(), CTX)["bottleneck"]
    assert (b["component"], b["resource"]) == ("app", "connection_pool"), b["summary"]
    assert b["starts_at_users"] == 4
    assert "about 2 connections" in b["summary"] and "postgres has room" in b["summary"]
    assert any("postgres served 1.72 requests at once" in line for line in b["evidence"])


def test_an_app_whose_process_computes_a_core_is_not_short_of_connections() -> None:
    # The same plateau, the interpreter of its one process busy 0.95 of the time: the
    # process, not the connections, stops the requests from reaching the database.
    b = decide(held_steps(app_cpu=0.95, app_wait=0.2, host_cpu=1.1), CTX)["bottleneck"]
    assert b["resource"] != "connection_pool", b["summary"]


def test_a_database_whose_own_time_grows_is_not_the_app_s_connections() -> None:
    steps = [step(1, 82)] + [
        step(users, 185, db_ms=DB_MS * (1 + users / 4)) for users in (4, 7, 10, 13)
    ]
    b = decide(steps, CTX)["bottleneck"]
    assert b is None or b["resource"] != "connection_pool", b["summary"]


def test_a_level_at_the_server_s_own_threads_is_its_pool_not_connections() -> None:
    # 2 threads: the requests inside the app stop at the pool's size with the database's.
    ctx = Context(**{**CTX.__dict__, "workers": {"gunicorn": 2}})
    b = decide(held_steps(), ctx)["bottleneck"]
    assert b is None or b["resource"] != "connection_pool", b["summary"]


def test_workers_a_full_host_keeps_waiting_for_a_core_are_not_short_of_connections() -> None:
    # A neighbour holds the cores: the app's threads were runnable most of each request
    # (8 cores' worth of threads in the run queue: 45 ms of its 59 ms), which held back
    # its queries as much as any pool would.
    b = decide(held_steps(app_wait=8.0, host_cpu=1.95), CTX)["bottleneck"]
    assert b is None or b["resource"] != "connection_pool", b["summary"]


def test_a_few_ms_a_request_of_waiting_for_a_core_does_not_hide_the_connections() -> None:
    # The same host full of a neighbour's work, the app's threads waiting for a core
    # 0.6 cores' worth (3 ms a request): the rest of its 59 ms it waited for a connection.
    b = decide(held_steps(app_wait=0.6, host_cpu=1.95), CTX)["bottleneck"]
    assert (b["component"], b["resource"]) == ("app", "connection_pool"), b["summary"]


def test_more_connections_are_predicted_up_to_the_next_ceiling() -> None:
    steps = held_steps()
    found = predict(decide(steps, CTX)["bottleneck"], steps, CTX)
    assert found is not None
    top, low = steps[-1], steps[0]
    at_once = top["throughput_rps"] * DB_MS / 1000
    assert (found.component, found.setting, found.now) == ("app", "connections", 2)
    # The process's one core: 185 req/s on 0.45 cores is 411 a second at most.
    assert found.ceilings["process_cpu"] == pytest.approx(185 / 0.45)
    # Each of the 16 threads holding a request as long as one user's did, alone.
    held = low["throughput_rps"] * (low["tiers"]["gunicorn"]["p50_ms"]) / 1000
    assert found.ceilings["workers"] == pytest.approx(16 * low["throughput_rps"] / held)
    # Enough connections for the least of the others, each in use 85% of the time there.
    least = min(v for k, v in found.ceilings.items() if k != "connections")
    assert found.to == math.ceil(at_once * least / (185 * 0.85)) == 5
    assert found.ceilings["connections"] == pytest.approx(185 * 5 / at_once)
    assert (found.limited_by, found.predicted_rps) == ("process_cpu", least)
    assert found.line().startswith("app connections 2 → 5: about 411 req/s at 13 users")


def test_connections_are_not_predicted_past_the_threads_that_hold_them() -> None:
    # Up to 36 users, the process and the host nearly idle: the 16 threads, each holding a
    # request 10.8 ms, serve 1,482 a second, for which 17 connections would be in use 85%
    # of the time; no more than the 16 threads can hold one.
    steps = [step(1, 82, app_cpu=0.02, app_wait=0.0, host_cpu=0.1)] + [
        step(users, 185, app_cpu=0.05, app_wait=0.0, host_cpu=0.3) for users in (4, 12, 20, 28, 36)
    ]
    found = predict(decide(steps, CTX)["bottleneck"], steps, CTX)
    assert found is not None
    at_once = 185 * DB_MS / 1000
    assert math.ceil(at_once * found.ceilings["workers"] / (185 * 0.85)) == 17
    assert (found.to, found.limited_by) == (16, "workers")
    assert found.line().endswith("where its server's workers limit")
