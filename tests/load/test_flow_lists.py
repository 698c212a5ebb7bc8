"""List variables on the demo app behind real nginx and gunicorn: a capture with
`pick = "all"`, its last value read by index, and a step sent once per value with
`foreach`; what the users asked for is read from nginx's own access log."""

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

PLAN = """
[target]
url = "URL"

[load]
users = 3
duration = "2s"
warmup = "0s"

[[flow]]
name = "shop"

[[flow.step]]
name = "list"
path = "/api/items?limit=5&offset=OFFSET"
capture = [{ name = "ids", json = "$.items[*].id", pick = "all" }]

[[flow.step]]
name = "last"
path = "/api/items/${ids[-1]}?last=1"

[[flow.step]]
name = "each"
path = "/api/items/${ids[i]}?each=1"
foreach = "ids"
check = { json = { "$.id" = { in = ["${ids[i]}"] } } }
"""


def _run(stack: DemoStack, tmp_path: Path, offset: int) -> tuple[pl.DataFrame, dict, str]:
    text = PLAN.replace("URL", stack.url).replace("OFFSET", str(offset))
    runs = tmp_path / f"runs{offset}"
    log = stack.nginx_access_log
    before = log.stat().st_size if log.exists() else 0
    outcome = pipeline.execute(parse_plan(text, "plan.toml"), text, runs)
    with log.open("rb") as f:
        f.seek(before)
        lines = f.read().decode()
    requests = pl.read_parquet(outcome.run_dir / files.REQUESTS)
    run = json.loads((outcome.run_dir / files.RUN).read_text())
    return requests, run, lines


def test_foreach_sends_a_step_per_value_and_an_index_reads_the_last(tmp_path: Path) -> None:
    with DemoStack(tmp_path / "stack", workers=2) as stack:
        requests, run, log = _run(stack, tmp_path, offset=0)
        empty, empty_run, empty_log = _run(stack, tmp_path, offset=1000)
    assert requests["error"].null_count() == requests.height, run["error_reasons"]
    walks = requests.filter(pl.col("endpoint") == 0).height
    each = Counter(int(i) for i in re.findall(r"GET /api/items/(\d+)\?each=1", log))
    last = Counter(int(i) for i in re.findall(r"GET /api/items/(\d+)\?last=1", log))
    assert walks > 20
    # Every walk asks for items 1 to 5 once each (a walk cut by the run's end, less).
    assert set(each) == {1, 2, 3, 4, 5}, each
    assert all(walks - 3 <= n <= walks for n in each.values()), (walks, each)
    assert set(last) == {5} and walks - 3 <= last[5] <= walks, last
    assert abs(requests.filter(pl.col("endpoint") == 2).height - 5 * walks) <= 15
    # An empty list: the foreach step is not sent, and reading its last value is a
    # failed capture that says why.
    assert empty.filter(pl.col("endpoint") != 0).height == 0
    assert "?each=1" not in empty_log and "?last=1" not in empty_log
    assert empty["error"].to_list() == ["capture"] * empty.height
    reasons = empty_run["error_reasons"]["capture"]
    assert any(
        "shop/list: capture json $.items[*].id: 0 values, none for ${ids[-1]}" in r for r in reasons
    ), reasons
