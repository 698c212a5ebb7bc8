"""Neighbours at low priority (a positive nice value) fill the cores a stack leaves idle
and hand each one over as soon as a tier's thread wants it: the host reads busy, but its
CPU limits nothing, and a pool of waiting workers beside them is still the pool."""

from __future__ import annotations

from test_verdict_rules import CTX, step

from pinchpoint.analyze.verdict import decide


def niced_pool_steps(nice: float | None) -> list[dict]:
    """Two workers busy from 2 users, requests waiting for them from 4, on a host that reads 2 of its 2 cores busy: the
    pool's processes used 0.9 cores and waited for 0.5 more between them, the generator
    0.05, and processes outside the stack the rest (at low priority when `nice` is given)."""
    steps = [
        step(1, 10.5, host_cpu=2.0),
        step(2, 10.6, queue=0.3, host_cpu=2.0),
        step(4, 21.0, queue=10.5, concurrency=1.95, pool_cpu=0.9, host_cpu=2.0),
        step(8, 42.0, queue=31.5, concurrency=1.97, pool_cpu=0.9, host_cpu=2.0),
    ]
    for s in steps:
        resources = s["resources"]
        resources["gunicorn"]["cpu_wait_cores"] = 0.5
        if nice is not None:
            used = resources["gunicorn"]["cpu_cores"] + resources["generator"]["cpu_cores"]
            resources["host"]["cpu_nice_cores"] = min(nice, 2.0 - used)
    return steps


def test_a_full_pool_beside_niced_neighbours_is_the_pool_of_waiting_workers() -> None:
    v = decide(niced_pool_steps(nice=2.0), CTX)
    b = v["bottleneck"]
    assert (b["component"], b["resource"], b["starts_at_users"]) == ("gunicorn", "worker_pool", 4)
    assert "workers themselves mostly wait" in b["summary"]
    assert any(
        "processes at low priority (nice) used 1.05 more cores at 8 users" in e
        for e in b["evidence"]
    ), b["evidence"]
    assert any("held, not counted" in e for e in b["evidence"]), b["evidence"]
    # They gave the cores up at once: they took nothing from the stack.
    assert "neighbours" not in [f["component"] for f in v["findings"]]


def test_the_same_host_with_neighbours_at_normal_priority_is_the_cpu() -> None:
    # Neighbours that compete for the cores: the workers' wait for one is their need.
    b = decide(niced_pool_steps(nice=None), CTX)["bottleneck"]
    assert (b["component"], b["resource"]) == ("gunicorn", "cpu")


def test_niced_cpu_of_the_stack_itself_is_not_a_neighbours() -> None:
    # The stack's own processes run niced and fill the host: nothing outside yields.
    steps = niced_pool_steps(nice=None)
    for s in steps[2:]:
        s["resources"]["gunicorn"]["cpu_cores"] = 1.95
        s["resources"]["host"]["cpu_nice_cores"] = 1.95
    b = decide(steps, CTX)["bottleneck"]
    assert (b["component"], b["resource"]) == ("gunicorn", "cpu")
    assert not any("low priority" in e for e in b["evidence"]), b["evidence"]
