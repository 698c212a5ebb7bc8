"""A stack already past its knee at the lightest step: the knee and the bottleneck read
"at or below" that load, and a scalability fit that explains nothing is not printed."""

from __future__ import annotations

from pinchpoint.analyze import _curve
from pinchpoint.report.summary import curve


def _step(users: int, rps: float) -> dict:
    return {"users": users, "level": users, "kind": "users", "throughput_rps": rps,
            "latency_ms": {"p50": users / rps * 1000}}  # fmt: skip


def test_a_flat_throughput_from_the_first_step_puts_the_knee_at_or_below_it() -> None:
    steps = [_step(u, rps) for u, rps in ((2, 196.0), (4, 199.0), (6, 197.0), (8, 198.0))]
    result = _curve(steps)
    knee = result["knee"]
    assert knee is not None and knee["ci_low"] <= 2
    assert knee["at_lowest_load"] is True
    lines = curve({**result, "steps": steps})
    assert lines[0].startswith("Knee at or below 2 users, the lowest load tested")
    assert "start lower" in lines[0]


def test_a_knee_between_steps_is_not_at_the_lowest_load() -> None:
    steps = [_step(u, rps) for u, rps in ((1, 100.0), (2, 198.0), (3, 290.0), (5, 300.0),
                                          (7, 301.0), (9, 299.0))]  # fmt: skip
    knee = _curve(steps)["knee"]
    assert knee is not None and 2 < knee["load"] < 5
    assert "at_lowest_load" not in knee


def test_a_scalability_fit_with_a_low_r_squared_is_not_read_as_a_prediction() -> None:
    usl = {"sigma": 0.4, "kappa": 0.01, "peak_throughput": 210.0, "peak_load": 4.0,
           "r_squared": 0.34, "lambda": 100.0, "rms_relative_error": 0.2}  # fmt: skip
    lines = curve({"scalability": usl, "steps": []})
    assert lines == ["Scalability (USL): the law does not fit these steps (R² 0.34); no prediction"]


def test_a_knee_at_one_user_asks_for_an_arrival_rate_not_fewer_users() -> None:
    steps = [_step(u, rps) for u, rps in ((1, 196.0), (3, 199.0), (5, 197.0), (7, 198.0))]
    result = _curve(steps)
    lines = curve({**result, "steps": steps})
    assert lines[0].startswith("Knee at or below 1 user, the lowest load tested")
    assert "start lower" not in lines[0]
    assert "an arrival rate below" in lines[0] and "open-loop" in lines[0]
