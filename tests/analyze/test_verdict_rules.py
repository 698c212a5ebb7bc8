"""Each finding of the verdict, on step tables built to make it fire or not."""

from __future__ import annotations

from pinchpoint.analyze.verdict import Context, decide

CTX = Context(
    order=["nginx", "gunicorn", "app"],
    calls={"nginx": ["gunicorn"], "gunicorn": ["app"]},
    workers={"gunicorn": 2},
    cpu_count=2,
    generator_threads=2,
)


# Workers to spare: a pool that never fills.
ROOMY = Context(**{**CTX.__dict__, "workers": {"gunicorn": 16}})


def step(
    users: int,
    latency: float,
    queue: float = 0.1,
    app: float = 10.0,
    host_cpu: float = 0.5,
    pool_cpu: float = 0.4,
    concurrency: float | None = None,
    generator: float = 0.05,
    cpu_pressure: float | None = None,
) -> dict:
    throughput = users / (latency / 1000)
    return {
        "users": users,
        "throughput_rps": throughput,
        "latency_ms": {"p50": latency, "p95": latency * 1.2, "p99": latency * 1.4},
        "tiers": {
            "nginx": {"self_p50_ms": 0.1, "p50_ms": latency - 0.2},
            "gunicorn": {
                "self_p50_ms": 0.2,
                "queue_p50_ms": queue,
                "p50_ms": app + 0.2,
                "concurrency": concurrency
                if concurrency is not None
                else throughput * (app + 0.2) / 1000,
            },
            "app": {"self_p50_ms": app, "p50_ms": app},
        },
        "resources": {
            "host": {"cpu_cores": host_cpu}
            | ({"cpu_pressure": cpu_pressure} if cpu_pressure is not None else {}),
            "gunicorn": {"cpu_cores": pool_cpu, "processes": 3},
            "generator": {"cpu_cores": generator},
        },
    }


def pool_steps(pool_cpu: float = 0.4, host_cpu: float = 0.6) -> list[dict]:
    return [
        step(1, 10.5),
        step(2, 10.6, queue=0.3),
        step(4, 21.0, queue=10.5, concurrency=1.95, pool_cpu=pool_cpu, host_cpu=host_cpu),
        step(8, 42.0, queue=31.5, concurrency=1.97, pool_cpu=pool_cpu, host_cpu=host_cpu),
    ]


def test_full_pool_of_idle_workers_is_the_worker_pool() -> None:
    v = decide(pool_steps(), CTX)
    b = v["bottleneck"]
    # Two users keep both workers busy (Little's law), but none waits for one before 4:
    # the pool limits from there on.
    assert (b["component"], b["resource"], b["starts_at_users"]) == ("gunicorn", "worker_pool", 4)
    assert any("1.97" in e and "2 workers" in e for e in b["evidence"])


def test_full_pool_of_computing_workers_on_a_saturated_host_is_the_cpu() -> None:
    v = decide(pool_steps(pool_cpu=1.9, host_cpu=1.95), CTX)
    assert v["bottleneck"]["resource"] == "cpu"


def test_queue_growth_with_a_half_empty_pool_is_not_the_worker_pool() -> None:
    ctx = Context(**{**CTX.__dict__, "workers": {"gunicorn": 8}})
    v = decide(pool_steps(), ctx)
    assert v["bottleneck"]["component"] == "gunicorn"
    assert v["bottleneck"]["resource"] != "worker_pool"


def test_app_time_growing_on_a_saturated_host_is_the_cpu() -> None:
    steps = [step(1, 10.5), step(4, 10.8, host_cpu=1.2), step(8, 18.0, app=17.5, host_cpu=1.96)]
    b = decide(steps, ROOMY)["bottleneck"]
    # The CPU is gunicorn's processes', where the app runs.
    assert (b["component"], b["resource"], b["starts_at_users"]) == ("gunicorn", "cpu", 8)


def test_app_time_growing_without_saturation_names_the_tier_but_no_resource() -> None:
    steps = [step(1, 10.5), step(4, 10.8), step(8, 18.0, app=17.5, host_cpu=0.9)]
    b = decide(steps, ROOMY)["bottleneck"]
    assert (b["component"], b["resource"]) == ("app", "time")


def test_app_time_growing_while_tasks_wait_for_a_core_is_the_cpu() -> None:
    # 1.6 of 2 cores is below the utilisation mark, but tasks queue for a core 62% of the time.
    steps = [
        step(1, 10.5, cpu_pressure=0.05),
        step(4, 10.8, host_cpu=1.2, cpu_pressure=0.3),
        step(8, 16.0, app=15.5, host_cpu=1.6, pool_cpu=1.45, cpu_pressure=0.62),
    ]
    b = decide(steps, ROOMY)["bottleneck"]
    assert (b["component"], b["resource"], b["starts_at_users"]) == ("gunicorn", "cpu", 8)
    assert any("62% of the time at 8 users (5% at 1 user)" in e for e in b["evidence"])


def test_cpu_pressure_that_was_there_before_the_load_is_not_the_cpu() -> None:
    # Another tenant keeps the host's run queue busy from the first step: no rise with load.
    steps = [
        step(1, 10.5, cpu_pressure=0.5),
        step(4, 10.8, host_cpu=1.2, cpu_pressure=0.55),
        step(8, 16.0, app=15.5, host_cpu=1.6, cpu_pressure=0.6),
    ]
    assert decide(steps, ROOMY)["bottleneck"]["resource"] == "time"
    # Pressure that rises but stays low is not a saturated CPU either (the stack's own CPU).
    for s, p in zip(steps, (0.0, 0.1, 0.3), strict=True):
        s["resources"]["host"]["cpu_pressure"] = p
    for s, cores in zip(steps[1:], (0.9, 1.2), strict=True):
        s["resources"]["gunicorn"]["cpu_cores"] = cores
    assert decide(steps, ROOMY)["bottleneck"]["resource"] == "time"


def neighbour_steps(pool_cpu: float, host_cpu: float) -> list[dict]:
    """The app's time grows while tasks wait for a core more and more; processes outside
    the stack take host_cpu - pool_cpu - 0.05 cores."""
    return [
        step(1, 10.5, cpu_pressure=0.05),
        step(4, 10.8, host_cpu=1.2, cpu_pressure=0.2),
        step(8, 16.0, app=15.5, host_cpu=host_cpu, pool_cpu=pool_cpu, cpu_pressure=0.45),
    ]


def test_growth_a_neighbour_explains_is_no_bottleneck_of_the_stack() -> None:
    # A neighbour takes 1.05 cores; the stack wants 0.45 of the 0.95 left: not its CPU.
    v = decide(neighbour_steps(pool_cpu=0.4, host_cpu=1.5), ROOMY)
    assert v["bottleneck"] is None
    assert v["headline"].startswith("No bottleneck of the stack's own from 1 to 8 users")
    assert "processes outside the stack (1.05 cores)" in v["headline"]
    assert [f["component"] for f in v["findings"]] == ["neighbours", "app"]


def test_a_stack_that_fills_what_a_neighbour_left_is_limited_by_the_cpu() -> None:
    # The same neighbour; the stack wants the 0.95 cores left: the host's CPU is its limit.
    b = decide(neighbour_steps(pool_cpu=0.9, host_cpu=1.95), ROOMY)["bottleneck"]
    assert (b["component"], b["resource"], b["starts_at_users"]) == ("gunicorn", "cpu", 8)
    assert "other processes on the host took 1.00 of its cores" in b["summary"]


def test_the_same_wait_for_a_core_without_a_neighbour_is_the_stacks_cpu() -> None:
    # The stack's own processes are what keeps the tasks waiting for a core.
    b = decide(neighbour_steps(pool_cpu=1.1, host_cpu=1.2), ROOMY)["bottleneck"]
    assert (b["component"], b["resource"]) == ("gunicorn", "cpu")
    assert "the stack used 1.10 of them" in b["summary"]


def test_flat_latency_is_no_bottleneck_with_the_headroom() -> None:
    steps = [step(1, 10.5), step(4, 10.7, host_cpu=0.7), step(8, 10.9, host_cpu=1.1)]
    v = decide(steps, CTX)
    assert v["bottleneck"] is None
    assert v["headline"].startswith("No bottleneck from 1 to 8 users")
    assert "1.10 of 2 cores" in v["headline"]


def test_jitter_below_a_millisecond_is_not_growth() -> None:
    steps = [step(1, 0.8), step(8, 1.5, app=1.0)]
    assert decide(steps, CTX)["bottleneck"] is None


def test_saturated_generator_names_no_server_tier() -> None:
    steps = pool_steps()
    steps[-1]["resources"]["generator"]["cpu_cores"] = 1.9
    v = decide(steps, CTX)
    assert (v["bottleneck"]["component"], v["bottleneck"]["resource"]) == ("generator", "cpu")
    assert [f["component"] for f in v["findings"]] == ["generator"]
    assert v["generator"]["saturated"] is True
    assert "measure the generator" in v["headline"]


def test_busy_but_unsaturated_generator_is_not_flagged() -> None:
    steps = pool_steps()
    steps[-1]["resources"]["generator"]["cpu_cores"] = 1.5
    v = decide(steps, CTX)
    assert v["generator"]["saturated"] is False
    assert v["bottleneck"]["resource"] == "worker_pool"


def test_growth_without_tier_records_is_reported_unattributed() -> None:
    steps = pool_steps()
    for s in steps:
        s["tiers"] = {}
    v = decide(steps, CTX)
    assert v["bottleneck"] is None
    assert v["unattributed"] is True
    assert "cannot be attributed" in v["headline"]


def test_a_single_step_is_not_enough_to_judge() -> None:
    v = decide([step(1, 10.5)], CTX)
    assert v["bottleneck"] is None
    assert "at least two" in v["headline"]


def test_a_mean_that_grows_under_a_flat_median_is_growth() -> None:
    # Throttling delays a third of the requests by a whole period: the median hides it.
    steps = [step(1, 16.0, host_cpu=0.5), step(3, 17.0, host_cpu=0.5), step(5, 19.0, host_cpu=0.5)]
    for s, mean in zip(steps, (16.5, 25.4, 41.0), strict=True):
        s["latency_mean_ms"] = mean
        s["throughput_rps"] = s["users"] / mean * 1000
    v = decide(steps, ROOMY)
    # The growth is seen from 3 users in the mean; no tier's median time carries it, so no
    # tier is named for it.
    assert v["headline"].startswith("Latency grows from 3 users (mean 16.5 ms → 41.0 ms)")
    assert v["bottleneck"] is None and v["unattributed"]


def test_one_process_whose_threads_want_more_than_a_core_is_too_few_processes() -> None:
    # One gthread process of 4 threads: its threads use 0.5 cores and wait 0.8 more for one
    # interpreter, its thread pool half full, while a core idles.
    ctx = Context(**{**CTX.__dict__, "workers": {"gunicorn": 4}})
    steps = [step(1, 10.0), step(3, 28.0, queue=17.0, concurrency=1.8)]
    steps.append(step(5, 46.0, queue=35.0, concurrency=2.0))
    for s in steps:
        s["resources"]["gunicorn"].update(cpu_cores=0.5, cpu_wait_cores=0.8, processes=2)
        s["resources"]["host"]["cpu_cores"] = 1.0
    b = decide(steps, ctx)["bottleneck"]
    assert (b["component"], b["resource"]) == ("gunicorn", "worker_pool")
    assert "idle cores" in b["summary"]


def test_throughput_that_stops_scaling_is_a_knee_under_a_millisecond() -> None:
    # A static page: four times the users, the same throughput, latency 0.05 → 0.2 ms.
    steps = [step(u, lat, app=0.01) for u, lat in ((4, 0.05), (8, 0.1), (16, 0.2))]
    for s in steps:
        s["tiers"]["nginx"]["self_p50_ms"] = s["latency_ms"]["p50"] - 0.03
    v = decide(steps, ROOMY)
    assert v["bottleneck"] is not None, v["headline"]
    assert (v["bottleneck"]["component"], v["bottleneck"]["starts_at_users"]) == ("nginx", 8)


def test_sub_millisecond_latency_that_scales_is_no_knee() -> None:
    steps = [step(u, lat, app=0.01) for u, lat in ((4, 0.05), (8, 0.07), (16, 0.09))]
    assert decide(steps, ROOMY)["bottleneck"] is None


def queued_pool_steps(host_cpu: float = 0.6, app: float = 10.0) -> list[dict]:
    """Four threads whose logged occupancy stops at 0.75 while requests queue before them."""
    return [
        step(1, 10.5, host_cpu=host_cpu),
        step(4, 13.5, queue=2.0, concurrency=2.9, host_cpu=host_cpu),
        step(7, 24.0, queue=13.0, concurrency=3.0, host_cpu=host_cpu, app=app),
        step(10, 34.0, queue=23.0, concurrency=3.0, host_cpu=host_cpu, app=app),
    ]


def test_queue_before_a_pool_whose_occupancy_reads_three_quarters_is_the_worker_pool() -> None:
    ctx = Context(**{**CTX.__dict__, "workers": {"gunicorn": 4}})
    b = decide(queued_pool_steps(), ctx)["bottleneck"]
    assert (b["component"], b["resource"], b["starts_at_users"]) == ("gunicorn", "worker_pool", 4)
    assert any("75% occupancy counts as full" in e for e in b["evidence"])


def test_queue_before_a_pool_on_a_host_neighbours_saturate_is_still_the_pool() -> None:
    # The app's own time stays flat: the CPU the neighbours took did not slow a request.
    ctx = Context(**{**CTX.__dict__, "workers": {"gunicorn": 4}})
    b = decide(queued_pool_steps(host_cpu=1.98), ctx)["bottleneck"]
    assert (b["component"], b["resource"]) == ("gunicorn", "worker_pool")


def test_queue_growing_no_faster_than_the_service_time_is_not_a_full_pool_below_the_mark() -> None:
    # The requests themselves take twice as long: the queue follows the service time.
    ctx = Context(**{**CTX.__dict__, "workers": {"gunicorn": 4}})
    steps = queued_pool_steps(app=20.0)
    for s in steps[2:]:
        s["tiers"]["gunicorn"]["queue_p50_ms"] = 8.0
    assert decide(steps, ctx)["bottleneck"]["resource"] != "worker_pool"


def test_a_neighbour_does_not_explain_workers_that_wait_rather_than_compute() -> None:
    # The same neighbour and growth, but the app's workers used 0.2 cores and waited for a
    # core 0.05 more between them, 8 at once: 0.03 of a core each. They wait on I/O; the
    # host's CPU cannot be what slows them.
    steps = neighbour_steps(pool_cpu=0.2, host_cpu=1.5)
    for s in steps:
        s["resources"]["gunicorn"]["cpu_wait_cores"] = 0.05
    v = decide(steps, ROOMY)
    assert v["bottleneck"] is not None
    assert (v["bottleneck"]["component"], v["bottleneck"]["resource"]) == ("app", "time")
    assert "neighbours" in [f["component"] for f in v["findings"]]
