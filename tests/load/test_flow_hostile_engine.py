"""The engine under hostile flow input from the target or the data: a value that cannot
go in a header, a JSONPath that multiplies nodes on a small body. Each is a counted
error with its reason, and the run ends on time with bounded memory."""

from __future__ import annotations

import json
import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from load_helpers import serving

from pinchpoint import _engine
from pinchpoint.load.engine_config import engine_config
from pinchpoint.plan.model import parse_plan
from pinchpoint_lab.serving import Quiet

pytestmark = pytest.mark.timeout(90)

# 241 bytes: 120 arrays, one in the other. `..*` ten times selects every chain of ten
# nested arrays, C(120, 10) ~ 10^14 nodes: evaluated as is, memory grows without end.
NESTED = ("[" * 120 + "1" + "]" * 120).encode()
STARS = "$" + "..*" * 10


class _Target(Quiet):
    seen: list[str]

    def do_GET(self) -> None:
        self.seen.append(self.path.split("?")[0])
        body = NESTED if self.path.startswith("/nested") else json.dumps({"ok": 1}).encode()
        self.answer(200, body, "application/json")


@contextmanager
def _target() -> Iterator[tuple[int, list[str]]]:
    seen: list[str] = []
    with serving(type("T", (_Target,), {"seen": seen})) as port:
        yield port, seen


def _plan(port: int, flow: str, feed: Path | None = None) -> str:
    feed_line = f'feed = {{ file = "{feed}" }}\n' if feed else ""
    return f"""[target]
url = "http://127.0.0.1:{port}"
tag = false

[load]
users = 2
duration = "1s"
warmup = "0s"
timeout = "2s"
threads = 2

[[flow]]
name = "f"
{feed_line}{flow}"""


def _run(config: dict, limit_s: float = 20.0) -> tuple[dict, float]:
    """The engine's summary and the seconds it took; fails if it does not end in time."""
    started = time.monotonic()
    run = _engine.start(config)
    while time.monotonic() - started < limit_s:
        summary = run.wait(0.25)
        if summary is not None:
            return summary, time.monotonic() - started
    run.abandon()
    raise AssertionError(f"a 1 s run did not end within {limit_s:g} s")


def test_a_value_that_cannot_go_in_a_header_is_a_capture_error_and_the_run_ends(
    tmp_path: Path,
) -> None:
    feed = tmp_path / "tokens.csv"
    feed.write_text("token\nfine\n")
    flow = '[[flow.step]]\npath = "/a"\nheaders = { Authorization = "Bearer ${token}" }\n'
    with _target() as (port, seen):
        config = engine_config(parse_plan(_plan(port, flow, feed)), "r1", tmp_path / "rec")
        # The plan refuses such a feed (tests/test_plan_flow_inputs.py); the engine, given
        # one anyway, sends nothing of it and still ends: every request fails at once.
        config["flows"][0]["feed"]["rows"] = [["a\r\nX-Injected: 1"]]
        summary, took = _run(config)
        sent = len(seen)
    assert took < 5
    assert sent == 0
    assert summary["records"] == sum(s["requests"] for s in summary["steps"])
    # Each user pauses 10 ms before trying again: about 200 in 1 s, not millions.
    assert 50 <= summary["records"] <= 400, summary["records"]
    assert sum(s["errors"].get("capture", 0) for s in summary["steps"]) == summary["records"]
    assert summary["error_reasons"]["capture"] == [
        "f/GET /a: ${token} in header Authorization holds a CR, LF or NUL: not sent"
    ]


def test_a_jsonpath_that_multiplies_nodes_stops_at_its_budget_with_the_reason(
    tmp_path: Path,
) -> None:
    flow = f"""[[flow.step]]
path = "/nested"
capture = [{{ name = "v", json = "{STARS}" }}]

[[flow.step]]
path = "/after/${{v}}"
"""
    before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with _target() as (port, seen):
        config = engine_config(parse_plan(_plan(port, flow)), "r2", tmp_path / "rec")
        summary, took = _run(config)
        paths = list(seen)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before_kb) / 1024
    assert took < 10
    assert grown_mb < 200, f"memory grew by {grown_mb:.0f} MB"
    # Every response answered, every capture stopped: none of the second step was sent.
    assert set(paths) == {"/nested"}
    assert summary["records"] == len(paths) >= 2
    assert sum(s["errors"].get("capture", 0) for s in summary["steps"]) == len(paths)
    reasons = summary["error_reasons"]["capture"]
    assert reasons == [
        f"f/GET /nested: capture json {STARS}: would visit more than 2000000 JSON nodes "
        "of this body: stopped (status 200)"
    ]
