"""`pinchpoint demo --find-knee` on the real demo stack: the verdict of the step plan (see
test_demo_verdict.py) from a fraction of its steps."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from pinchpoint.plan.model import parse_plan

# Times a stack that waits more than it computes: one at a time, beside the parallel part.
pytestmark = pytest.mark.timed

LOWER, UPPER, SECONDS = 1, 16, 2.0
# The step plan over the same range, one user at a time.
RANGE = ["-l", str(LOWER), "-u", str(UPPER), "-s", "1", "-t", f"{SECONDS:g}"]
# What ending a step adds to its measured length, at most (8 steps read 16.015 s).
STEP_END_S = 0.05


@pytest.fixture(scope="module")
def search(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs_dir = tmp_path_factory.mktemp("runs")
    argv = [sys.executable, "-m", "pinchpoint", "demo", *RANGE, "--workers", "2", "--find-knee"]
    done = subprocess.run(
        [*argv, "--runs-dir", str(runs_dir), "--quiet"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Find knee: Knee between" in done.stdout, done.stdout[-3000:]
    [run_dir] = list(runs_dir.iterdir())
    return run_dir


def test_the_search_names_the_worker_pool_from_within_its_bracket(search: Path) -> None:
    verdict = json.loads((search / "verdict.json").read_text())
    run = json.loads((search / "run.json").read_text())
    b = verdict["bottleneck"]
    assert b is not None, verdict["headline"]
    assert (b["component"], b["resource"]) == ("gunicorn", "worker_pool"), verdict["headline"]
    knee = run["find_knee"]
    assert knee["reason"] == "bracketed", knee["summary"]
    low, high = knee["bracket"]
    # With 2 workers and ~10 ms per request, 3 users already wait for a worker.
    assert low <= b["starts_at_users"] <= high <= 5, knee["summary"]
    assert "find_knee = true" in (search / "plan.toml").read_text()


def test_it_ran_a_fraction_of_the_step_plan(search: Path) -> None:
    run = json.loads((search / "run.json").read_text())
    text = (search / "plan.toml").read_text().replace("find_knee = true", "step = 1")
    step_plan = parse_plan(text).load.levels()
    assert len(step_plan) == UPPER - LOWER + 1
    users = [s["users"] for s in run["steps"]]
    assert users == sorted(users) and len(set(users)) == len(users)
    assert len(users) <= len(step_plan) / 2
    full_load_s = sum(level.duration for level in step_plan)
    ran_s = sum(level.duration for level in step_plan if level.users in users)
    assert ran_s <= full_load_s / 2
    # Each step it ran lasted its length, and the few milliseconds it takes to end one.
    assert run["find_knee"]["load_s"] <= ran_s + STEP_END_S * len(users)
    # Steps are numbered by users; `order` is the order they ran in.
    assert [s["step"] for s in run["steps"]] == list(range(len(users)))
    assert sorted(s["order"] for s in run["steps"]) == list(range(len(users)))
    assert [s["order"] for s in run["steps"]] != list(range(len(users))), "it refined"


def test_every_tier_record_joins_its_request_across_levels(search: Path) -> None:
    requests = pl.read_parquet(search / "requests.parquet")
    tiers = pl.read_parquet(search / "tiers.parquet")
    assert requests["req_id"].n_unique() == requests.height
    answered = requests.filter(pl.col("status") == 200).select("req_id", "users")
    for name in ("nginx", "gunicorn", "app"):
        logged = tiers.filter(pl.col("component") == name).select("req_id", "users")
        assert logged.sort("req_id").equals(answered.sort("req_id")), name
    verdict = json.loads((search / "verdict.json").read_text())
    for step in verdict["steps"]:
        assert step["tiers"]["nginx"]["count"] <= step["requests"]
