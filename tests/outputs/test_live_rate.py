"""An open-loop run's rate changed while it goes, from the terminal (`pinchpoint control
--rate`) against a real server on loopback that notes when each request came, and from the
live page's rate field in headless Chromium; a change without the run's token, past the
plan's largest rate or of users refused; the change in run.json, the verdict, the report
and the terminal."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import live_helpers as live
import pytest

from ok_target import OkTarget
from pinchpoint.rundir import files
from pinchpoint_lab.browser import browser, chromium
from pinchpoint_lab.serving import serving

# Rates are measured against the clock: one test at a time, at normal priority.
pytestmark = pytest.mark.timed

# When each tagged request reached the server (unix seconds).
ARRIVED: list[float] = []
ARRIVED_LOCK = threading.Lock()


class _Target(OkTarget):
    """Answers at once; notes when each tagged request came."""

    def do_GET(self) -> None:
        if "pp_req" in parse_qs(urlsplit(self.path).query):
            with ARRIVED_LOCK:
                ARRIVED.append(time.time())
        self.answer()


def _received_rate(start: float, end: float) -> float:
    """Requests per second the server received between `start` and `end`, their first
    and last 200 ms left out (a change lands within the scheduler's 20 ms poll)."""
    a, b = start + 0.2, end - 0.2
    with ARRIVED_LOCK:
        n = sum(1 for t in ARRIVED if a <= t < b)
    return n / (b - a)


def _plan(target: int, first_s: float) -> str:
    """50/s for `first_s`, then 200/s for a second."""
    first, then = (
        f'duration = "{first_s}s"\narrival_rate = 50',
        'duration = "1s"\narrival_rate = 200',
    )
    return live.staged_plan(target, "phase", first, then)


@pytest.mark.timeout(120)
def test_the_terminal_changes_an_open_loop_run_s_rate(tmp_path: Path) -> None:
    ARRIVED.clear()
    with serving(_Target) as target, live.run(tmp_path, _plan(target, 3)) as running:
        url = running.page_url()
        base, token = live.base_and_token(url)
        live.until(lambda: len(ARRIVED) >= 25, 30, "the load's first half second")
        control = f"{base}/control?rate=200&by=terminal"
        assert httpx.post(control, timeout=5).status_code == 401
        held = {"Authorization": f"Bearer {token}"}
        too_fast = httpx.post(f"{base}/control?rate=201", headers=held, timeout=5)
        assert too_fast.status_code == 400
        assert too_fast.json() == {
            "error": "rate: 201: above 0 and at most 200/s, the plan's largest phase rate"
        }
        users = httpx.post(f"{base}/control?users=3", headers=held, timeout=5)
        assert users.status_code == 409
        assert users.json() == {"error": "users: this run's load is changed by its rate"}
        assert live.ask_from_terminal(url, "--rate", "200") == "Rate set to 200/s (change 1)"
        output = running.finished(60)
    folder, run = live.written(tmp_path)
    first, changed = run["steps"]  # the plan's second phase never ran
    assert (first["kind"], first["level"], "manual" not in first) == ("rate", 50.0, True)
    assert (changed["step"], changed["kind"], changed["level"]) == (1, "rate", 200.0)
    assert changed["manual"]["by"] == "terminal"
    assert changed["manual"]["at"] == changed["start"] == first["end"]
    # Still the planned end: 4 s after the load began.
    assert abs(changed["end"] - first["start"] - 4.0) < 0.3, run["steps"]
    # The server saw 50/s before the change and 200/s after it.
    before = _received_rate(first["start"], first["end"])
    after = _received_rate(changed["start"], changed["end"])
    assert abs(before - 50) <= 5 and abs(after - 200) <= 20, (before, after)
    # Uniform arrivals: the phase sends rate × its length, every one on time.
    span = changed["end"] - changed["start"]
    assert abs(changed["intended"] - 200 * span) <= 2 and changed["unsent"] == 0, changed
    [change] = live.valid_verdict(folder)["load_changes"]
    assert (change["step"], change["rate"], change["by"]) == (1, 200.0, "terminal")
    assert "Rate set to 200/s from the terminal" in output
    at = time.strftime("%H:%M:%S", time.gmtime(change["at"]))
    assert f"Load changed: Step 2: 200 req/s from {at} UTC, set from the terminal" in output
    report = (folder / files.REPORT).read_text()
    # The timeline's step (its label JSON-escaped in the page's script).
    assert "200.0 req\\u002fs, set from the terminal" in report
    assert ">200.0 (terminal)<" in report  # the step table's target rate


@pytest.mark.skipif(chromium() is None, reason="chromium not installed (apt: chromium)")
@pytest.mark.timeout(180)
def test_the_live_page_s_control_changes_the_rate_in_chromium(tmp_path: Path) -> None:
    ARRIVED.clear()
    with (
        browser(tmp_path / "chromium") as page,
        serving(_Target) as target,
        live.run(tmp_path, _plan(target, 30)) as running,
    ):
        answer, output = live.ask_from_page(
            page, running, "control-rate-label", "control-rate", "120", "control-users-label"
        )
    assert answer == "asked for 120 requests/s"
    _, run = live.written(tmp_path)
    assert [(s["kind"], s["level"]) for s in run["steps"]] == [("rate", 50.0), ("rate", 120.0)]
    assert run["steps"][1]["manual"]["by"] == "page"
    assert "Rate set to 120/s from the page" in output
