"""Open-loop and staged closed-loop plans run on the engine from Python: phases, the
rate in the tag, the coordinated-omission columns, late and unsent counts, run.json steps."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from load_helpers import http_server

from pinchpoint.load.engine import run_steps, step_windows
from pinchpoint.logformats.tag import find_tag, parse_header
from pinchpoint.plan.model import parse_plan

# Times a stack that waits more than it computes: one at a time, beside the parallel part.
pytestmark = [pytest.mark.timed, pytest.mark.timeout(60)]


def open_plan(port: int, phases: str, extra: str = "") -> str:
    return f"""
[target]
url = "http://127.0.0.1:{port}"

[load]
warmup = "0s"
threads = 2
{extra}

{phases}

[[request]]
path = "/a"
weight = 3

[[request]]
path = "/b?x=1"
"""


PHASES = """
[[load.phase]]
name = "steady"
duration = "1s"
arrival_rate = 60

[[load.phase]]
name = "rest"
pause = "0.5s"

[[load.phase]]
name = "burst"
duration = "0.5s"
arrival_count = 20

[[load.phase]]
name = "ramp"
duration = "1s"
arrival_rate = 20
ramp_to = 40
"""


def test_open_loop_phases_run_as_scheduled(tmp_path: Path) -> None:
    with http_server() as (port, seen):
        plan = parse_plan(open_plan(port, PHASES, 'arrivals = "uniform"'), "open.toml")
        result = run_steps(plan, "pytest-open", tmp_path)
        paths, tags = list(seen.paths), list(seen.tags)

    summary = result.summary
    steps = summary["steps"]
    assert [s["requests"] for s in steps] == [60, 0, 20, 30]
    assert [s["kind"] for s in steps] == ["rate"] * 4
    assert [s["level"] for s in steps] == [60, 0, 40, 30]
    assert [s["intended"] for s in steps] == [60, 0, 20, 30]
    assert all(s["late"] == 0 and s["unsent"] == 0 for s in steps)
    assert all(s["users"] == 0 for s in steps)

    rows = pq.read_table(result.requests_path).to_pylist()
    assert len(rows) == 110 == len(paths)
    for r in rows:
        assert r["intended_us"] <= r["start_us"]
        assert r["latency_us"] >= r["service_us"] > 0
        assert r["status"] == 200

    # What the engine sends, the collector parses: the rate of the phase in the tag.
    by_id = {r["req_id"]: r for r in rows}
    rates = {0: 60.0, 2: 40.0, 3: 30.0}
    for path, header in zip(paths, tags, strict=True):
        tag = find_tag(path)
        assert tag is not None and tag.run_id == "pytest-open" and tag.users == 0
        assert tag.rate == rates[by_id[tag.req_id]["step"]]
        assert parse_header(header) == tag
    # Weights 3:1 over the two requests.
    a = sum(p.startswith("/a?") for p in paths)
    assert abs(a - 3 * (len(paths) - a)) <= 4

    windows = step_windows(plan, summary)
    assert [(w["step"], w["kind"], w["name"]) for w in windows] == [
        (0, "rate", "steady"),
        (1, "rate", "rest"),
        (2, "rate", "burst"),
        (3, "rate", "ramp"),
    ]
    assert [round(w["end"] - w["start"], 3) for w in windows] == [1.0, 0.5, 0.5, 1.0]
    assert windows[2]["intended"] == 20 and windows[2]["level"] == 40


def test_open_loop_cap_reports_late_and_unsent(tmp_path: Path) -> None:
    phases = '[[load.phase]]\nduration = "1s"\narrival_rate = 200'
    with http_server() as (port, _seen):
        plan = parse_plan(open_plan(port, phases, "max_in_flight = 1"), "cap.toml")
        # One connection to Python's threaded server: whatever had to wait for it is
        # counted late, whatever still waited at the end unsent; nothing disappears.
        result = run_steps(plan, "pytest-cap", tmp_path)
    step = result.summary["steps"][0]
    assert step["intended"] == 200
    assert step["requests"] + step["unsent"] == 200
    assert step["unsent"] <= step["late"]


def test_closed_stages_run_with_their_users(tmp_path: Path) -> None:
    stages = """
think_time = { uniform = ["5ms", "15ms"] }

[[load.stage]]
users = 4
ramp = "0.6s"
hold = "0.6s"
"""
    with http_server() as (port, seen):
        plan = parse_plan(open_plan(port, stages), "stages.toml")
        result = run_steps(plan, "pytest-stages", tmp_path)
        paths = list(seen.paths)
    steps = result.summary["steps"]
    assert [(s["kind"], s["level"], s["users"]) for s in steps] == [
        ("users", 2.0, 4),
        ("users", 4.0, 4),
    ]
    rows = pq.read_table(result.requests_path).to_pylist()
    ramp_users = {r["users"] for r in rows if r["step"] == 0}
    assert ramp_users <= {0, 1, 2, 3, 4} and len(ramp_users) >= 3, ramp_users
    assert {r["users"] for r in rows if r["step"] == 1} == {4}
    assert all(r["intended_us"] == r["start_us"] for r in rows)
    assert all(r["service_us"] == r["latency_us"] for r in rows)
    assert all("pp_users=" in p for p in paths)
