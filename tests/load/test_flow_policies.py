"""Captures that pick at random, checks that compare numbers, and what a user does when a
check fails, against the demo app behind real nginx and gunicorn: which items the users
asked for is read from nginx's own access log."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from pinchpoint import pipeline
from pinchpoint.demo import DemoStack
from pinchpoint.plan.model import parse_plan
from pinchpoint.rundir import files
from pinchpoint_lab.needs import nginx_missing

pytestmark = pytest.mark.skipif(bool(nginx_missing()), reason=nginx_missing())

# Items 1..20 of the demo's list; their prices are 1 + (37 i mod 1000) / 10, about half
# of them below 50.
PLAN = """
[target]
url = "URL"

[load]
users = 4
duration = "3s"
warmup = "0s"
seed = SEED

[[flow]]
name = "shop"

[[flow.step]]
name = "list"
path = "/api/items?limit=20"
capture = [{ name = "item", json = "$.items[*].id", pick = "random" }]
check = { status = 200, json = { "$.items" = { len = 20 } }, header = { Content-Type = "application/json" } }

[[flow.step]]
name = "detail"
path = "/api/items/${item}"
check = { json = { "$.price" = { gt = 0, lt = LIMIT }, "$.id" = { in = ["${item}"] } } } ON_FAIL

[[flow.step]]
name = "again"
path = "/api/items/${item}?again=1"
check = { status = 200, max_ms = 5000 }
"""
PRICES = {i: 1 + (i * 37 % 1000) / 10 for i in range(1, 21)}


def _run(tmp_path: Path, limit: float, on_fail: str | None, seed: int = 7) -> dict:
    with DemoStack(tmp_path / "stack", workers=2) as stack:
        text = (
            PLAN.replace("URL", stack.url)
            .replace("SEED", str(seed))
            .replace("LIMIT", repr(limit))
            .replace(" ON_FAIL", f'\non_fail = "{on_fail}"' if on_fail else "")
        )
        outcome = pipeline.execute(parse_plan(text, "plan.toml"), text, tmp_path / "runs")
        log = stack.nginx_access_log.read_text()
    requests = pl.read_parquet(outcome.run_dir / files.REQUESTS)
    run = json.loads((outcome.run_dir / files.RUN).read_text())
    asked = Counter(int(i) for i in re.findall(r"GET /api/items/(\d+)\?pp_run=", log))
    again = Counter(int(i) for i in re.findall(r"GET /api/items/(\d+)\?again=1", log))
    by_step = {e: requests.filter(pl.col("endpoint") == e) for e in range(3)}
    return {"requests": requests, "run": run, "asked": asked, "again": again, "by": by_step}


def test_a_random_pick_spreads_the_users_over_the_list_and_every_check_passes(
    tmp_path: Path,
) -> None:
    got = _run(tmp_path, limit=1000.0, on_fail=None)
    requests, asked = got["requests"], got["asked"]
    assert requests["error"].null_count() == requests.height, got["run"]["error_reasons"]
    details = got["by"][1].height
    assert details > 100
    # Every item of the list is asked for, none far more than its share.
    assert set(asked) == set(range(1, 21)), asked
    assert max(asked.values()) < 3 * details / 20
    # The third step asks for the item the second did: the same picks, in the same order.
    assert sum(got["again"].values()) >= details - 4


def test_a_failed_numeric_check_restarts_the_flow_by_default(tmp_path: Path) -> None:
    got = _run(tmp_path, limit=50.0, on_fail=None)
    detail, again = got["by"][1], got["by"][2]
    failed = detail.filter(pl.col("error") == "check")
    cheap = sum(1 for p in PRICES.values() if p < 50) / len(PRICES)
    assert abs(failed.height / detail.height - (1 - cheap)) < 0.1
    # After a failed check the user starts again: no third step for an item at 50 or more.
    assert set(got["again"]) <= {i for i, p in PRICES.items() if p < 50}, got["again"]
    assert abs(again.height - (detail.height - failed.height)) <= 4
    reasons = got["run"]["error_reasons"]["check"]
    assert any(re.search(r"check json \$\.price: [\d.]+ is not < 50", r) for r in reasons), reasons


def test_continue_goes_on_after_a_failed_check(tmp_path: Path) -> None:
    got = _run(tmp_path, limit=50.0, on_fail="continue")
    detail, again = got["by"][1], got["by"][2]
    assert detail.filter(pl.col("error") == "check").height > 10
    assert abs(again.height - detail.height) <= 4
    assert any(PRICES[i] >= 50 for i in got["again"])


def test_stop_user_ends_a_user_at_its_first_failed_check(tmp_path: Path) -> None:
    got = _run(tmp_path, limit=50.0, on_fail="stop_user")
    detail = got["by"][1]
    failed = detail.filter(pl.col("error") == "check")
    # Each of the 4 users stops at its first dear item (about one walk in two): at most 4
    # fail, and the users sent a few walks each instead of 3 s of them.
    assert 1 <= failed.height <= 4
    assert detail.height < 40
    if failed.height == 4:  # every user stopped: nothing was sent after the last failure
        last = failed["start_us"].max()
        assert got["requests"].filter(pl.col("start_us") > last).height == 0
