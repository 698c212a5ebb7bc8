"""The named request that carries the bottleneck's work is charged its own time in the
component's tiers times its calls, never the median request's."""

from __future__ import annotations

from pinchpoint.analyze.carrier import carrying_request
from pinchpoint.analyze.context import Context

STEPS = [{"users": 9, "level": 9.0, "resources": {"gunicorn": {"cpu_cores": 1.9}}}]


def _ctx(costs: dict[str, tuple[int, float]]) -> Context:
    """A journey whose requests cost the app (inside gunicorn) these (calls, ms) each."""
    endpoints = [
        {
            "endpoint": name,
            "steps": [
                {
                    "level": 9.0,
                    "requests": calls,
                    "tiers": {
                        "gunicorn": {"self_p50_ms": 0.05, "queue_p50_ms": 30.0},
                        "app": {"self_p50_ms": ms},
                    },
                }
            ],
        }
        for name, (calls, ms) in costs.items()
    ]
    return Context(
        order=["nginx", "gunicorn", "app"],
        calls={"nginx": ["gunicorn"], "gunicorn": ["app"]},
        workers={},
        cpu_count=2,
        generator_threads=1,
        endpoints=endpoints,
    )


def test_a_login_that_hashes_carries_the_app_servers_cpu() -> None:
    ctx = _ctx({"home": (100, 3.0), "login": (100, 45.0), "item": (100, 4.0), "cart": (100, 2.5)})
    found = carrying_request("gunicorn", STEPS, ctx)
    assert found is not None
    assert found.name == "login"
    assert round(found.share, 2) == round(45.05 / (45.05 + 3.05 + 4.05 + 2.55), 2)
    assert round(found.others_ms, 2) == round((3.05 + 4.05 + 2.55) / 3, 2)
    assert "login carries 82% of gunicorn's work at 9 users" in found.line(STEPS[0])


def test_requests_that_cost_alike_carry_nothing_alone() -> None:
    # The queue before gunicorn, not the app's own time, is what grew: it is no request's.
    assert carrying_request("gunicorn", STEPS, _ctx({"a": (100, 5.0), "b": (100, 6.0)})) is None


def test_a_heavy_request_seldom_called_is_not_the_one_that_carries_the_work() -> None:
    # 10 calls of 40 ms against 300 of 3 ms: 31% of the work, though the costliest per call.
    ctx = _ctx({"report": (10, 40.0), "home": (150, 3.0), "item": (150, 3.0)})
    assert carrying_request("gunicorn", STEPS, ctx) is None


def test_one_request_alone_is_not_singled_out() -> None:
    assert carrying_request("gunicorn", STEPS, _ctx({"only": (100, 40.0)})) is None
