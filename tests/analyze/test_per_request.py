"""The one named request whose time grows while the others stay flat is named first."""

from __future__ import annotations

import pytest

from pinchpoint.analyze.per_request import growing_request
from pinchpoint.analyze.verdict import Context, decide

CTX = Context(
    order=["nginx", "gunicorn", "app"],
    calls={"nginx": ["gunicorn"], "gunicorn": ["app"]},
    workers={},
    cpu_count=2,
    generator_threads=1,
)
USERS = (1, 4, 7, 10, 13)


def _request_step(users: int, p50: float, rps: float, app_ms: float | None = None) -> dict:
    return {
        "users": users,
        "level": users,
        "requests": int(rps * 2),
        "throughput_rps": rps,
        "p50_ms": p50,
        "concurrency": rps * p50 / 1000,
        "tiers": {
            "nginx": {"self_p50_ms": 0.1, "p50_ms": p50 - 0.1},
            "gunicorn": {"self_p50_ms": 0.1, "queue_p50_ms": 0.1, "p50_ms": p50 - 0.2},
            "app": {"self_p50_ms": app_ms if app_ms is not None else p50 - 0.3},
        },
    }


def _entry(name: str, steps: list[dict], min_ms: float) -> dict:
    peak = max(steps, key=lambda s: s["throughput_rps"])
    rising = steps[-1]["p50_ms"] > 2 * steps[0]["p50_ms"]
    return {
        "endpoint": name,
        "steps": steps,
        "min_latency_ms": min_ms,
        "workers": peak["throughput_rps"] * min_ms / 1000,
        "peak_throughput_rps": peak["throughput_rps"],
        "behaviour": "synchronous" if rising else "asynchronous",
    }


def _journey() -> tuple[list[dict], list[dict]]:
    """Five cheap requests at ~1 ms and a checkout that holds a lock 12.8 ms: its throughput
    stops at ~78/s, so its p50 grows 13 → 199 ms while the others stay flat."""
    checkout_p50 = {1: 13.0, 4: 40.0, 7: 90.0, 10: 150.0, 13: 199.0}
    checkout_rps = {1: 70.0, 4: 77.0, 7: 78.0, 10: 78.0, 13: 78.0}
    endpoints = [
        _entry(name, [_request_step(n, 1.0 + 0.02 * n, checkout_rps[n]) for n in USERS], 0.9)
        for name in ("POST login", "GET list", "GET detail", "POST cart", "GET order")
    ]
    checkout = [_request_step(n, checkout_p50[n], checkout_rps[n]) for n in USERS]
    endpoints.insert(4, _entry("POST checkout", checkout, 12.8))
    steps = []
    for n in USERS:
        rps = 6 * checkout_rps[n]
        mean = (5 * (1.0 + 0.02 * n) + checkout_p50[n]) / 6
        steps.append(
            {
                "users": n,
                "throughput_rps": rps,
                "latency_ms": {
                    "p50": 1.2 - 0.01 * n,
                    "p95": checkout_p50[n],
                    "p99": checkout_p50[n],
                },
                "latency_mean_ms": mean,
                "tiers": {
                    "nginx": {"self_p50_ms": 0.1, "p50_ms": 1.1},
                    "gunicorn": {
                        "self_p50_ms": 0.1,
                        "queue_p50_ms": 0.1,
                        "p50_ms": 1.0,
                        "concurrency": rps * mean / 1000,
                    },
                    "app": {"self_p50_ms": 0.9, "p50_ms": 0.9},
                },
                "resources": {
                    "host": {"cpu_cores": 0.6},
                    "gunicorn": {"cpu_cores": 0.3, "processes": 5, "cpu_wait_cores": 0.01},
                    "generator": {"cpu_cores": 0.1},
                },
            }
        )
    return endpoints, steps


def test_one_serialized_request_in_a_journey_is_named_with_its_tier() -> None:
    endpoints, steps = _journey()
    ctx = Context(**{**CTX.__dict__, "endpoints": endpoints})
    v = decide(steps, ctx)
    b = v["bottleneck"]
    assert b is not None
    assert (b["component"], b["resource"], b["request"]) == (
        "gunicorn",
        "serialized",
        "POST checkout",
    )
    assert b["starts_at_users"] == 4
    assert v["headline"].startswith("Bottleneck: POST checkout: serialized inside gunicorn")
    assert any(
        "about 1.0 at once" in v["headline"] or "1.00 served at once" in e for e in b["evidence"]
    )


def test_a_request_that_grows_with_all_the_others_is_not_singled_out() -> None:
    endpoints, _ = _journey()
    for entry in endpoints:
        for s in entry["steps"]:
            s["p50_ms"] += 3.0 * s["users"]
    assert growing_request(endpoints) is None


def test_a_busy_host_slowing_every_request_a_little_does_not_hide_the_one_that_grows() -> None:
    # As runs beside a hog or the parallel tests saw it: the others (10 ms each here) 40%
    # slower at the heaviest step, the serialized checkout 15 times its lightest time.
    endpoints, steps = _journey()
    for entry in endpoints:
        if entry["endpoint"] != "POST checkout":
            for s in entry["steps"]:
                s["p50_ms"] = 10.0
            entry["steps"][-1]["p50_ms"] = 14.0
    grown = growing_request(endpoints)
    assert grown is not None and grown.name == "POST checkout"
    assert grown.others_growth == pytest.approx(0.4)
    ctx = Context(**{**CTX.__dict__, "endpoints": endpoints})
    b = decide(steps, ctx)["bottleneck"]
    assert (b["resource"], b["request"]) == ("serialized", "POST checkout")
    assert any("its median grew 40% at most, this one's 1431%" in e for e in b["evidence"])
    # One other request growing a third as fast as the checkout is no longer flat beside it.
    endpoints[0]["steps"][-1]["p50_ms"] = 10.0 * (1 + 14.31 / 3 + 0.1)
    assert growing_request(endpoints) is None


def test_a_single_request_plan_has_no_one_request_to_single_out() -> None:
    endpoints, _ = _journey()
    assert growing_request(endpoints[4:5]) is None


def test_a_request_waiting_on_a_locked_row_below_is_named_for_the_lock() -> None:
    # The same journey, but checkout's one-at-a-time is a hot row in PostgreSQL, whose
    # backends wait for it: the lock below is the cause, not the app.
    endpoints, steps = _journey()
    for s, waits in zip(steps, (0.0, 0.6, 1.5, 3.0, 4.0), strict=True):
        s["resources"]["postgres"] = {"cpu_cores": 0.05, "processes": 6, "lock_waits": waits}
    ctx = Context(
        **{
            **CTX.__dict__,
            "order": [*CTX.order, "postgres"],
            "calls": {**CTX.calls, "app": ["postgres"]},
            "endpoints": endpoints,
        }
    )
    b = decide(steps, ctx)["bottleneck"]
    assert (b["component"], b["resource"], b["request"]) == ("postgres", "db_lock", "POST checkout")
