"""`pinchpoint run --serve HOST:PORT`: the steps and the verdict so far from synthetic
snapshots, the token off loopback, the event stream, and a real run followed in headless
Chromium from its first second to its report, with no console error."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import live_helpers as live
import numpy as np
import pytest

from ok_target import OkTarget
from pinchpoint.load.hdr import Histogram
from pinchpoint.outputs.live_page import COOKIE, LivePage, token_for
from pinchpoint.outputs.live_state import LiveRun
from pinchpoint.rundir import files
from pinchpoint_lab.browser import browser, chromium
from pinchpoint_lab.ports import free_port
from pinchpoint_lab.serving import serving


def _snapshot(requests: int, step: int, users: int, ms: list[float]) -> dict[str, Any]:
    return {
        "requests": requests,
        "errors": 0,
        "step": step,
        "users": users,
        "kind": "users",
        "level": float(users),
        "window_hdr_v2": Histogram.of(np.array([int(m * 1000) for m in ms])).v2(),
    }


def _fed(run: LiveRun, throughput: list[float], latency_ms: list[float]) -> list[dict]:
    """Two seconds per step of `throughput` req/s at `latency_ms`, users 2, 4, 6, ..."""
    events, total, elapsed = [], 0, 0.0
    for step, (rate, ms) in enumerate(zip(throughput, latency_ms, strict=True)):
        for _ in range(2):
            total += int(rate)
            elapsed += 1.0
            snap = _snapshot(total, step, 2 * (step + 1), [ms] * int(rate))
            events.append(run.add(snap, elapsed))
    return events


def test_the_steps_so_far_count_each_second_and_their_latency() -> None:
    run = LiveRun("r1")
    events = _fed(run, [100, 200], [10.0, 12.0])
    last = events[-1]["step"]
    assert last == {
        "step": 1, "load": "4 users", "level": 4.0, "seconds": 2, "requests": 400,
        "errors": 0, "throughput": 200.0, "mean_ms": pytest.approx(12.0, rel=0.01),
        "p50_ms": pytest.approx(12.0, rel=0.01), "p95_ms": pytest.approx(12.0, rel=0.01),
        "p99_ms": pytest.approx(12.0, rel=0.01),
    }  # fmt: skip
    assert events[-1]["row"]["requests"] == 200
    assert events[-1]["row"]["total"] == 600
    assert [s["requests"] for s in run.state()["steps"]] == [200, 400]


def test_each_step_counts_its_calls_and_stream_messages_apart() -> None:
    run = LiveRun("r1")
    # The engine's counts so far of each kind, as its snapshots give them.
    so_far = [(10, 1, 30), (20, 2, 60), (30, 3, 90), (40, 8, 120)]
    for at, (calls, failed, messages) in enumerate(so_far):
        snap = _snapshot(calls + messages, at // 2, 2, [5.0])
        snap["errors"] = failed
        snap["by_kind"] = {
            "grpc_call": {"requests": calls, "errors": failed},
            "grpc_message": {"requests": messages, "errors": 0},
        }
        event = run.add(snap, float(at + 1))
    assert event["step"]["kinds"] == {
        "grpc_call": {"requests": 20, "errors": 6},
        "grpc_message": {"requests": 60, "errors": 0},
    }
    assert run.state()["steps"][0]["kinds"]["grpc_call"] == {"requests": 20, "errors": 2}
    # A run of HTTP requests alone has no kinds to tell apart.
    plain = LiveRun("r2")
    snap = _snapshot(5, 0, 1, [5.0]) | {"by_kind": {"request": {"requests": 5, "errors": 0}}}
    assert "kinds" not in plain.add(snap, 1.0)["step"]


def test_the_verdict_so_far_waits_for_three_steps_then_names_the_knee() -> None:
    run = LiveRun("r1")
    # Throughput scales to 6 users, then stays; latency grows as the users queue.
    throughput = [100, 200, 300, 305, 302, 304, 301]
    latency = [20.0, 20.0, 20.0, 26.0, 33.0, 39.0, 46.0]
    events = _fed(run, throughput, latency)
    verdicts = [e["verdict"] for e in events]
    assert verdicts[2] == "no knee yet: 1 step ended, 3 needed"
    assert verdicts[6] == "no knee yet: throughput still scales up to 6 users"
    assert verdicts[10] == "no knee yet: throughput still scales up to 10 users"
    # The steps of 2 to 12 users ended: the knee between the third and the fourth.
    assert verdicts[-1].startswith("knee near 6.")
    assert " users (95% interval 6" in verdicts[-1]


def test_off_loopback_a_token_is_made_and_on_loopback_none_is_needed() -> None:
    assert token_for("127.0.0.1", None) is None
    assert token_for("::1", None) is None
    assert token_for("localhost", None) is None
    made = token_for("0.0.0.0", None)
    assert made is not None and len(made) >= 32
    assert token_for("0.0.0.0", None) != made
    assert token_for("127.0.0.1", "given-token-1234") == "given-token-1234"


def test_with_a_token_every_path_needs_it_once_then_the_cookie_holds_it() -> None:
    with LivePage("127.0.0.1", 0, "r1", token="s3cret-token-for-tests") as page:
        base = f"http://127.0.0.1:{page.port}"
        for path in ("/", "/state", "/plotly.js", "/events"):
            assert httpx.get(base + path, timeout=5).status_code == 401, path
        assert httpx.get(base + "/state?token=wrong", timeout=5).status_code == 401
        with httpx.Client(base_url=base, timeout=5) as client:
            first = client.get("/?token=s3cret-token-for-tests")
            assert first.status_code == 200
            assert "HttpOnly" in first.headers["set-cookie"]
            assert client.cookies.get(COOKIE) == "s3cret-token-for-tests"
            assert client.get("/state").json()["run_id"] == "r1"
        bearer = {"Authorization": "Bearer s3cret-token-for-tests"}
        assert httpx.get(base + "/state", headers=bearer, timeout=5).status_code == 200
        assert page.url == f"{base}/?token=s3cret-token-for-tests"


def _events(port: int, count: int) -> list[tuple[str, dict]]:
    out: list[tuple[str, dict]] = []
    with httpx.stream("GET", f"http://127.0.0.1:{port}/events", timeout=10) as response:
        name = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                out.append((name, json.loads(line[len("data: ") :])))
                if len(out) == count:
                    return out
    return out


def test_a_page_that_connects_late_gets_everything_so_far_then_each_second(
    tmp_path: Path,
) -> None:
    report = tmp_path / "report.html"
    report.write_text("<html><body>the report</body></html>")
    with LivePage("127.0.0.1", 0, "r1") as page:
        for i in range(3):
            page(_snapshot(10 * (i + 1), 0, 2, [5.0] * 10))
        got: list[tuple[str, dict]] = []
        reader = _thread(lambda: got.extend(_events(page.port, 4)))
        live.until(lambda: len(page.listeners) == 1, 10, "the listener", every_s=0.02)
        page(_snapshot(40, 1, 4, [6.0] * 10))
        page.stage("collect")
        page.finish(report, "gunicorn: its pool")
        reader.join(10)
        assert [name for name, _ in got] == ["state", "second", "stage", "final"]
        state = got[0][1]
        assert [r["total"] for r in state["rows"]] == [10, 20, 30]
        assert got[1][1]["row"]["total"] == 40
        assert got[3][1] == {"headline": "gunicorn: its pool"}
        page_now = httpx.get(f"http://127.0.0.1:{page.port}/", timeout=5).text
        assert page_now == "<html><body>the report</body></html>"


def _thread(target: Any) -> Any:
    import threading

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_an_address_that_cannot_be_listened_on_stops_before_the_run(tmp_path: Path) -> None:
    (tmp_path / "plan.toml").write_text(
        '[target]\nurl = "http://127.0.0.1:9"\n\n[load]\nusers = 1\nduration = "1s"\n\n'
        '[[request]]\npath = "/"\n'
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "pinchpoint", "run", "plan.toml", "-q", "--serve",
             f"127.0.0.1:{port}"],
            cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert done.returncode == 2
    assert f"--serve 127.0.0.1:{port}: cannot listen" in done.stderr
    assert not (tmp_path / "runs").exists()


# A real run followed in headless Chromium.


class _Target(OkTarget):
    """5 ms a request, on one thread at a time: a knee at about one user."""

    delay_s = 0.005


def _plan(target: int) -> str:
    return (
        f'[target]\nurl = "http://127.0.0.1:{target}"\n\n'
        '[load]\nlower = 1\nupper = 4\nstep = 1\nduration = "2s"\nwarmup = "0s"\n\n'
        '[[request]]\npath = "/"\n'
    )


@pytest.mark.skipif(chromium() is None, reason="chromium not installed (apt: chromium)")
@pytest.mark.timeout(180)
@pytest.mark.timed  # judges the seconds between updates: one at a time
def test_chromium_follows_a_real_run_each_second_and_ends_on_its_report(tmp_path: Path) -> None:
    port = free_port()
    seen: list[tuple[float, int, str]] = []  # (page's clock, updates, stage)
    # Chromium first: on a busy host it may take longer to start than the run lasts.
    with browser(tmp_path / "chromium") as page, serving(_Target) as target:
        serve = f"127.0.0.1:{port}"
        with live.run(tmp_path, _plan(target), "-q", serve=serve, linger_s=30) as running:
            live.until(lambda: _answers(port), 60, "the live page", every_s=0.02)
            page.open(f"http://127.0.0.1:{port}/")
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                state = page.evaluate(
                    "[document.body.dataset.updates || null, document.body.dataset.updatedAt, "
                    "(document.getElementById('stage') || {}).textContent || '', "
                    "document.getElementById('latency-users') !== null]"
                )
                if state is not None and state[3]:  # the report replaced the live page
                    break
                if state is not None and state[0] is not None and int(state[0]) > 0:
                    seen.append((int(state[1]) / 1000, int(state[0]), state[2]))
                time.sleep(0.1)
            dom = page.evaluate("document.getElementById('verdict').textContent")
            title = page.evaluate("document.title")
            time.sleep(0.5)
            errors = list(page.errors)
        [run_dir] = (tmp_path / "runs").iterdir()
        verdict = json.loads((run_dir / files.VERDICT).read_text())
        running.proc.terminate()
        running.proc.wait(30)
        output = running.output()
    assert errors == [], errors
    assert verdict["headline"] in " ".join(dom.split()), (dom, output)
    assert title == f"pinchpoint · {run_dir.name}"  # the report's, not the live page's
    running = sorted({(t, n) for t, n, stage in seen if stage == "running"})
    assert len(running) >= 5, seen
    # During the load each second is shown as it ends: one update a second, as the page's
    # own clock saw them arrive.
    (first_s, first), (last_s, last) = running[0], running[-1]
    assert last - first >= last_s - first_s - 1, running
    gaps = np.diff([t for t, _ in running])
    assert 0.8 <= np.median(gaps) <= 1.2, gaps
    assert gaps.max() <= 2.0, gaps  # a second late at most, on a busy host


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/state", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_the_plan_s_output_table_serves_and_a_taken_address_is_named_with_the_plan(
    tmp_path: Path,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        (tmp_path / "plan.toml").write_text(
            '[target]\nurl = "http://127.0.0.1:9"\n\n[load]\nusers = 1\nduration = "1s"\n\n'
            f'[[request]]\npath = "/"\n\n[output]\nserve = "127.0.0.1:{port}"\n'
        )
        done = subprocess.run(
            [sys.executable, "-m", "pinchpoint", "run", "plan.toml", "-q"],
            cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert done.returncode == 2
    assert f"plan.toml: [output] serve 127.0.0.1:{port}: cannot listen" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_an_output_address_that_is_not_host_port_is_refused_with_its_line() -> None:
    from pinchpoint.plan.errors import PlanError
    from pinchpoint.plan.model import parse_plan

    text = (
        '[target]\nurl = "http://127.0.0.1:9"\n\n[load]\nusers = 1\nduration = "1s"\n\n'
        '[[request]]\npath = "/"\n\n[output]\nmetrics = "9464"\n'
    )
    with pytest.raises(PlanError) as caught:
        parse_plan(text, "plan.toml")
    assert str(caught.value) == "plan.toml:12: output.metrics: '9464': expected HOST:PORT"
