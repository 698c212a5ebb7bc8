"""WebSockets against the demo's ASGI app under gunicorn's uvicorn workers, behind real
nginx, in closed loop (flow steps) and open loop (requests): frames sent and received
with their own latency, checks and captures on what came back, and each connection's
upgrade tagged, logged by nginx and matched."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl
import pytest

from pinchpoint import pipeline
from pinchpoint.demo import DemoStack
from pinchpoint.demo.plan import component_lines
from pinchpoint.pipeline import RunOutcome
from pinchpoint.plan.model import parse_plan
from pinchpoint.rundir import files
from pinchpoint_lab.needs import nginx_missing

pytestmark = pytest.mark.skipif(bool(nginx_missing()), reason=nginx_missing())

DELAY_MS = 20
PLAN = f"""
[target]
url = "URL"

[load]
users = 4
duration = "2s"
warmup = "0s"

[[flow]]
name = "chat"

[[flow.step]]
name = "echo"
ws = "/ws/echo?delay_ms={DELAY_MS}"

[[flow.step.message]]
name = "hello"
send = "hello ${{user_index}}"
check = {{ contains = "hello ${{user_index}}" }}

[[flow.step.message]]
send = "raw"
binary = true
check = {{ matches = "^raw$" }}

[[flow.step]]
name = "room"
ws = "/ws/chat"

[[flow.step.message]]
name = "welcome"
check = {{ json = {{ "$.type" = "welcome" }} }}

[[flow.step.message]]
name = "say"
send = '{{"say": "hi ${{iteration}}"}}'
capture = [{{ name = "n", json = "$.n" }}]
check = {{ json = {{ "$.said" = "hi ${{iteration}}", "$.n" = {{ ge = 1 }} }} }}
"""
NAMES = [
    "chat/echo",
    "chat/echo/hello",
    "chat/echo/#2",
    "chat/room",
    "chat/room/welcome",
    "chat/room/say",
]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoStack]:
    with DemoStack(tmp_path_factory.mktemp("stack"), workers=1, worker_class="uvicorn") as s:
        yield s


def _new_lines(log: Path, run: Callable[[], RunOutcome]) -> tuple[RunOutcome, str]:
    """What `run` returns, and the lines nginx logged meanwhile."""
    before = log.stat().st_size if log.exists() else 0
    outcome = run()
    with log.open("rb") as f:
        f.seek(before)
        return outcome, f.read().decode()


def test_frames_are_timed_checked_and_each_connection_is_matched_in_nginx(
    stack: DemoStack, tmp_path: Path
) -> None:
    text = PLAN.replace("URL", stack.url) + "\n".join(component_lines(stack.components()))
    outcome, log = _new_lines(
        stack.nginx_access_log,
        lambda: pipeline.execute(parse_plan(text, "plan.toml"), text, tmp_path / "runs"),
    )
    refused = _not_a_websocket(stack, tmp_path)
    requests = pl.read_parquet(outcome.run_dir / files.REQUESTS)
    run = json.loads((outcome.run_dir / files.RUN).read_text())
    assert run["endpoint_names"] == NAMES
    assert requests["error"].null_count() == requests.height, run["error_reasons"]
    by = {e: requests.filter(pl.col("endpoint") == e) for e in range(len(NAMES))}
    connections = by[0].height
    assert connections > 20
    # Every connection carried its messages: one record each.
    for e in (1, 2):
        assert connections - 4 <= by[e].height <= connections
    assert by[3].height - 4 <= by[4].height <= by[3].height
    assert by[4].height - 4 <= by[5].height <= by[4].height
    # An echo answers after its delay; its connection lasts both messages and the close.
    for e in (1, 2):
        assert by[e]["latency_us"].min() >= DELAY_MS * 1000
    assert by[0]["latency_us"].median() >= 2 * DELAY_MS * 1000
    assert set(requests["status"].to_list()) == {101}
    # nginx logged each upgrade once, as switched, with the run's tag.
    upgrades = [line for line in log.splitlines() if "GET /ws/echo" in line]
    assert abs(len(upgrades) - connections) <= 4
    assert all(" 101 " in line and f"pp_run={run['run_id']}" in line for line in upgrades)
    named = {e["endpoint"]: e for e in outcome.verdict["endpoints"]}
    top = named["chat/echo"]["steps"][-1]
    assert top["tiers"]["nginx"]["count"] >= top["requests"] * 0.9
    # nginx's time of an upgrade is the connection's life, as the engine measured it.
    assert top["tiers"]["nginx"]["p50_ms"] >= 2 * DELAY_MS

    # A path that answers 200 is no WebSocket: each upgrade fails its check, saying why.
    statuses, reasons = refused
    assert statuses == {200}
    assert any("the upgrade was answered 200, not 101 Switching Protocols" in r for r in reasons)


def _not_a_websocket(stack: DemoStack, tmp_path: Path) -> tuple[set[int], list[str]]:
    text = PLAN.replace("URL", stack.url).replace("/ws/echo?delay_ms=20", "/healthz")
    text = text.replace('duration = "2s"', 'duration = "0.5s"')
    outcome = pipeline.execute(parse_plan(text, "plan.toml"), text, tmp_path / "refused")
    requests = pl.read_parquet(outcome.run_dir / files.REQUESTS)
    run = json.loads((outcome.run_dir / files.RUN).read_text())
    assert requests["error"].to_list() == ["check"] * requests.height
    assert set(requests["endpoint"].to_list()) == {0}
    return set(requests["status"].to_list()), run["error_reasons"]["check"]


OPEN = f"""
[target]
url = "URL"

[load]
phase = [{{ duration = "1.5s", arrival_rate = 40 }}, {{ duration = "1.5s", arrival_rate = 80 }}]

[[request]]
ws = "/ws/echo?delay_ms={DELAY_MS}"
message = [{{ name = "hi", send = "hi", check = {{ contains = "hi" }} }}, {{ send = "again" }}]
"""


def test_open_loop_arrivals_each_open_a_connection_at_their_rate(
    stack: DemoStack, tmp_path: Path
) -> None:
    text = OPEN.replace("URL", stack.url) + "\n".join(component_lines(stack.components()))
    outcome, log = _new_lines(
        stack.nginx_access_log,
        lambda: pipeline.execute(parse_plan(text, "plan.toml"), text, tmp_path / "open"),
    )
    requests = pl.read_parquet(outcome.run_dir / files.REQUESTS)
    run = json.loads((outcome.run_dir / files.RUN).read_text())
    assert run["endpoint_names"] == [
        "WS /ws/echo?delay_ms=20",
        "WS /ws/echo?delay_ms=20/hi",
        "WS /ws/echo?delay_ms=20/#2",
    ]
    assert requests["error"].null_count() == requests.height, run["error_reasons"]
    connections = requests.filter(pl.col("endpoint") == 0)
    # 40/s then 80/s for 1.5 s each: the connections arrive at the plan's rates.
    per_step = dict(connections.group_by("step").len().iter_rows())
    assert abs(per_step[0] - 60) <= 3 and abs(per_step[1] - 120) <= 3, per_step
    for e in (1, 2):
        answered = requests.filter(pl.col("endpoint") == e)
        assert answered.height == connections.height
        assert answered["latency_us"].min() >= DELAY_MS * 1000
    # A connection's life counts from its arrival's intended time, as a request's does.
    assert (connections["latency_us"] >= connections["service_us"]).all()
    assert connections["service_us"].median() >= 2 * DELAY_MS * 1000
    upgrades = [line for line in log.splitlines() if "GET /ws/echo" in line]
    assert len(upgrades) == connections.height
    assert all(" 101 " in line and "pp_rate=" in line for line in upgrades)
    named = {e["endpoint"]: e for e in outcome.verdict["endpoints"]}
    top = named["WS /ws/echo?delay_ms=20"]["steps"][-1]
    assert top["tiers"]["nginx"]["count"] >= top["requests"] * 0.9
