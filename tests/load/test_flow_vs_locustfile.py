"""The same journey as an engine flow and as a locustfile, against the same stack at the
same time (the locustfile's run in a `pinchpoint run` of its own, each run matching
only its own tagged requests in the shared logs): the per-request tables agree
(throughput, and the time each tier spends on each named request), so either way of
loading a stack gives the same diagnosis. Side by side, a shared machine's noise falls
on both alike."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pinchpoint import pipeline
from pinchpoint.demo import DemoStack
from pinchpoint.demo.plan import component_lines
from pinchpoint.plan.model import parse_plan
from pinchpoint_lab.needs import nginx_missing

ROOT = Path(__file__).resolve().parents[2]
LOCUSTFILE = Path(__file__).parent / "data" / "shop_walk_locustfile.py"
LOAD = 'users = 3\nduration = "6s"\nwarmup = "2s"'
FLOW = """
[[flow]]
name = "shop"
feed = {{ file = {accounts}, per = "user" }}

[[flow.step]]
name = "login"
method = "POST"
path = "/api/login"
headers = {{ Content-Type = "application/json" }}
body = '{{"user": "${{user}}", "password": "${{password}}"}}'
capture = [{{ name = "token", json = "$.token" }}]
think_time = "20ms"

[[flow.step]]
name = "orders"
path = "/api/orders"
headers = {{ Authorization = "Bearer ${{token}}" }}
capture = [{{ name = "order", json = "$.orders[0].id" }}]
think_time = "20ms"

[[flow.step]]
name = "detail"
path = "/api/orders/${{order}}"
headers = {{ Authorization = "Bearer ${{token}}" }}
think_time = "20ms"

[[flow.step]]
name = "note"
method = "POST"
path = "/api/orders/${{order}}/notes"
headers = {{ Content-Type = "application/x-www-form-urlencoded" }}
body = "note=x"
think_time = "20ms"
"""


# Measures time, rates or CPU: runs alone, after the parallel part of the suite.
pytestmark = [
    pytest.mark.serial,
    pytest.mark.skipif(bool(nginx_missing()), reason=nginx_missing()),
]


# How long the locustfile's run takes to start its users (a Python child importing
# Locust): the flow's run starts this much later, so that their steps overlap.
LOCUST_START_S = 1.5


def _verdict_endpoints(runs: Path) -> list[dict]:
    (run_dir,) = runs.iterdir()
    return list(json.loads((run_dir / "verdict.json").read_text())["endpoints"])


def test_a_flow_and_its_locustfile_give_the_same_per_request_tables(tmp_path: Path) -> None:
    with DemoStack(tmp_path / "stack", workers=2) as stack:
        head = f'[target]\nurl = "{stack.url}"\n\n[load]\n{LOAD}\n'
        components = "\n".join(component_lines(stack.components())) + "\n"
        accounts = json.dumps(str(ROOT / "examples" / "accounts.csv"))
        locust_plan = tmp_path / "locust.toml"
        locust_plan.write_text(head + components)
        argv = [sys.executable, "-m", "pinchpoint", "run", str(locust_plan), "-q"]
        argv += ["--locustfile", str(LOCUSTFILE), "--runs-dir", str(tmp_path / "locust")]
        side = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(LOCUST_START_S)
            text = head + FLOW.format(accounts=accounts) + components
            flow = list(
                pipeline.execute(parse_plan(text, "flow.toml"), text, tmp_path / "flow").verdict[
                    "endpoints"
                ]
            )
            _, err = side.communicate(timeout=60)
        finally:
            side.kill()
        assert side.returncode == 0, err
        locust = _verdict_endpoints(tmp_path / "locust")
    assert [e["endpoint"] for e in flow] == [
        "shop/login",
        "shop/orders",
        "shop/detail",
        "shop/note",
    ]
    assert [e["endpoint"] for e in locust] == [
        "POST login",
        "GET orders",
        "GET detail",
        "POST note",
    ]
    for ours, theirs in zip(flow, locust, strict=True):
        assert [s["users"] for s in ours["steps"]] == [s["users"] for s in theirs["steps"]] == [3]
        for a, b in zip(ours["steps"], theirs["steps"], strict=True):
            where = f"{ours['endpoint']} at {a['users']} users"
            assert a["errors"] == b["errors"] == 0, where
            # 20 ms of think time dominates each request's few ms: the same rate either way.
            assert b["throughput_rps"] == pytest.approx(a["throughput_rps"], rel=0.25), where
            # The tiers' own times per request, at the same moments on the same stack. The
            # POSTs write to SQLite, whose one writer at a time makes their times bimodal
            # (waiting for the lock or not), so their medians may jump between the modes.
            writes = ours["endpoint"] in ("shop/login", "shop/note")
            slack, share = (2.0, 1.0) if writes else (1.0, 0.4)
            for tier in ("gunicorn", "app"):
                mine, its = a["tiers"][tier]["p50_ms"], b["tiers"][tier]["p50_ms"]
                assert abs(mine - its) <= max(slack, share * mine), f"{where}, {tier}: {mine} {its}"
