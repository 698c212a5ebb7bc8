"""The findings beyond pool and host CPU, each on step tables where it must fire and where
it must not: cgroup CPU quota, database lock waits, a proxy's limit, the worker estimate."""

from __future__ import annotations

import copy

import pytest

from pinchpoint.analyze.causes.cpu_quota import cpu_quota
from pinchpoint.analyze.causes.db_lock import db_lock
from pinchpoint.analyze.causes.refusals import proxy_limit
from pinchpoint.analyze.findings import workers_estimate
from pinchpoint.analyze.usage import process_group as host_of
from pinchpoint.analyze.verdict import Context, decide

CTX = Context(
    order=["nginx", "gunicorn", "app"],
    calls={"nginx": ["gunicorn"], "gunicorn": ["app"]},
    workers={"gunicorn": 8},
    cpu_count=2,
    generator_threads=2,
)
DB_CTX = Context(
    order=["nginx", "gunicorn", "app", "postgres"],
    calls={"nginx": ["gunicorn"], "gunicorn": ["app"], "app": ["postgres"]},
    workers={"gunicorn": 8},
    cpu_count=2,
    generator_threads=2,
)


def step(users: int, latency: float, app: float = 10.0, throughput: float | None = None) -> dict:
    """A step of nginx → gunicorn (8 workers) → app where only the app's time changes."""
    rps = throughput if throughput is not None else users / (latency / 1000)
    return {
        "users": users,
        "throughput_rps": rps,
        "requests": int(rps * 2),
        "errors": 0,
        "error_rate": 0.0,
        "errors_by_class": {},
        "error_latency_p50_ms": None,
        "latency_ms": {"p50": latency, "p95": latency * 1.2, "p99": latency * 1.4},
        "tiers": {
            "nginx": {"self_p50_ms": 0.1, "p50_ms": latency - 0.2, "errors": 0, "rejected": 0},
            "gunicorn": {
                "self_p50_ms": 0.2,
                "queue_p50_ms": 0.3,
                "p50_ms": app + 0.2,
                "concurrency": rps * (app + 0.2) / 1000,
                "errors": 0,
                "rejected": 0,
            },
            "app": {"self_p50_ms": app, "p50_ms": app, "errors": 0},
        },
        "resources": {
            "host": {"cpu_cores": 0.8},
            "nginx": {"cpu_cores": 0.05, "processes": 2},
            "gunicorn": {"cpu_cores": 0.3, "processes": 9},
            "generator": {"cpu_cores": 0.05},
        },
    }


# --- cgroup CPU quota ------------------------------------------------------------------------


def quota_steps(shares: tuple[float, ...] = (0.0, 0.05, 0.6, 0.95)) -> list[dict]:
    steps = [step(1, 16.0), step(3, 20.0, app=14.0), step(5, 35.0, app=29.0)]
    steps.append(step(7, 60.0, app=54.0))
    for s, share in zip(steps, shares, strict=True):
        s["resources"]["gunicorn"].update(
            cpu_cores=0.5, cpu_quota_cores=0.5, cpu_throttled_share=share, cpu_throttled_s=share
        )
    return steps


def test_throttled_quota_is_named_on_the_component_that_hosts_the_tier() -> None:
    v = decide(quota_steps(), CTX)
    b = v["bottleneck"]
    assert (b["component"], b["resource"], b["starts_at_users"]) == ("gunicorn", "cpu_quota", 5)
    assert v["headline"] == (
        "Bottleneck: gunicorn CPU quota (0.50 cores, throttled 95% of periods) from 5 users"
    )
    assert "app runs in gunicorn's processes" in b["evidence"]


def test_a_throttled_database_below_is_named_where_the_pool_above_it_fills() -> None:
    """The queue before gunicorn grows most (its 8 workers fill, waiting on the database);
    PostgreSQL, below, is throttled by its cgroup's quota: the quota is the cause."""
    steps = quota_steps(shares=(0.0, 0.0, 0.0, 0.0))
    for s, share, pg_ms, queue in zip(
        steps, (0.0, 0.1, 0.7, 0.95), (8.0, 9.0, 11.0, 13.0), (0.3, 1.0, 12.0, 35.0), strict=True
    ):
        s["tiers"]["gunicorn"]["queue_p50_ms"] = queue
        s["tiers"]["app"]["self_p50_ms"] = 2.0
        s["tiers"]["postgres"] = {"self_p50_ms": pg_ms, "p50_ms": pg_ms, "errors": 0}
        s["resources"]["gunicorn"].update(cpu_quota_cores=None, cpu_throttled_share=None)
        s["resources"]["postgres"] = {
            "cpu_cores": 0.5, "processes": 12, "cpu_quota_cores": 0.5,
            "cpu_throttled_share": share, "cpu_throttled_s": share,
        }  # fmt: skip
    v = decide(steps, DB_CTX)
    b = v["bottleneck"]
    assert (b["component"], b["resource"], b["starts_at_users"]) == ("postgres", "cpu_quota", 5)
    assert "gunicorn waits on postgres, below it" in b["evidence"]
    # Asked of the tier itself, a tier with no quota above a throttled one is no finding.
    apart = Context(**{**DB_CTX.__dict__, "calls": {"nginx": ["gunicorn"], "gunicorn": ["app"]}})
    assert cpu_quota("gunicorn", steps, apart) is None


def test_quota_that_is_rarely_throttled_is_not_the_finding() -> None:
    v = decide(quota_steps(shares=(0.0, 0.02, 0.05, 0.1)), CTX)
    assert v["bottleneck"]["resource"] == "time"


def test_quota_used_up_from_the_lowest_load_is_named_from_there() -> None:
    f = cpu_quota("app", quota_steps(shares=(0.9, 0.92, 0.95, 0.95)), CTX)
    assert f is not None
    assert (f.component, f.resource, f.starts_at_users) == ("gunicorn", "cpu_quota", 1)


def test_quota_throttled_in_bursts_far_below_it_is_not_what_grows() -> None:
    # Throttled as much at the lowest load as at the highest, and using a fifth of it.
    steps = quota_steps(shares=(0.9, 0.92, 0.95, 0.95))
    for s in steps:
        s["resources"]["gunicorn"]["cpu_cores"] = 0.1
    assert cpu_quota("app", steps, CTX) is None


def test_no_quota_no_finding() -> None:
    steps = [step(1, 16.0), step(7, 60.0, app=54.0)]
    assert cpu_quota("app", steps, CTX) is None


def test_host_of_a_tier_without_processes_is_its_nearest_sampled_caller() -> None:
    steps = [step(1, 16.0)]
    assert host_of("app", steps, CTX) == "gunicorn"
    assert host_of("gunicorn", steps, CTX) == "gunicorn"
    del steps[0]["resources"]["gunicorn"]
    assert host_of("app", steps, CTX) == "nginx"


# --- database lock waits ---------------------------------------------------------------------


def db_steps(waits: tuple[float, ...] = (0.0, 0.8, 2.8, 5.0)) -> list[dict]:
    out = []
    for users, wait, db_ms in zip((1, 3, 5, 7), waits, (0.4, 6.0, 18.0, 29.0), strict=True):
        s = step(users, 8.0 + db_ms, app=7.0 + db_ms, throughput=110.0)
        s["tiers"]["app"]["self_p50_ms"] = 7.0
        s["tiers"]["postgres"] = {"self_p50_ms": db_ms, "p50_ms": db_ms, "concurrency": 0.5}
        s["resources"]["postgres"] = {"cpu_cores": 0.1, "processes": 15, "lock_waits": wait}
        out.append(s)
    return out


def test_database_time_growing_with_lock_waits_is_db_lock() -> None:
    v = decide(db_steps(), DB_CTX)
    b = v["bottleneck"]
    assert (b["component"], b["resource"], b["starts_at_users"]) == ("postgres", "db_lock", 3)
    assert v["headline"] == "Bottleneck: postgres lock waits from 3 users"
    assert any("5.0 on average at 7 users" in line for line in b["evidence"])


def test_database_time_growing_without_lock_waits_is_not_db_lock() -> None:
    v = decide(db_steps(waits=(0.0, 0.0, 0.1, 0.2)), DB_CTX)
    assert v["bottleneck"]["component"] == "postgres"
    assert v["bottleneck"]["resource"] == "time"


def test_lock_waits_of_a_database_the_tier_calls_count() -> None:
    steps = db_steps()
    found = db_lock("app", steps, DB_CTX)
    assert found is not None and found.component == "postgres"
    assert db_lock("nginx", steps, DB_CTX) is not None  # through gunicorn and the app
    apart = Context(**{**DB_CTX.__dict__, "calls": {"nginx": ["gunicorn"], "gunicorn": ["app"]}})
    assert db_lock("nginx", steps, apart) is None  # a database no tier below it calls


def test_lock_waits_start_where_the_tier_grows() -> None:
    found = db_lock("postgres", db_steps(waits=(4.8, 4.9, 5.0, 5.0)), DB_CTX, grows_from=5)
    assert found is None  # as many waits at the lowest load: not what grows
    found = db_lock("postgres", db_steps(), DB_CTX, grows_from=5)
    assert found is not None and found.starts_at_users == 5


# --- a proxy's connection limit --------------------------------------------------------------


def refusing_steps(status: str = "503", failed_ms: float = 0.8, rejected: bool = True) -> list:
    steps = [step(1, 12.0), step(3, 15.0, throughput=105), step(7, 15.6, throughput=109)]
    for s, errors in zip(steps, (0, 170, 1140), strict=True):
        s["errors"] = errors
        s["error_rate"] = errors / (errors + 2 * s["throughput_rps"])
        s["errors_by_class"] = {status: errors} if errors else {}
        s["error_latency_p50_ms"] = failed_ms if errors else None
        s["tiers"]["nginx"]["errors"] = errors if status.isdigit() else 0
        s["tiers"]["nginx"]["rejected"] = errors if rejected and status.isdigit() else 0
        s["tiers"]["gunicorn"]["concurrency"] = min(s["users"], 2) * 0.75
    return steps


def test_fast_503s_from_the_proxy_while_the_pool_idles_are_the_proxy_limit() -> None:
    v = decide(refusing_steps(), CTX)
    b = v["bottleneck"]
    assert (b["component"], b["resource"], b["starts_at_users"]) == ("nginx", "proxy_limit", 3)
    assert v["headline"] == "Bottleneck: nginx connection limit from 3 users"
    assert any("against 8 workers" in line and "had room" in line for line in b["evidence"])


def test_502s_of_upstream_max_conns_are_a_proxy_limit_too() -> None:
    found = proxy_limit(refusing_steps(status="502"), CTX)
    assert found is not None and found.component == "nginx"


def test_resets_no_tier_logged_are_put_on_the_entry_tier() -> None:
    found = proxy_limit(refusing_steps(status="reset"), CTX)
    assert found is not None and found.component == "nginx"
    assert any("no tier logged" in line for line in found.evidence)


def test_slow_errors_are_not_a_proxy_limit() -> None:
    assert proxy_limit(refusing_steps(failed_ms=10_000.0), CTX) is None


def test_errors_the_backend_answered_are_not_a_proxy_limit() -> None:
    # 503s that nginx passed on from gunicorn: nginx waited on its upstream for them.
    assert proxy_limit(refusing_steps(rejected=False), CTX) is None


def test_application_errors_are_not_a_proxy_limit() -> None:
    steps = refusing_steps(status="500")
    assert proxy_limit(steps, CTX) is None


def test_errors_already_at_the_lowest_load_are_not_a_limit_reached() -> None:
    steps = refusing_steps()
    steps[0] = copy.deepcopy(steps[-1])
    steps[0]["users"] = 1
    assert proxy_limit(steps, CTX) is None


# --- the worker estimate (seed 001: throughput × minimal latency) -----------------------------


def test_worker_estimate_is_peak_throughput_times_minimal_latency() -> None:
    steps = [
        step(1, 10.5, throughput=95),
        step(3, 19.0, throughput=156),
        step(7, 52, throughput=130),
    ]
    estimate = workers_estimate(steps, 10.2, "GET /p")
    assert estimate == {
        "endpoint": "GET /p",
        "peak_throughput_rps": 156,
        "at_users": 3,
        "min_latency_ms": 10.2,
        "workers": pytest.approx(1.59, abs=0.01),
    }
    ctx = Context(**{**CTX.__dict__, "workers": {"gunicorn": 2}, "min_latency_ms": 10.2})
    for s in steps[1:]:
        s["tiers"]["gunicorn"].update(queue_p50_ms=s["latency_ms"]["p50"] - 10.5, concurrency=1.97)
    v = decide(steps, ctx)
    assert v["workers_estimate"][0]["workers"] == pytest.approx(1.59, abs=0.01)
    assert v["bottleneck"]["resource"] == "worker_pool"
    assert any("estimates 1.6 workers" in line for line in v["bottleneck"]["evidence"])


def test_no_worker_estimate_without_answered_requests() -> None:
    steps = [step(1, 10.5, throughput=0.0)]
    assert workers_estimate(steps, 10.2, "GET /p") is None
    assert workers_estimate([step(1, 10.5)], None, "GET /p") is None
    assert decide(steps, CTX)["workers_estimate"] == []


def test_lock_waits_two_calls_below_a_full_pool_are_the_cause() -> None:
    # nginx → gunicorn → app → postgres: gunicorn's pool fills because the app waits on locks.
    steps = db_steps()
    found = db_lock("gunicorn", steps, DB_CTX)
    assert found is not None and found.component == "postgres"


def test_quota_throttled_throughout_beside_neighbours_is_the_quota() -> None:
    # Neighbours leave the cgroup too little to use all of its quota, but it is throttled in
    # nearly every period from the lightest step on and uses most of it: the quota binds.
    steps = quota_steps(shares=(0.97, 0.98, 0.99, 0.99))
    for s in steps:
        s["resources"]["gunicorn"]["cpu_cores"] = 0.35
        s["resources"]["host"]["cpu_cores"] = 1.95
    f = cpu_quota("app", steps, CTX)
    assert f is not None
    assert (f.component, f.resource, f.starts_at_users) == ("gunicorn", "cpu_quota", 1)
