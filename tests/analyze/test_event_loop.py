"""An event loop is no pool: blocked by a synchronous call when it serves about one request
a loop with no CPU, one core when it computes; more workers are never the advice for the
first, and the second is said in the server's own terms."""

from __future__ import annotations

from pinchpoint.analyze.causes.cause import Ask
from pinchpoint.analyze.causes.event_loop import blocked_loop
from pinchpoint.analyze.context import Context

CTX = Context(
    order=["nginx", "api"], calls={"nginx": ["api"], "api": []}, workers={},
    cpu_count=2, generator_threads=1, roles={"nginx": "proxy", "api": "app_server"},
)  # fmt: skip


def _step(users: int, cpu: float, p50_ms: float, server: str = "uvicorn") -> dict:
    host = cpu + 0.05
    return {
        "users": users, "level": float(users), "kind": "users",
        "throughput_rps": 90.0, "latency_ms": {"p50": p50_ms},
        "tiers": {"nginx": {"p50_ms": p50_ms, "concurrency": users},
                  "api": {"p50_ms": p50_ms, "concurrency": users}},
        "resources": {
            "api": {"cpu_cores": cpu, "cpu_wait_cores": 0.02, "processes": 1,
                    "pool_kind": "async", "pool_server": server},
            "nginx": {"cpu_cores": 0.02, "processes": 2},
            "host": {"cpu_cores": host},
        },
    }  # fmt: skip


def _ask(steps: list[dict], at_once: float) -> Ask:
    estimate = {"workers": at_once, "peak_throughput_rps": 90.0, "min_latency_ms": 11.0}
    return Ask("api", steps, steps[1], CTX, estimate, "api")


def test_a_loop_serving_one_at_a_time_without_cpu_is_blocked() -> None:
    steps = [_step(1, 0.05, 11.0), _step(3, 0.06, 33.0), _step(9, 0.06, 99.0)]
    found = blocked_loop(_ask(steps, at_once=1.0))
    assert found is not None
    assert (found.component, found.resource, found.starts_at_users) == ("api", "event_loop", 3)
    assert "await the call" in found.summary and "Add workers" not in found.summary


def test_a_loop_holding_several_requests_at_once_is_not_blocked() -> None:
    steps = [_step(1, 0.05, 11.0), _step(3, 0.06, 12.0), _step(9, 0.06, 14.0)]
    assert blocked_loop(_ask(steps, at_once=6.0)) is None


def test_a_node_loop_computing_a_core_beside_an_idle_one_is_told_in_nodes_terms() -> None:
    steps = [
        _step(1, 0.95, 6.0, "node"),
        _step(3, 0.97, 20.0, "node"),
        _step(7, 0.98, 46.0, "node"),
    ]
    found = blocked_loop(_ask(steps, at_once=1.0))
    assert found is not None
    assert (found.resource, found.name) == ("cpu", "api's event loop (1, one core each)")
    assert "Node's cluster workers" in found.summary and "worker_threads" in found.summary
    assert "up to 2" in found.summary


def test_a_loop_computing_on_a_full_host_is_left_to_the_cpu() -> None:
    steps = [_step(1, 0.95, 6.0), _step(3, 0.97, 20.0), _step(7, 0.98, 46.0)]
    for step in steps:
        step["resources"]["host"]["cpu_cores"] = 1.95
    assert blocked_loop(_ask(steps, at_once=1.0)) is None
