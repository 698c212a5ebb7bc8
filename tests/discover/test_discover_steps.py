"""The users init's plan steps through: as before where no pool is small, finer where one
is (a third of it at most), never more than 12 steps, and the plan's load under two
minutes; the plan's [load] parses and runs the same levels."""

from __future__ import annotations

import pytest

from pinchpoint.discover.plan_text import plan_text
from pinchpoint.discover.steps import BUDGET_S, MOST_STEPS, MOST_UPPER, steps_for
from pinchpoint.discover.tier import Tier
from pinchpoint.discover.walk import Discovery
from pinchpoint.plan.model import parse_plan


def _stack(slots: int | None = None, limit: int | None = None) -> list[Tier]:
    proxy = Tier("haproxy", "proxy", 10, limit=limit)
    return [proxy, Tier("gunicorn", "app_server", 11, slots=slots)]


def test_without_pools_the_steps_are_six_of_ten_seconds() -> None:
    steps = steps_for(_stack())
    assert (steps.users(), steps.duration_s, steps.finest) == ([1, 3, 5, 7, 9, 11], 10, None)


def test_a_proxy_limit_of_13_is_reached_in_steps_of_4_not_13() -> None:
    # HAProxy lets 13 requests through to an app of 33 slots: the pools' 2 × 33 used to
    # be stepped 1, 14, 27, ... with the limit's onset between the first two steps.
    steps = steps_for(_stack(slots=33, limit=13))
    assert steps.users() == [1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45]
    assert [u for u in steps.users() if u <= 13] == [1, 5, 9, 13]
    assert steps.count == MOST_STEPS
    assert steps.duration_s == 9 and steps.count * steps.duration_s <= BUDGET_S


@pytest.mark.parametrize("slots", [1, 2, 3, 4, 6, 9, 13, 20, 64, 128, 500])
def test_every_plan_reaches_past_its_smallest_pool_within_the_budget(slots: int) -> None:
    steps = steps_for(_stack(slots=slots))
    assert 6 <= steps.count <= MOST_STEPS
    assert steps.upper >= min(slots + 1, MOST_UPPER), steps
    assert steps.count * steps.duration_s <= BUDGET_S
    below = [u for u in steps.users() if u <= slots]
    assert len(below) >= min(3, slots), steps.users()


def test_the_plan_text_holds_the_finer_steps_and_parses() -> None:
    found = Discovery("http://127.0.0.1:8080/")
    found.tiers = _stack(slots=33, limit=13)
    found.calls = {"haproxy": ["gunicorn"], "gunicorn": []}
    text = plan_text(found)
    plan = parse_plan(text, "plan.toml")
    assert plan.load.step_users() == [1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45]
    assert sum(level.duration for level in plan.load.levels()) == 108
    assert "# Steps of 4: at most a third of its smallest pool or limit (13)" in text
