"""The knee of throughput and latency by load, on synthetic and recorded steps."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pinchpoint.analyze.knee import find_knee

RUNS = Path(__file__).parent.parent / "data" / "runs"
USERS = np.arange(1, 13, dtype=float)


def saturating(seed: int, noise: float, knee: float | None) -> tuple[np.ndarray, ...]:
    """A closed loop with 10 ms per request that stops scaling at `knee` users: throughput
    with seeded relative noise, latency by Little's law from the noisy throughput."""
    rng = np.random.default_rng(seed)
    capacity = USERS if knee is None else np.minimum(USERS, knee)
    throughput = 100 * capacity * (1 + rng.normal(0, noise, USERS.size))
    return USERS, throughput, 1000 * USERS / throughput


def recorded(name: str) -> tuple[list[float], ...]:
    steps = json.loads((RUNS / name / "verdict.json").read_text())["steps"]
    return (
        [s["users"] for s in steps],
        [s["throughput_rps"] for s in steps],
        [s["latency_ms"]["p50"] for s in steps],
    )


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_known_knee_is_found_within_a_step_and_inside_its_interval(seed: int) -> None:
    knee = find_knee(*saturating(seed, 0.03, knee=6))
    assert knee is not None
    assert knee.load == pytest.approx(6, abs=1)
    assert knee.ci_low <= 6 <= knee.ci_high
    assert knee.ci_low <= knee.load <= knee.ci_high
    assert knee.ci_high - knee.ci_low < 2
    assert knee.confidence > 0.9
    assert knee.throughput_at_knee == pytest.approx(600, rel=0.05)


def test_noise_free_knee_is_exact() -> None:
    knee = find_knee(*saturating(0, 0.0, knee=6))
    assert knee is not None
    assert knee.load == pytest.approx(6, abs=0.05)
    assert knee.throughput_at_knee == pytest.approx(600, rel=0.01)
    assert knee.confidence == pytest.approx(1.0, abs=0.01)


def test_linear_throughput_with_flat_latency_has_no_knee() -> None:
    assert find_knee(USERS, 100 * USERS, np.full(USERS.size, 10.0)) is None
    assert find_knee(*saturating(0, 0.03, knee=None)) is None


@pytest.mark.parametrize("seed", range(10))
def test_ten_percent_noise_does_not_make_a_knee(seed: int) -> None:
    assert find_knee(*saturating(seed, 0.10, knee=None)) is None
    rng = np.random.default_rng(seed)
    throughput = 100 * USERS * (1 + rng.normal(0, 0.10, USERS.size))
    latency = 10 * (1 + rng.normal(0, 0.10, USERS.size))
    assert find_knee(USERS, throughput, latency) is None


def test_fewer_than_three_steps_have_no_knee() -> None:
    assert find_knee([1, 2], [100, 200], [10, 10]) is None
    assert find_knee([], [], []) is None
    # Steps without a number do not count.
    assert find_knee([1, 2, 3], [100, 200, None], [10, 10, 15]) is None


def test_three_steps_can_show_a_knee() -> None:
    knee = find_knee([1, 2, 3], [100, 200, 200], [10, 10, 15])
    assert knee is not None
    assert knee.load == pytest.approx(2, abs=0.1)


def test_throughput_flat_from_the_first_step_puts_the_knee_there() -> None:
    knee = find_knee([2, 4, 6, 8], [200, 200, 201, 199], [10, 20, 30, 40])
    assert knee is not None
    assert knee.load == pytest.approx(2, abs=0.1)


def test_order_of_steps_does_not_matter_and_results_repeat() -> None:
    load, throughput, latency = saturating(7, 0.03, knee=6)
    order = np.random.default_rng(0).permutation(load.size)
    first = find_knee(load, throughput, latency)
    assert first == find_knee(load[order], throughput[order], latency[order])
    assert first == find_knee(load, throughput, latency)


def test_two_worker_recorded_run_has_its_knee_near_two_users() -> None:
    knee = find_knee(*recorded("demo-pool2"))
    assert knee is not None
    # 2 workers × ~10.5 ms per request: ~190 req/s, reached by 2 users of 1 request each.
    assert 2 <= knee.load <= 3
    assert knee.ci_low <= knee.load <= knee.ci_high
    assert knee.throughput_at_knee == pytest.approx(185, rel=0.05)
    assert knee.confidence > 0.9


def test_healthy_recorded_run_has_no_knee() -> None:
    assert find_knee(*recorded("demo-healthy24")) is None
