"""`find_knee`: the search's decisions on synthetic closed-loop curves, the plan option and
`--find-knee` text, and one search against a local server (one run folder, unique ids)."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from load_helpers import http_server

from pinchpoint.analyze.knee_search import Decision, Point, decide
from pinchpoint.analyze.thresholds import GROWTH_MIN_MS, GROWTH_SHARE
from pinchpoint.pipeline.knee_levels import search_knee
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import parse_plan
from pinchpoint.rundir.schemas import TIERS_SCHEMA

Curve = Callable[[int], Point]


def flat_after(knee: float, per_user: float = 90.0) -> Curve:
    """A closed loop without think time whose throughput grows linearly with the users up
    to `knee`, then stays flat; latency by Little's law, users / throughput."""

    def measure(users: int) -> Point:
        throughput = per_user * min(users, knee)
        return Point(users, throughput, users / throughput * 1000)

    return measure


def search(curve: Curve, lower: int, upper: int, max_levels: int = 12) -> tuple[list, Decision]:
    points: list[Point] = []
    decision = decide(points, lower, upper, max_levels)
    for _ in range(100):
        if decision.next_users is None:
            return points, decision
        points.append(curve(decision.next_users))
        decision = decide(points, lower, upper, max_levels)
    raise AssertionError("the search did not stop")


def step_plan_onset(curve: Curve, lower: int, upper: int) -> int | None:
    """Where the verdict of the full step plan (every user from lower to upper) sees
    latency start to grow."""
    base = curve(lower).latency_ms
    assert base is not None
    threshold = max(GROWTH_MIN_MS, GROWTH_SHARE * base)
    for users in range(lower, upper + 1):
        latency = curve(users).latency_ms
        if latency is not None and latency - base > threshold:
            return users
    return None


@pytest.mark.parametrize(
    ("knee", "lower", "upper"),
    [
        *[(2, 1, 16), (2.4, 1, 16), (3, 1, 16), (5, 1, 16), (7, 1, 32), (10, 1, 64)],
        *[(13, 2, 64), (20, 1, 100), (37, 4, 128), (50, 1, 128), (90, 1, 128), (250, 8, 400)],
    ],
)
def test_the_bracket_holds_the_knee_and_the_step_plans_onset(
    knee: float, lower: int, upper: int
) -> None:
    curve = flat_after(knee)
    points, decision = search(curve, lower, upper)
    assert decision.reason == "bracketed", decision.message
    assert decision.bracket is not None
    low, high = decision.bracket
    assert low <= knee <= high, decision.message
    onset = step_plan_onset(curve, lower, upper)
    assert onset is not None and low <= onset <= high
    users = [p.users for p in points]
    assert len(set(users)) == len(users), "a level runs once"
    assert all(lower <= u <= upper for u in users)
    assert len(users) <= 12
    assert len(users) < upper - lower + 1, "fewer levels than the step plan's steps"
    assert f"Knee between {low} and {high} users" in decision.message


def test_the_last_step_is_one_user_wide_at_small_loads() -> None:
    points, decision = search(flat_after(2.0), 1, 16)
    assert [p.users for p in points] == [1, 2, 4, 8, 3]
    assert decision.bracket == (2, 3)


def test_a_knee_on_a_level_is_its_low_end_despite_noise() -> None:
    # The demo's 2 workers: 2 users run at the peak, a little under twice 1 user's rate.
    measured = {1: (88.5, 11.3), 2: (176.0, 11.4), 4: (175.5, 22.8), 8: (174.0, 45.9)}
    measured[3] = (175.0, 17.1)

    def curve(users: int) -> Point:
        return Point(users, *measured[users])

    _, decision = search(curve, 1, 16)
    assert decision.bracket == (2, 3), decision.message


def test_a_level_slowed_by_a_busy_machine_is_not_the_knee() -> None:
    # 2 users' latency grew 31% (CPU taken by other work) but throughput still scaled.
    measured = {1: (66.0, 14.5), 2: (105.0, 19.0), 4: (126.0, 31.7), 8: (106.0, 75.0)}
    measured[3] = (120.0, 25.0)

    def curve(users: int) -> Point:
        return Point(users, *measured[users])

    points, decision = search(curve, 1, 16)
    assert [p.users for p in points] == [1, 2, 4, 8, 3]
    assert decision.bracket is not None
    # Peak throughput is 1.9 times 1 user's: the knee is below 2 users, 3 are saturated.
    assert decision.bracket == (1, 3), decision.message


def test_no_knee_in_range_stops_at_upper_and_says_so() -> None:
    points, decision = search(flat_after(1000), 1, 20)
    assert [p.users for p in points] == [1, 2, 4, 8, 16, 20]
    assert decision.reason == "no_knee"
    assert decision.bracket is None
    assert "No knee up to 20 users" in decision.message
    # Throughput that levels off just below upper, before latency grows 25%: said too.
    _, decision = search(flat_after(90), 1, 100)
    assert decision.reason == "no_knee"
    assert "levels off near 90 users" in decision.message


def test_never_more_than_max_levels() -> None:
    points, decision = search(flat_after(500), 1, 1000, max_levels=5)
    assert [p.users for p in points] == [1, 2, 4, 8, 16]
    assert decision.reason == "max_levels"
    # A knee found late stops refining at the limit, with the bracket it has.
    points, decision = search(flat_after(100), 1, 1000, max_levels=9)
    assert len(points) == 9
    assert decision.reason == "max_levels"
    assert decision.bracket is not None
    low, high = decision.bracket
    assert low <= 100 <= high


def test_latency_that_bends_while_throughput_still_grows_is_saturated() -> None:
    # With a long think time, throughput keeps growing well past where latency bends.
    def curve(users: int) -> Point:
        latency = 10.0 if users <= 6 else 10.0 + 4 * (users - 6)
        return Point(users, users / (latency + 1000) * 1000, latency)

    _, decision = search(curve, 1, 64)
    assert decision.reason == "bracketed"
    assert decision.bracket is not None
    assert decision.bracket[1] == step_plan_onset(curve, 1, 64) == 7


def test_noisy_measurements_still_bracket_the_knee() -> None:
    for seed in range(20):
        rng = random.Random(seed)
        exact = flat_after(12)

        def noisy(users: int, exact: Curve = exact, rng: random.Random = rng) -> Point:
            p = exact(users)
            assert p.latency_ms is not None
            return Point(
                users,
                p.throughput_rps * rng.uniform(0.97, 1.03),
                p.latency_ms * rng.uniform(0.97, 1.03),
            )

        _, decision = search(noisy, 1, 64)
        assert decision.bracket is not None, decision.message
        low, high = decision.bracket
        assert low <= 12 * 1.1 and high >= 12, (seed, decision.message)


def test_a_passing_disturbance_does_not_end_the_climb() -> None:
    exact = flat_after(20)

    def curve(users: int) -> Point:
        p = exact(users)
        assert p.latency_ms is not None
        if users == 4:  # the machine was busy with something else during this level
            return Point(users, p.throughput_rps * 0.6, p.latency_ms * 1.7)
        return p

    points, decision = search(curve, 1, 64)
    assert [p.users for p in points][:6] == [1, 2, 4, 8, 16, 32]
    assert decision.reason == "bracketed"
    assert decision.bracket is not None
    low, high = decision.bracket
    assert low <= 20 <= high


def test_a_first_level_without_responses_stops_the_search() -> None:
    points, decision = search(lambda users: Point(users, 0.0, None), 1, 16)
    assert len(points) == 1
    assert decision.reason == "no_responses"


def test_a_lower_bound_past_the_knee_is_said() -> None:
    _, decision = search(flat_after(2), 8, 64)
    assert decision.bracket is not None and decision.bracket[0] == 8
    assert "at or below 8 users" in decision.message


PLAN = """
[target]
url = "http://127.0.0.1:9"

[load]   # the steps
lower = 1
upper = 16
duration = "2s"

[[request]]
path = "/"
"""


def test_the_command_line_flag_turns_the_search_on_in_the_plan_object() -> None:
    plan = parse_plan(PLAN, "plan.toml")
    assert not plan.load.find_knee
    searched = plan.with_find_knee(PLAN, "plan.toml")
    assert searched.load.find_knee
    unchanged = {"find_knee"}
    assert searched.load.model_dump(exclude=unchanged) == plan.load.model_dump(exclude=unchanged)
    assert searched.target == plan.target and searched.request == plan.request
    assert not plan.load.find_knee, "the plan it came from is left as it was"
    assert searched.with_find_knee(PLAN, "plan.toml") is searched
    in_text = parse_plan(PLAN.replace("duration =", "find_knee = true\nduration ="))
    assert in_text.load == searched.load


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ('loop = "open"', "load.find_knee", "open loop"),
        ("upper = 1", "load.upper", "upper above lower"),
        ("users = 4", "load.find_knee", "set lower, upper and duration"),
    ],
)
def test_a_plan_that_cannot_search_names_the_line_and_field(
    change: str, field: str, says: str
) -> None:
    if change.startswith("users"):
        text = PLAN.replace("lower = 1\nupper = 16", change)
    elif change.startswith("upper"):
        text = PLAN.replace("upper = 16", change)
    else:
        text = PLAN.replace("duration =", f"{change}\nduration =")
    plan = parse_plan(text, "p.toml")
    with pytest.raises(PlanError, match=rf"p\.toml:\d+: {field}: --find-knee: .*{says}"):
        plan.with_find_knee(text, "p.toml")


def test_a_plan_text_that_cannot_search_names_the_field_too() -> None:
    text = PLAN.replace("upper = 16", "upper = 1\nfind_knee = true")
    with pytest.raises(PlanError, match=r"p\.toml:\d+: load\.upper: .*upper above lower"):
        parse_plan(text, "p.toml")


def test_find_knee_needs_a_step_plan_of_users() -> None:
    text = PLAN.replace("lower = 1\nupper = 16", "users = 4\nfind_knee = true")
    with pytest.raises(PlanError, match=r"load\.find_knee: .*set lower, upper and duration"):
        parse_plan(text, "p.toml")
    phases = """
[target]
url = "http://127.0.0.1:9"
[load]
find_knee = true
[[load.phase]]
duration = "2s"
arrival_rate = 5
[[request]]
path = "/"
"""
    with pytest.raises(PlanError, match=r"load\.find_knee: .*open loop"):
        parse_plan(phases, "p.toml")


def test_a_search_is_one_run_with_unique_request_ids(tmp_path: Path) -> None:
    with http_server() as (port, seen):
        plan = parse_plan(
            f"""
[target]
url = "http://127.0.0.1:{port}"
[load]
lower = 1
upper = 2
find_knee = true
duration = "0.6s"
warmup = "0.1s"
threads = 2
[[request]]
path = "/hello"
"""
        )
        ticks: list[dict] = []
        knee = search_knee(plan, "pytest-knee", tmp_path, on_tick=ticks.append)
        sent = seen.count()
    assert not (tmp_path / "levels").exists()
    requests = pl.read_parquet(tmp_path / "requests.parquet")
    assert requests.height == knee.load.rows == sent
    assert requests["req_id"].n_unique() == requests.height
    by_step = requests.group_by("step").agg(pl.col("users").unique()).sort("step")
    assert by_step["users"].to_list() == [[1], [2]]
    assert [s["users"] for s in knee.steps] == [1, 2]
    assert [s["step"] for s in knee.load.summary["steps"]] == [0, 1]
    record = knee.record
    assert [lv["users"] for lv in record["levels"]] == [1, 2]
    # The local server answers faster the more users there are: no knee up to upper.
    assert record["reason"] in ("no_knee", "bracketed"), record["summary"]
    offset = knee.offsets[2]
    assert offset == requests.filter(pl.col("users") == 1).height
    assert requests.filter(pl.col("users") == 2)["req_id"].min() == offset
    assert 0.9 < record["load_s"] < 2.5


def test_tier_records_follow_their_requests_ids(tmp_path: Path) -> None:
    from pinchpoint.collect.gather import TierWriter
    from pinchpoint.collect.logs.reader import TierRow

    rows = [
        TierRow("nginx", 1, 0, 1.0, 0.01, None, 200),
        TierRow("nginx", 4, 0, 2.0, 0.02, 0.01, 200),
        TierRow("app", 4, 3, 2.0, 0.02, None, 200),
        TierRow("nginx", 2, None, 3.0, 0.03, None, 200),
    ]
    path = tmp_path / "tiers.parquet"
    with TierWriter(path, group_rows=2, req_id_offsets={1: 0, 4: 100}) as writer:
        writer.add(rows)
    after = pq.read_table(path)
    assert after.schema == TIERS_SCHEMA
    assert after["req_id"].to_pylist() == [0, 100, 103, None]


def test_run_with_find_knee_on_an_open_loop_plan_names_the_field(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN.replace("duration = ", 'loop = "open"\nduration = '))
    done = subprocess.run(
        [sys.executable, "-m", "pinchpoint", "run", str(plan), "--find-knee"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--find-knee" in done.stderr and "load.find_knee" in done.stderr
    assert "open loop" in done.stderr
    assert not (tmp_path / "runs").exists(), "no load was sent"
