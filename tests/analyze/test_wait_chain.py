"""Follow the wait to the work: a pool of workers that wait on a callee saturated at its
one core (Redis's main thread) names that core, never more workers."""

from __future__ import annotations

from dataclasses import replace

from pinchpoint.analyze.causes import tier_cause
from pinchpoint.analyze.context import Context


def _ctx(workers: dict[str, int]) -> Context:
    return Context(
        order=["nginx", "gunicorn", "app", "redis"],
        calls={"nginx": ["gunicorn"], "gunicorn": ["app"], "app": ["redis"], "redis": []},
        workers=workers, cpu_count=2, generator_threads=1,
        roles={"nginx": "proxy", "gunicorn": "app_server", "app": "app", "redis": "cache"},
    )  # fmt: skip


def _step(users: int, queue_ms: float, busy: float, redis_thread: float) -> dict:
    return {
        "step": users, "users": users, "level": float(users), "kind": "users",
        "throughput_rps": 400.0, "latency_ms": {"p50": 5.0 + queue_ms},
        "tiers": {
            "nginx": {"p50_ms": 5.0 + queue_ms, "self_p50_ms": 0.1, "concurrency": users},
            "gunicorn": {"p50_ms": 5.0, "self_p50_ms": 0.1, "queue_p50_ms": queue_ms,
                         "concurrency": busy},
            "app": {"p50_ms": 4.9, "self_p50_ms": 4.0 + queue_ms / 4, "concurrency": busy},
        },
        "resources": {
            "gunicorn": {"cpu_cores": 0.3, "cpu_wait_cores": 0.02, "processes": 5},
            "redis": {"cpu_cores": redis_thread + 0.05, "main_thread_cores": redis_thread,
                      "processes": 1},
            "host": {"cpu_cores": 0.5 + redis_thread},
        },
    }  # fmt: skip


STEPS = [_step(1, 0.1, 0.9, 0.3), _step(4, 1.0, 3.5, 0.8), _step(8, 12.0, 3.95, 0.97)]


def test_a_full_pool_waiting_on_a_redis_at_its_one_core_names_that_core() -> None:
    found = tier_cause("gunicorn", STEPS, STEPS[1], _ctx({"gunicorn": 4}), None)
    assert (found.component, found.resource, found.starts_at_users) == ("redis", "cpu", 8)
    assert found.name == "redis's one core (its main thread)"
    assert "gunicorn's workers wait on redis, whose main thread used 0.97" in found.evidence[0]
    assert "more gunicorn workers would only queue more commands" in found.summary


def test_a_tier_with_no_pool_waiting_on_it_names_it_too() -> None:
    found = tier_cause("app", STEPS, STEPS[1], _ctx({}), None)
    assert (found.component, found.resource) == ("redis", "cpu")


def test_a_redis_with_room_on_its_core_is_not_the_limit() -> None:
    calm = [_step(1, 0.1, 0.9, 0.2), _step(4, 1.0, 3.5, 0.4), _step(8, 12.0, 3.95, 0.6)]
    found = tier_cause("gunicorn", calm, calm[1], _ctx({"gunicorn": 4}), None)
    assert (found.component, found.resource) == ("gunicorn", "worker_pool")


def _async_step(users: int, api_busy: float, callee_busy: float) -> dict:
    return {
        "step": users, "users": users, "level": float(users), "kind": "users",
        "throughput_rps": 60.0, "latency_ms": {"p50": 1000 * users / 60.0},
        "tiers": {
            "nginx": {"p50_ms": 16.0, "self_p50_ms": 0.1, "concurrency": users},
            "api": {"p50_ms": 16.0, "self_p50_ms": 1.0 + users, "concurrency": api_busy},
            "shipping": {"p50_ms": 15.0, "self_p50_ms": 15.0, "concurrency": callee_busy},
        },
        "resources": {
            "api": {"cpu_cores": 0.1, "processes": 1, "pool_kind": "async"},
            "shipping": {"cpu_cores": 0.05, "cpu_wait_cores": 0.0, "processes": 2,
                         "pool_slots": 1, "pool_kind": "sync", "pool_source": "command line"},
            "host": {"cpu_cores": 0.3},
        },
    }  # fmt: skip


def test_an_event_loop_awaiting_a_callee_whose_one_worker_is_busy_names_that_pool() -> None:
    """The callee's log times each request from when its worker takes it: its time stays
    flat while the loop's requests wait in its listen backlog. Neither the loop's
    connections nor a blocked loop: the callee's pool of one."""
    from pinchpoint.analyze.pools import pool_sizes

    steps = [_async_step(1, 0.95, 0.9), _async_step(3, 2.9, 0.9), _async_step(7, 6.8, 0.9)]
    ctx = Context(
        order=["nginx", "api", "shipping"],
        calls={"nginx": ["api"], "api": ["shipping"], "shipping": []},
        workers={}, cpu_count=2, generator_threads=1,
        roles={"nginx": "proxy", "api": "app_server", "shipping": "service"},
    )  # fmt: skip
    ctx = replace(ctx, pools=pool_sizes(steps, ctx))
    assert "api" not in ctx.pools  # an event loop has no slots to infer
    estimate = {"workers": 0.95, "peak_throughput_rps": 60.0, "min_latency_ms": 16.0}
    found = tier_cause("api", steps, steps[1], ctx, estimate)
    assert (found.component, found.resource) == ("shipping", "worker_pool")
    assert "api's requests wait for shipping's workers" in found.evidence[0]
