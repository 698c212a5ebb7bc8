"""`pinchpoint load` beyond one URL: an open-loop rate, a plan file with steps and
several requests, the generator's self-check, and the live view's rows."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from load_helpers import http_server
from rich.console import Console

from pinchpoint.load.engine import run_steps
from pinchpoint.load.plain import _generator
from pinchpoint.plan.model import parse_plan
from pinchpoint.report.load_summary import render_summary
from pinchpoint.terminal.live import LiveView, second
from pinchpoint_lab.serving import serving

# Times a stack that waits more than it computes: one at a time, beside the parallel part.
pytestmark = [pytest.mark.timed, pytest.mark.timeout(90)]


def load(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pinchpoint", "load", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_rate_sends_that_many_requests_per_second_answered_or_not() -> None:
    with http_server() as (port, seen):
        done = load(f"http://127.0.0.1:{port}/r", "--rate", "200", "-d", "1.5", "--json")
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["model"] == "open"
        # 200/s for 1.5 s on a uniform schedule: 300 requests, all sent and all seen.
        assert summary["requests"] == seen.count() == 300
        assert summary["statuses"] == {"200": 300}
        [step] = summary["steps"]
        assert step["kind"] == "rate" and step["level"] == 200
        assert step["intended"] == 300 and step["unsent"] == 0
        assert 190 <= step["requests_per_s"] <= 210
        lag = summary["generator"]["send_lag_us"]
        assert 0 <= lag["p50"] <= lag["p99"] <= lag["max"]


def test_a_plan_file_runs_its_steps_and_reports_each_request(tmp_path: Path) -> None:
    with http_server() as (port, seen):
        plan = tmp_path / "plan.toml"
        plan.write_text(
            f"""
[target]
url = "http://127.0.0.1:{port}"
tag = false

[load]
lower = 1
upper = 3
step = 2
duration = "0.8s"
think_time = "5ms"
warmup = "0s"

[[request]]
path = "/a"
weight = 3

[[request]]
path = "/b"
"""
        )
        done = load(str(plan), "--json", "--out", str(tmp_path / "out"))
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        paths = Counter(p.split("?")[0] for p in seen.paths)
    assert [(s["kind"], s["level"]) for s in summary["steps"]] == [("users", 1), ("users", 3)]
    assert sum(s["requests"] for s in summary["steps"]) == summary["requests"]
    a, b = summary["endpoints"]
    assert (a["request"], a["requests"]) == ("GET /a", paths["/a"])
    assert (b["request"], b["requests"]) == ("GET /b", paths["/b"])
    # Each user goes through the 3:1 cycle from its own place in it: at most 3 users stop
    # part of the way through a cycle.
    assert abs(a["requests"] - 3 * b["requests"]) <= 9
    assert a["latency_us"]["p50"] <= a["latency_us"]["p99"] <= a["latency_us"]["max"]
    # The histograms are kept per step and per request of the plan.
    histograms = json.loads((tmp_path / "out" / "histograms.json").read_text())
    assert {"0", "1", "0/0", "0/1", "1/0", "1/1"} <= set(histograms)


def test_a_missing_plan_file_is_a_usage_error(tmp_path: Path) -> None:
    done = load(str(tmp_path / "nope.toml"))
    assert done.returncode == 2
    assert "nope.toml" in done.stderr


def test_a_saturated_generator_is_flagged_in_every_output(tmp_path: Path) -> None:
    plan = parse_plan(
        '[target]\nurl = "http://127.0.0.1:1"\n[load]\nthreads = 1\nusers = 1\nduration = 1\n'
        '[[request]]\npath = "/"\n',
        "t",
    )
    assert _generator(plan, cpu_s=0.95, wall_s=1.0, steps=[])["saturated"]
    assert not _generator(plan, cpu_s=0.5, wall_s=1.0, steps=[])["saturated"]
    summary = {
        "requests": 10,
        "duration_s": 1.0,
        "requests_per_s": 10.0,
        "connections": 1,
        "model": "closed",
        "latency_us": {"p50": 1000},
        "steps": [],
        "endpoints": [],
        "statuses": {"200": 10},
        "errors": {},
        "generator": _generator(plan, cpu_s=0.95, wall_s=1.0, steps=[]),
    }
    out = io.StringIO()
    render_summary(summary, Console(file=out, width=200))
    assert "these results measure the generator, not the target" in out.getvalue()


def test_each_snapshot_carries_the_latencies_of_its_own_second() -> None:
    with http_server() as (port, _):
        plan = parse_plan(
            f'[target]\nurl = "http://127.0.0.1:{port}"\n[load]\nlower = 2\nupper = 2\n'
            'duration = "2.5s"\nthink_time = "2ms"\n[[request]]\npath = "/"\n',
            "t",
        )
        snapshots: list[dict] = []
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            result = run_steps(plan, "live", Path(tmp), on_tick=snapshots.append)
    assert len(snapshots) >= 2
    windows = [s["window_requests"] for s in snapshots]
    # Windows do not overlap: together they hold at most every request of the run.
    assert sum(windows) <= result.rows
    assert all(n > 0 for n in windows)
    for s in snapshots:
        assert 0 < s["window_p50_us"] <= s["window_p99_us"]
    rows = [
        second(s, prev, i + 1.0)
        for i, (s, prev) in enumerate(zip(snapshots, [None, *snapshots][:-1], strict=True))
    ]
    assert sum(r["requests"] for r in rows) == snapshots[-1]["requests"]
    assert rows[0]["load"] == "2 users"


def test_the_live_view_draws_on_a_terminal_and_not_in_a_pipe() -> None:
    snap = {
        "requests": 500,
        "errors": 2,
        "step": 0,
        "users": 0,
        "kind": "rate",
        "level": 500.0,
        "late": 3,
        "window_requests": 500,
        "window_p50_us": 1500,
        "window_p99_us": 9000,
    }
    screen = io.StringIO()
    with LiveView(Console(file=screen, force_terminal=True, width=120)) as view:
        view(snap)
        drawn = screen.getvalue()
    assert "500/s" in drawn and "1.50" in drawn and "9.00" in drawn
    pipe = io.StringIO()
    with LiveView(Console(file=pipe, force_terminal=False)) as view:
        view(snap)
    assert pipe.getvalue() == ""
    quiet = io.StringIO()
    with LiveView(Console(file=quiet, force_terminal=True), quiet=True) as view:
        view(snap)
    assert quiet.getvalue() == ""


def test_a_url_load_is_built_as_a_plan_without_toml_text_between() -> None:
    from pinchpoint.load.plain import UrlLoad, url_plan
    from pinchpoint.plan.errors import PlanError

    # A quote or newline in the URL cannot reach a TOML parser and change the plan.
    plan = url_plan(UrlLoad(url='http://127.0.0.1:9/a"b?x=1\n[load]', connections=3))
    assert plan.request[0].path.startswith('/a"b?x=1')
    assert (plan.load.lower, plan.load.upper) == (3, 3)
    opened = url_plan(UrlLoad(url="http://127.0.0.1:9/", rate=250.0, seconds=2.0))
    assert opened.load.open and opened.load.phase[0].arrival_rate == 250.0
    with pytest.raises(PlanError, match=r"command line: load\.threads"):
        url_plan(UrlLoad(url="http://127.0.0.1:9/", threads=-1))


class _Slow(BaseHTTPRequestHandler):
    """20 ms a request."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        time.sleep(0.02)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        pass


def _ticks(text: str) -> list[dict]:
    import tempfile

    snapshots: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        run_steps(parse_plan(text, "t"), "live", Path(tmp), on_tick=snapshots.append)
    return snapshots


def test_snapshots_count_the_requests_in_flight_and_the_send_lag_of_their_second() -> None:
    with serving(_Slow) as port:
        head = f'[target]\nurl = "http://127.0.0.1:{port}"\n[[request]]\npath = "/"\n'
        closed = _ticks(head + '[load]\nusers = 3\nduration = "2.5s"\n')
        # 100 arrivals a second on one connection that serves 50: they wait, ever longer.
        opened = _ticks(
            head + "[load]\nmax_in_flight = 1\n[[load.phase]]\nduration = 2.5\narrival_rate = 100\n"
        )
    assert [s["in_flight"] for s in closed[:-1]] and all(
        1 <= s["in_flight"] <= 3 for s in closed[:-1]
    ), [s["in_flight"] for s in closed]
    assert closed[-1]["in_flight"] == 0  # the run has ended
    assert all(s["send_lag_max_us"] == 0 for s in closed)
    assert all(s["in_flight"] <= 1 for s in opened)
    lags = [s["send_lag_max_us"] for s in opened[:-1]]
    # After one second, arrivals wait about half a second behind their times, and more.
    assert lags[1] > 300_000 and lags[1] >= lags[0], lags
