"""Pool sizes found without the plan: the server's own settings, else Little's law."""

from __future__ import annotations

from dataclasses import replace

from pinchpoint.analyze.context import Context, workers_of
from pinchpoint.analyze.pool_size import INFERRED, PLAN, SERVER
from pinchpoint.analyze.pools import inferred, pool_sizes
from pinchpoint.analyze.verdict import decide

CTX = Context(["nginx", "uwsgi"], {"nginx": ["uwsgi"]}, {}, cpu_count=2, generator_threads=1)


def _step(users: int, busy: float, queue_ms: float, own_ms: float = 10.0, **pool: object) -> dict:
    return {
        "users": users,
        "throughput_rps": 1000 * busy / own_ms,
        "tiers": {
            "nginx": {"concurrency": users * 0.98, "p50_ms": own_ms + queue_ms},
            "uwsgi": {"concurrency": busy, "p50_ms": own_ms, "queue_p50_ms": queue_ms},
        },
        "resources": {"uwsgi": {"cpu_cores": 0.1, "processes": 5, **pool}},
    }


# A pool of 4 waiting workers: concurrency flat at ~3.9 from 5 users, the queue growing.
FULL = [
    _step(1, 0.97, 0.3),
    _step(3, 2.9, 0.3),
    _step(5, 3.88, 2.5),
    _step(7, 3.9, 7.5),
    _step(9, 3.9, 12.6),
]


def test_a_flat_concurrency_with_a_growing_queue_is_a_pool_of_its_size() -> None:
    size = inferred("uwsgi", FULL)
    assert size is not None and size.how == INFERRED
    assert size.slots == 4
    assert "3.90 requests at once from 5 users to 9 users" in size.source


def test_concurrency_that_keeps_rising_is_no_pool() -> None:
    rising = [_step(n, 0.97 * n, 0.3) for n in (1, 3, 5, 7, 9)]
    assert inferred("uwsgi", rising) is None


def test_a_flat_concurrency_without_a_queue_before_it_is_no_full_pool() -> None:
    # The load stopped growing before the tier (a proxy's limit in front of it).
    capped = [_step(n, min(n, 2) * 0.98, 0.3) for n in (1, 3, 5, 7, 9)]
    assert inferred("uwsgi", capped) is None


def test_a_pool_that_slows_its_own_work_is_not_read_as_full() -> None:
    # Its own time grew as much as the queue: the work is slower, not waiting for a slot.
    slower = [_step(n, 3.9, 2.0 * n, own_ms=10.0 + 2.0 * n) for n in (5, 7, 9)]
    assert inferred("uwsgi", slower) is None


def test_the_plan_then_the_server_then_little_s_law() -> None:
    told = [_step(s["users"], s["tiers"]["uwsgi"]["concurrency"], s["tiers"]["uwsgi"]["queue_p50_ms"],
                  pool_slots=4, pool_kind="sync", pool_source="config file /etc/uwsgi/app.ini")
            for s in FULL]  # fmt: skip
    found = pool_sizes(told, CTX)["uwsgi"]
    assert (found.slots, found.how) == (4, SERVER)
    assert "/etc/uwsgi/app.ini" in found.line("uwsgi")
    assert pool_sizes(FULL, CTX)["uwsgi"].how == INFERRED
    planned = Context(**{**CTX.__dict__, "workers": {"uwsgi": 6}})
    assert pool_sizes(told, planned)["uwsgi"].slots == 6
    assert pool_sizes(told, planned)["uwsgi"].how == PLAN


def test_the_worker_count_uses_the_found_pool_before_the_process_count() -> None:
    ctx = Context(**{**CTX.__dict__})
    assert workers_of("uwsgi", FULL[-1], ctx) == 4  # 5 processes less a master
    ctx = replace(ctx, pools={"uwsgi": inferred("uwsgi", FULL)})
    threaded = _step(9, 5.9, 12.0)
    ctx = replace(ctx, pools=pool_sizes([_step(n, 5.9, 4.0 * n) for n in (5, 7, 9)], ctx))
    assert workers_of("uwsgi", threaded, ctx) == 6


# One gunicorn gthread process of 4 threads computing: the process wants a core, its main
# thread hands requests over under the interpreter lock, and Little's law reads ~1.8.
LOCKED = [
    _step(n, busy, queue, processes=2, threads=6, cpu_cores=1.01, cpu_wait_cores=0.29)
    for n, busy, queue in ((5, 1.74, 19.3), (7, 1.76, 31.9), (9, 1.8, 45.0))
]


def test_a_process_computing_a_full_core_gives_a_range_up_to_its_threads() -> None:
    size = inferred("uwsgi", LOCKED)
    assert size is not None and (size.slots, size.most) == (2, 5)
    assert "2 to 5 slots" in size.line("uwsgi")
    assert "a floor" in size.source and size.as_json()["most"] == 5


def test_waiting_threads_give_a_single_size_whatever_the_thread_count() -> None:
    waiting = [
        _step(n, busy, queue, processes=2, threads=6, cpu_cores=0.1)
        for n, busy, queue in ((5, 1.74, 19.3), (7, 1.76, 31.9), (9, 1.8, 45.0))
    ]
    size = inferred("uwsgi", waiting)
    assert size is not None and (size.slots, size.most) == (2, None)
    assert "most" not in size.as_json()


def _served(users: int, busy: float, queue_ms: float) -> dict:
    """nginx → uwsgi (4 sync processes, as its ini says) → app, each request 10 ms in app."""
    step = _step(users, busy, queue_ms, pool_slots=4, pool_kind="sync", pool_server="uwsgi",
                 pool_source="config file stack/uwsgi.ini")  # fmt: skip
    latency = users / step["throughput_rps"] * 1000
    step["latency_ms"] = {"p50": latency, "p95": 1.2 * latency, "p99": 1.4 * latency}
    step["tiers"]["nginx"].update(self_p50_ms=0.1, p50_ms=latency - 0.2)
    step["tiers"]["uwsgi"]["self_p50_ms"] = 0.2
    step["tiers"]["app"] = {"self_p50_ms": 9.8, "p50_ms": 9.8}
    step["resources"].update(host={"cpu_cores": 0.5}, generator={"cpu_cores": 0.05})
    return step


def test_a_pool_is_named_from_where_requests_wait_for_it_not_where_it_first_reads_busy() -> None:
    # 4 users keep the 4 processes busy (3.88 at once) with a slot each: nothing waits
    # and the latency stays flat until 7 users, where the queue before uwsgi grows.
    steps = [_served(1, 0.97, 0.3), _served(4, 3.88, 0.3), _served(7, 3.9, 7.5),
             _served(10, 3.9, 15.0)]  # fmt: skip
    ctx = Context(**{**CTX.__dict__, "order": ["nginx", "uwsgi", "app"],
                     "calls": {"nginx": ["uwsgi"], "uwsgi": ["app"]},
                     "roles": {"nginx": "proxy", "uwsgi": "app_server", "app": "app"}})  # fmt: skip
    ctx = replace(ctx, pools=pool_sizes(steps, ctx))
    assert ctx.pools["uwsgi"].slots == 4
    b = decide(steps, ctx)["bottleneck"]
    assert (b["component"], b["resource"], b["starts_at_users"]) == ("uwsgi", "worker_pool", 7)
    assert "uwsgi's worker pool is full from 7 users" in b["summary"]
    assert "Add workers with uwsgi --processes (or make each request shorter)" in b["summary"]
    # Where part of a slot's time is not logged, a queue at as many users as slots is a wait.
    steps[1]["tiers"]["uwsgi"]["queue_p50_ms"] = 2.0
    assert decide(steps, ctx)["bottleneck"]["starts_at_users"] == 4
